"""The parts of the echo controller's law (:mod:`echoing.controller` puts them together).

* :mod:`echoing.control.windows`: the loop's calls turned into measured intervals, with
  pauses, clocks that go back and counts that go back left out;
* :mod:`echoing.control.estimate`: the rates at one factor, from those intervals, and
  whether the input keeps up there;
* :mod:`echoing.control.policy`: what factor to run next (open, search, hold, check);
* :mod:`echoing.control.pull_cost`: what an echo stage that pulls on the loop's own
  thread costs it, and the factor below which that outweighs the copies.

Example: a reading at e = 2 where the step rate halved, compared by the policy.

>>> from echoing.control.estimate import Measurement
>>> from echoing.control.policy import Phase, Policy
>>> policy = Policy(max_factor=8.0, headroom=1.05, check_divisor=1.25, check_every_steps=200)
>>> policy.own_rate = 20.0  # Steps per second where the input is outrun.
>>> policy.phase = Phase.SEARCH
>>> m = Measurement(factor=2.0, tolerance=0.08)
>>> closed = [m.add(steps=1, seconds=0.1, fresh=0.5) for _ in range(40)]
>>> policy.next(40, m.reading(policy.own_rate))
(<Phase.HOLD: 'hold'>, 4.2, <Cause.MEASURED: 'measured'>)
"""
