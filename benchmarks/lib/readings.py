"""What AutoEcho read on the real pipelines: the R each of its readings gave, from the saved timelines.

Every decision that measured R (``Cause.MEASURED``, ``INPUT_SLOWER`` or ``SLOWER_THAN_MAX``)
says in its reason which R it read and at which factor. :func:`reads_table` sets those
readings beside the R the modelled host's read was set to, per task and R, with the climbs
the controller tried: the only decisions that weigh the objective, and so the only ones
``copy_cost`` can change. It shows whether a held factor far from R came from readings of R
or from climbs.

>>> from echoing import Phase
>>> decision = Decision(128, 6.955, 2.828, Phase.HOLD, Cause.MEASURED,
...                     "the input cannot keep up: R = 6.62 (at e=2.828 over 56 steps: 30.1 steps/s, the input made "
...                     "27.4 batches/s +-29%, the step's own rate 64.2/s)")
>>> ratio_read(decision)
(2.828, 6.62)
"""

from __future__ import annotations

import re
from typing import Optional

from echoing import Cause
from benchmarks.lib import reporting
from benchmarks.lib.run_records import Mode, TimeToTargetResults
from benchmarks.lib.tables import markdown_table
from benchmarks.lib.timelines import Decision

# The causes whose reason states an R read, and how echoing.EchoDecision.reason words it.
MEASURING = (Cause.MEASURED, Cause.INPUT_SLOWER, Cause.SLOWER_THAN_MAX)
_NUMBER = r"[0-9.]+(?:e[+-]?[0-9]+)?"
_RATIO = re.compile(rf"R (?:=|rose to) (?P<ratio>{_NUMBER}|inf)\)? \(at e=(?P<factor>{_NUMBER}) ")
# A reading is counted as far off where it reads R this many times the R set or more, or
# that many times less.
FAR_OFF = 1.5


def ratio_read(decision: Decision) -> tuple[Optional[float], Optional[float]]:
    """``(factor read at, R read)`` for a decision that measured R, else ``(None, None)``.

    Raises:
      ValueError: a measuring decision whose reason does not state R as
        ``echoing.EchoDecision.reason`` words it, naming the reason.
    """
    if decision.cause not in MEASURING:
        return None, None
    match = _RATIO.search(decision.reason)
    if match is None:
        raise ValueError(f"reason: expected an R read and its factor in a {decision.cause.value} decision, "
                         f"got {decision.reason!r}")
    return float(match.group("factor")), float(match.group("ratio"))


def reads_table(results: TimeToTargetResults) -> str:
    """Markdown: per task and R of the replays, AutoEcho's readings of R (median, range over all seeds) and climbs.

    Replays only: there R is what the modelled host's read is set to, while on this CPU
    (``Mode.WALLCLOCK``) the load moves it (R = 1 ran at 1.22, ``docs/results/time_to_target.md``).
    """
    groups: dict[tuple, list] = {}
    for saved in results.auto_echo_timelines or ():
        config = saved.of
        if config.mode == Mode.REPLAY:
            groups.setdefault((config.task.value, config.ratio), []).append(saved.value)
    rows = []
    for (task, ratio), timelines in sorted(groups.items()):
        reads = [ratio_read(d) for timeline in timelines for d in timeline.decisions]
        below = [r / ratio for factor, r in reads if factor is not None and factor < ratio]
        at_or_above = [r / ratio for factor, r in reads if factor is not None and factor >= ratio]
        every = below + at_or_above
        far = sum(1 for r in every if r >= FAR_OFF or r <= 1 / FAR_OFF)
        climbs = [d for timeline in timelines for d in timeline.decisions if d.cause == Cause.CLIMB]
        kept = sum(1 for timeline in timelines for d in timeline.decisions if d.cause == Cause.RAISE_PAID)
        held = reporting.spread([timeline.held_factor for timeline in timelines])
        rows.append((task, f"{ratio:g}", len(timelines), len(every), _cell(below), _cell(at_or_above),
                     f"{far} of {len(every)}", f"{len(climbs)} ({kept})", reporting.spread_cell(held, ".1f")))
    return markdown_table(("task", "R", "runs", "readings of R", "R read / R, at e below R",
                           "at e at or above R", f"off by {FAR_OFF:g}x or more", "climbs tried (kept)",
                           "first e held"), rows, "lrrrrrrrr")


def _cell(values: list) -> str:
    return f"{reporting.spread_cell(reporting.spread(values), '.2f')} ({len(values)})" if values else "-"
