"""Keras 3 models of the benchmarks."""

from __future__ import annotations

import functools

import keras
from keras import layers


def resnet_cifar(depth: int = 20, width: int = 16, num_classes: int = 10, input_shape=(32, 32, 3),
                 batch_norm_momentum: float = 0.99) -> keras.Model:
    """The CIFAR-style ResNet of He et al. (2016, §4.2): ``depth = 6n + 2``, widths w, 2w, 4w.

    ResNet-20 and ResNet-32 are ``depth=20`` and ``depth=32`` at ``width=16``; ``depth=8``
    (one block per stage) is the quick model. Outputs logits. ``batch_norm_momentum`` is
    Keras's (0.99 by default; PyTorch's default is 0.9 in these terms): the moving statistics
    that evaluation uses follow the weights over about ``1 / (1 - momentum)`` steps.

    Example:

    >>> model = resnet_cifar(depth=8, width=8)
    >>> model.output_shape, model.count_params() < 30_000
    ((None, 10), True)
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 8 or (depth - 2) % 6:
        raise ValueError(f"depth: expected 6n + 2 with n >= 1 (8, 14, 20, 32, ...), got {depth!r}")
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width: expected a positive int, got {width!r}")
    if isinstance(batch_norm_momentum, bool) or not isinstance(batch_norm_momentum, (int, float)) \
            or not 0 <= batch_norm_momentum < 1:
        raise ValueError(f"batch_norm_momentum: expected a number in [0, 1), got {batch_norm_momentum!r}")
    blocks_per_stage = (depth - 2) // 6
    inputs = keras.Input(input_shape)
    conv_bn = functools.partial(_conv_bn, momentum=batch_norm_momentum)
    x = conv_bn(inputs, width, 3, 1)
    x = layers.ReLU()(x)
    for stage, filters in enumerate([width, 2 * width, 4 * width]):
        for block in range(blocks_per_stage):
            x = _residual_block(x, filters, 2 if stage > 0 and block == 0 else 1, conv_bn)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name=f"resnet{depth}_w{width}")


def _conv_bn(x, filters, kernel, strides, momentum):
    x = layers.Conv2D(filters, kernel, strides, padding="same", use_bias=False)(x)
    return layers.BatchNormalization(momentum=momentum)(x)


def _residual_block(x, filters, strides, conv_bn):
    y = layers.ReLU()(conv_bn(x, filters, 3, strides))
    y = conv_bn(y, filters, 3, 1)
    if strides != 1 or x.shape[-1] != filters:
        x = conv_bn(x, filters, 1, strides)  # Projection shortcut where the shape changes.
    return layers.ReLU()(layers.Add()([x, y]))


def linear_classifier(num_classes: int = 10, input_shape=(32, 32, 3)) -> keras.Model:
    """Softmax regression on raw pixels: the baseline the embedded images must defeat.

    >>> linear_classifier().count_params()
    30730
    """
    inputs = keras.Input(input_shape)
    outputs = layers.Dense(num_classes)(layers.Flatten()(inputs))
    return keras.Model(inputs, outputs, name="linear")


def transformer_lm(
    vocab_size: int,
    sequence_length: int = 128,
    layers_count: int = 2,
    width: int = 128,
    heads: int = 4,
    mlp_ratio: int = 4,
    dropout: float = 0.0,
) -> keras.Model:
    """A decoder-only Transformer language model (pre-norm, learned positions); outputs logits.

    Example:

    >>> model = transformer_lm(vocab_size=258, sequence_length=16, layers_count=1, width=32, heads=2)
    >>> model.output_shape
    (None, 16, 258)
    """
    for name, value in (("vocab_size", vocab_size), ("sequence_length", sequence_length),
                        ("layers_count", layers_count), ("width", width), ("heads", heads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if width % heads:
        raise ValueError(f"heads: must divide width={width}, got {heads!r}")
    tokens = keras.Input((sequence_length,), dtype="int32")
    x = layers.Embedding(vocab_size, width)(tokens)
    x = x + layers.Embedding(sequence_length, width)(keras.ops.arange(sequence_length))
    for _ in range(layers_count):
        y = layers.LayerNormalization()(x)
        y = layers.MultiHeadAttention(heads, width // heads, dropout=dropout)(y, y, use_causal_mask=True)
        x = x + y
        y = layers.LayerNormalization()(x)
        y = layers.Dense(mlp_ratio * width, activation="gelu")(y)
        x = x + layers.Dense(width)(layers.Dropout(dropout)(y))
    x = layers.LayerNormalization()(x)
    return keras.Model(tokens, layers.Dense(vocab_size)(x), name=f"transformer_l{layers_count}_w{width}")
