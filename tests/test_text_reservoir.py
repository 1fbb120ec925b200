"""The text pipeline's lead over its read: the arithmetic, and settings refused by name."""

import re

import pytest

from benchmarks.text_reservoir import TextReservoirConfig, lead_over_read


def test_the_lead_is_the_batches_taken_less_the_reads_count_at_each_arrival():
    # Two batches a second from the read: 3 by 0.5 s is 2 ahead; 4 by 3 s is 2 behind.
    assert lead_over_read([0.25, 0.4, 0.5, 3.0], batch_rate=2.0) == (2.0, 2.0)
    assert lead_over_read([1.0, 2.0], batch_rate=1.0) == (0.0, 0.0)


def test_the_read_makes_its_bytes_over_a_batchs_tokens_a_second():
    assert TextReservoirConfig(read_rate=4096.0).batch_rate == pytest.approx(1.0)


@pytest.mark.parametrize("settings, named", [({"read_rate": 0.0}, "read_rate"), ({"read_rate": "fast"}, "read_rate"), ({"batches": 0}, "batches"),
                                             ({"batches": 2.5}, "batches"), ({"batches": True}, "batches"),
                                             ({"fills": ("slow",)}, "fills")])
def test_bad_settings_are_refused_naming_the_setting_and_the_value(settings, named):
    value = list(settings.values())[0]
    shown = repr(value[0] if isinstance(value, tuple) else value)
    with pytest.raises(ValueError, match=f"{named}: .*{re.escape(shown)}"):
        TextReservoirConfig(**settings)
