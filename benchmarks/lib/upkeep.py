"""Upkeep of a time-to-target results file when the law or the machine changes.

A saved AutoEcho timeline carries the name of the law that timed it, and a replay's time
per step is its machine's. :func:`carry_timelines` relabels the timelines that today's law
decides alike and drops the others; :func:`retime_other_machines` drops what another CPU
timed, and :func:`retime_beside_autoecho` only the fixed factors' replays another CPU
timed beside an AutoEcho replay this one timed. Each leaves the file for the next
``python -m benchmarks.time_to_target`` to fill again (``--time-only``, alone on the
machine, then the training on the new timelines).

>>> timeline = AutoEchoTimeline(seconds=(0.1,), factors=(1.0,), startup_seconds=0.0, decisions=(), fresh=None)
>>> run = RunConfig("replay", "resnet", "before_augment", None, 0, 0, 2.0, auto_echo=True, max_factor=8.0)
>>> decides_alike(timeline, run, {})  # Timed without the fresh count, which the law requires.
False
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import echoing
from benchmarks.lib import replay, results_io
from benchmarks.lib.run_records import Mode, RunConfig, read_run
from benchmarks.lib.timelines import AutoEchoTimeline


def decides_alike(timeline: AutoEchoTimeline, run: RunConfig, tasks: dict) -> bool:
    """Whether today's law, fed the timeline's step times and fresh counts, sets the factor it held at every step.

    The replay (:func:`benchmarks.lib.replay.replay`) records the factor in force at each
    step and hands the controller each step's end and fresh count; a law that sets the
    same factors from the same figures would have made the same timeline.
    """
    if timeline.fresh is None:
        return False  # Timed without the fresh count, which the law now requires.
    task = tasks[run.task]
    controller = replay.auto_echo_controller(task, run.placement, run.max_factor)
    current = timeline.factors[0]
    for step, (seconds, factor, counted) in enumerate(zip(timeline.seconds, timeline.factors, timeline.fresh)):
        if factor != current:
            return False
        if controller.observe(step, seconds, fresh=counted) is not None:
            current = controller.factor
    return True


def carry_timelines(output: Path, tasks: dict, log=print) -> tuple[int, int]:
    """Relabels the saved AutoEcho timelines of another law that today's law decides alike; drops the others.

    A dropped timeline's trained run goes too, so that the next invocation times it again
    (alone on the machine, ``--time-only``) and trains on it. Returns (carried, dropped).
    """
    carried = []

    def revise(of: dict, value: dict) -> Optional[dict]:
        timeline, run = AutoEchoTimeline.from_record(value), RunConfig.from_record(of)
        if timeline.law == echoing.controller.LAW:
            return value
        if not decides_alike(timeline, run, tasks):
            log(f"{run.describe()}: decided otherwise by {echoing.controller.LAW}, dropped: time it again")
            return None
        carried.append(run)
        log(f"{run.describe()}: decided alike by {echoing.controller.LAW}, carried")
        return dataclasses.replace(timeline, law=echoing.controller.LAW).record()

    results = results_io.ResultsFile(output, None, key=lambda record: read_run(record).config)
    dropped = results.revise_measurements("auto_echo_timelines", revise, key_of=RunConfig.from_record)
    return len(carried), len(dropped)


def retime_other_machines(output: Path, log=print) -> int:
    """Drops what another CPU timed: fixed factors' replays, AutoEcho's timelines and the runs trained on them.

    A replay's time per step is the machine's, so a comparison of factors is made on one
    CPU; returns how many records and timelines were dropped.
    """
    cpu = results_io.this_machine().cpu
    results = results_io.ResultsFile(output, None, key=lambda record: read_run(record).config)
    # A timeline is not stamped; the AutoEcho run trained on it is, and was timed with it.
    timed_on = {read_run(record).config: results.machine_of(record).cpu for record in results.runs}
    file_cpu = results.machine_of({}).cpu
    runs = results.drop(lambda record, machine: read_run(record).config.mode == Mode.REPLAY and machine.cpu != cpu)
    for record in runs:
        log(f"{read_run(record).config.describe()}: timed on another CPU ({results.machine_of(record).cpu}), "
            "dropped: time it again")
    timelines = results.revise_measurements(
        "auto_echo_timelines", lambda of, value: None if timed_on.get(RunConfig.from_record(of), file_cpu) != cpu else value,
        key_of=RunConfig.from_record)
    return len(runs) + len(timelines)


def retime_beside_autoecho(output: Path, log=print) -> int:
    """Drops the fixed factors' replays another CPU timed for a task, R and seed whose AutoEcho replay this CPU timed.

    After a change of the law, only the timelines it decides otherwise are timed again, on
    whatever machine the session has; this puts each such seed's fixed factors on the same
    CPU as its AutoEcho replay, without timing every other seed again. Returns how many
    records were dropped.
    """
    cpu = results_io.this_machine().cpu
    results = results_io.ResultsFile(output, None, key=lambda record: read_run(record).config)
    here = {(config.task, config.ratio, config.seed) for record in results.runs
            for config in [read_run(record).config]
            if config.mode == Mode.REPLAY and config.auto_echo and results.machine_of(record).cpu == cpu}

    def beside_one_timed_here(record, machine) -> bool:
        config = read_run(record).config
        return (config.mode == Mode.REPLAY and not config.auto_echo and machine.cpu != cpu
                and (config.task, config.ratio, config.seed) in here)

    runs = results.drop(beside_one_timed_here)
    for record in runs:
        log(f"{read_run(record).config.describe()}: timed on another CPU ({results.machine_of(record).cpu}) than its "
            "seed's AutoEcho replay, dropped: time it again")
    return len(runs)
