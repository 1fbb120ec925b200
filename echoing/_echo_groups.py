"""The copies an iterator-level echo stage emits, a group at a time, with a state that holds no element.

Shared by ``echoing.grain`` and ``echoing.torch``, whose stages wrap an iterator of their
framework. A **group** is one fresh element's copies (without shuffle) or a window of at
least ``shuffle_buffer_size`` copies of whole elements, shuffled (with it). Each fresh
element is copied ``floor(e)`` times, plus once more with probability ``e - floor(e)``,
drawn from the seed and the element's index, so that the same seed draws the same
copies in every process (every rank of a data-parallel job runs the same number of
steps). The factor is read once per group, when the group is filled.

The state is where the group began (the parent's state then, and the index of its first
fresh element), the factor it was drawn at and how many of its outputs went out. A
restore sets the parent back to the group's start, pulls the group's elements again,
and skips what went out: nothing is stored but positions and counts.

>>> source = iter(range(3))
>>> groups = EchoGroups(pull=lambda: next(source), parent_state=lambda: None,
...                     factor=lambda: 2.0, shuffle_buffer_size=0, key=(0,))
>>> [next(groups) for _ in range(6)], groups.fresh, groups.emitted
([0, 0, 1, 1, 2, 2], 3, 6)
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Optional

import numpy as np

from echoing.echo import _check_factor_value

# Fractional draws come in blocks of this many elements, one generator per block (cheap
# per element, and any element's draw is found again from its index after a restore).
_DRAW_BLOCK = 1024


def factor_value(value, name: str, live_type: str) -> float:
    """``value`` as a float if it is a real number ``>= 1`` and finite; the error names ``name`` (and ``live_type``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a Python int or float >= 1, or an {live_type}, got "
                        f"{type(value).__name__}: {value!r:.200}")
    _check_factor_value(float(value), name)  # The same bounds and words as echoing.echo's.
    return float(value)


class LiveFactor:
    """An echo factor that can change while the stage runs; each framework's ``Factor`` names itself and its workers.

    Subclasses set ``_type`` (its public name), ``_workers`` (the processes it must not be
    sent to) and ``_instead`` (where to echo instead).
    """

    _type = "LiveFactor"
    _workers = "worker processes"
    _instead = "echo in the training process"

    def __init__(self, value: float) -> None:
        self._value = factor_value(value, "value", self._type)

    def assign(self, value: float) -> None:
        """Sets the factor; the echo stage uses it from its next group of copies."""
        self._value = factor_value(value, "value", self._type)

    @property
    def value(self) -> float:
        return self._value

    def __float__(self) -> float:
        return self._value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value!r})"

    def __reduce__(self):
        raise TypeError(f"factor: a live {self._type} ({self!r}) cannot be sent to {self._workers}, where its "
                        f"assignments would never arrive: {self._instead}, or give a fixed factor")


