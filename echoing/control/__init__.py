"""The parts of the echo controller's law (:mod:`echoing.controller` puts them together).

* :mod:`echoing.control.windows`: the loop's calls turned into measured intervals, with
  pauses, clocks that go back and counts that go back left out;
* :mod:`echoing.control.estimate`: the rates at one factor, from those intervals, and
  whether the input keeps up there;
* :mod:`echoing.control.policy`: what factor to run next (open, search, hold, check).
"""
