"""The benchmarks' Keras models: their settings reach the layers, and bad settings name themselves."""

import keras
import pytest

from benchmarks.lib.models import resnet_cifar


def test_the_batch_norm_momentum_reaches_every_batch_normalisation_layer():
    model = resnet_cifar(depth=8, width=4, batch_norm_momentum=0.9)
    momenta = {layer.momentum for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)}
    assert momenta == {0.9}
    default = resnet_cifar(depth=8, width=4)
    assert {layer.momentum for layer in default.layers if isinstance(layer, keras.layers.BatchNormalization)} == {0.99}


@pytest.mark.parametrize("settings, named", [
    ({"depth": 9}, "depth"), ({"width": 0}, "width"),
    ({"batch_norm_momentum": 1.0}, "batch_norm_momentum"), ({"batch_norm_momentum": True}, "batch_norm_momentum"),
    ({"batch_norm_momentum": "0.9"}, "batch_norm_momentum"),
])
def test_bad_settings_raise_naming_the_setting_and_the_value(settings, named):
    with pytest.raises(ValueError, match=named) as raised:
        resnet_cifar(**{"depth": 8, "width": 4, **settings})
    assert repr(next(iter(settings.values()))) in str(raised.value)