class EchoGroups:
    """Emits the copies of a parent, a group at a time (see the module docstring).

    Args:
      pull: the parent's next element; raises ``StopIteration`` at its end.
      parent_state: the parent's state now (taken where each group begins).
      factor: the factor now, already checked (read once per group).
      shuffle_buffer_size: 0 for adjacent copies, else the least copies in a window.
      key: the ints that seed the draws and the windows' order (the seed, and what else
        makes a stream of its own, such as an epoch).
      arrange: ``None``, or a function of a group's outputs and a generator that returns
        the outputs to emit instead (the torch stage re-mixes rows of batches with it).
        Its generator is seeded by the key and the group's number, so a restored group is
        arranged the same.
    """

    def __init__(self, pull: Callable[[], Any], parent_state: Callable[[], Any], factor: Callable[[], float],
                 shuffle_buffer_size: int, key: tuple[int, ...],
                 arrange: Optional[Callable[[list, np.random.Generator], list]] = None) -> None:
        self._pull = pull
        self._arrange = arrange
        self._parent_state = parent_state
        self._factor = factor
        self._buffer = shuffle_buffer_size
        self._key = list(key)
        self._block, self._draws = -1, None
        self.fresh = 0  # elements pulled from the parent: the index of the next one, which sets its draw
        self._emitted_before = 0  # outputs of the groups before this one
        self._window = 0  # groups filled so far (the shuffle's stream)
        self.group_state = parent_state()  # the parent where the group began
        self._group_fresh = 0  # fresh where the group began
        self._group_factor = 1.0  # the factor the group was drawn at
        self._outputs: list[Any] = []  # the group's outputs, in the order they go out
        self._position = 0  # outputs of the group emitted
        self._released = False  # release() let go of the outputs: the iterator is closed

    @property
    def emitted(self) -> int:
        # Counted per group and read with the position in it: nothing is added per element.
        return self._emitted_before + self._position

    @property
    def group(self) -> int:
        """Groups filled so far: a new value means the outputs are another group's."""
        return self._window

    def __iter__(self) -> "EchoGroups":
        return self

    def __next__(self):
        position = self._position
        if position >= len(self._outputs):
            self._fill()
            position = 0
        self._position = position + 1
        return self._outputs[position]

    def _uniform(self, index: int) -> float:
        block = index // _DRAW_BLOCK
        if block != self._block:
            self._block = block
            self._draws = np.random.default_rng([*self._key, 0, block]).random(_DRAW_BLOCK)
        return self._draws[index % _DRAW_BLOCK]

    def release(self) -> None:
        """Lets go of the group's outputs, so that their memory is freed now (the iterator is closed).

        The counts and the state stay as they were; the next element raises ``ValueError``.
        """
        self._outputs = []
        self._released = True

    def _fill(self) -> None:
        """Pulls the next group; raises StopIteration when the parent has nothing left."""
        if self._released:
            raise ValueError("the echo stage's iterator is closed; make a new one (iter(dataset)) to go on")
        self._emitted_before += self._position
        self._position = 0
        self._outputs = []
        self.group_state = self._parent_state()
        self._group_fresh = self.fresh
        self._group_factor = self._factor()  # Read once per group, so a restore draws the same.
        self._pull_group(self.fresh)
        self._window += 1

    def _pull_group(self, index: int) -> None:
        """The group's outputs from the parent, from element ``index`` at ``_group_factor``."""
        value = self._group_factor
        whole = math.floor(value)
        part = value - whole
        if not self._buffer:
            element = self._pull()  # Raises StopIteration at the end: an empty group.
            copies = whole + 1 if part and self._uniform(index) < part else whole
            self._outputs = self._arranged([element] * copies)
            self.fresh = index + 1
            return
        outputs = []
        while len(outputs) < self._buffer:
            try:
                element = self._pull()
            except StopIteration:
                if not outputs:
                    raise
                break
            outputs.extend([element] * (whole + 1 if part and self._uniform(index) < part else whole))
            index += 1
        order = np.random.default_rng([*self._key, 1, self._window]).permutation(len(outputs))
        self._outputs = self._arranged([outputs[k] for k in order])
        self.fresh = index

    def _arranged(self, outputs: list) -> list:
        if self._arrange is None:
            return outputs
        return self._arrange(outputs, np.random.default_rng([*self._key, 2, self._window]))

    def state(self) -> dict:
        """Where the group began, its factor and the outputs that went out (one shape at every step)."""
        return {"parent": self.group_state, "group_fresh": self._group_fresh, "group_factor": self._group_factor,
                "window": self._window, "position": self._position, "emitted_before": self._emitted_before}

    def restore(self, state: dict, key: tuple[int, ...]) -> None:
        """Takes up ``state`` with the draws of ``key``; the parent must already be set back to ``state["parent"]``."""
        self.group_state = state["parent"]
        self._key, self._block = list(key), -1
        self._group_factor = state["group_factor"]
        self._emitted_before, self._position = state["emitted_before"], state["position"]
        self._group_fresh = self.fresh = state["group_fresh"]
        self._window, self._outputs = state["window"], []
        if self._position:  # Part of the group went out: read it again, from the stream it was shuffled with.
            self._window -= 1
            self._pull_group(self._group_fresh)
            self._window += 1
