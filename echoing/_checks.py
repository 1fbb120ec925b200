"""Checks of settings, shared by every public entry point: each error names the setting and shows its value.

A wrong type raises ``TypeError``, a value out of range ``ValueError``; both say what was
expected. Booleans are not numbers here (``True`` is an ``int`` to Python, never a
sensible factor or count).

>>> check_int("repeats", 3, low=1)
3
>>> check_number("headroom", 0, low=0, low_open=True)
Traceback (most recent call last):
...
ValueError: headroom: expected a finite number > 0, got 0
"""

from __future__ import annotations

import math
import numbers
from typing import Optional


def check_int(name: str, value, *, low: int, none_ok: bool = False) -> Optional[int]:
    """``value`` as an int, if it is an int ``>= low`` (or ``None`` with ``none_ok``)."""
    expected = f"an int >= {low}" + (" or None" if none_ok else "")
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected {expected}, got {type(value).__name__}: {value!r:.200}")
    if value < low:
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    return int(value)


def check_bool(name: str, value) -> bool:
    """``value``, if it is a bool (not merely truthy: ``"yes"`` and ``1`` are refused)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__}: {value!r:.200}")
    return value


def check_number(name: str, value, *, low: Optional[float] = None, high: Optional[float] = None,
                 low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a float, if it is a finite real number within the bounds given."""
    # The message is built only for an error: the simulated loops check R at every step
    # (echoing.simulation.Scenario.ratio_at), some three million times a sweep slice.
    plain = type(value) is float or type(value) is int  # No abstract-class check for these (bool is neither).
    if not plain and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
        raise TypeError(f"{name}: expected a finite number{_bounds(low, high, low_open, high_open)}, "
                        f"got {type(value).__name__}: {value!r:.200}")
    number = float(value)
    inside = math.isfinite(number)
    if low is not None:
        inside = inside and (number > low if low_open else number >= low)
    if high is not None:
        inside = inside and (number < high if high_open else number <= high)
    if not inside:
        raise ValueError(f"{name}: expected a finite number{_bounds(low, high, low_open, high_open)}, got {value!r}")
    return number


def _bounds(low, high, low_open, high_open) -> str:
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f" {'<' if high_open else '<='} {high:g}"
    return ""
