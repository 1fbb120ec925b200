"""The shared checks of settings (echoing/_checks.py): the type, then the range, each error naming the setting."""

import math

import pytest

from echoing._checks import check_int, check_number


@pytest.mark.parametrize("value, error, message", [
    (2.0, TypeError, "steps: expected an int >= 1, got float: 2.0"),
    (True, TypeError, "steps: expected an int >= 1, got bool: True"),
    ("3", TypeError, "steps: expected an int >= 1, got str: '3'"),
    (0, ValueError, "steps: expected an int >= 1, got 0"),
    (None, TypeError, "steps: expected an int >= 1, got NoneType: None"),
])
def test_check_int_names_the_setting_and_shows_the_value(value, error, message):
    with pytest.raises(error) as raised:
        check_int("steps", value, low=1)
    assert str(raised.value) == message


def test_check_int_returns_the_int_and_accepts_none_only_when_told():
    assert check_int("count", 0, low=0) == 0 and check_int("count", None, low=0, none_ok=True) is None
    with pytest.raises(ValueError, match=r"count: expected an int >= 0 or None, got -1"):
        check_int("count", -1, low=0, none_ok=True)


@pytest.mark.parametrize("value, kwargs, error, message", [
    ("1", {"low": 1}, TypeError, "factor: expected a finite number >= 1, got str: '1'"),
    (False, {"low": 0}, TypeError, "factor: expected a finite number >= 0, got bool: False"),
    (0.5, {"low": 1}, ValueError, "factor: expected a finite number >= 1, got 0.5"),
    (math.inf, {"low": 1}, ValueError, "factor: expected a finite number >= 1, got inf"),
    (math.nan, {}, ValueError, "factor: expected a finite number, got nan"),
    (0, {"low": 0, "low_open": True}, ValueError, "factor: expected a finite number > 0, got 0"),
    (1.0, {"low": 0, "high": 1, "low_open": True, "high_open": True}, ValueError,
     "factor: expected a finite number in (0, 1), got 1.0"),
    (11, {"high": 10}, ValueError, "factor: expected a finite number <= 10, got 11"),
])
def test_check_number_names_the_setting_the_bounds_and_the_value(value, kwargs, error, message):
    with pytest.raises(error) as raised:
        check_number("factor", value, **kwargs)
    assert str(raised.value) == message


def test_check_number_returns_a_float_at_the_closed_bounds():
    assert check_number("x", 1, low=1, high=1) == 1.0 and isinstance(check_number("x", 3, low=1), float)
