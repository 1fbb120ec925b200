"""A 30-case slice of the controller sweep (benchmarks/controller_sweep.py) on seeds the law was never designed on.

The issue's targets (p50 <= 1.03, p95 <= 1.08, worst <= 1.20 against the best fixed
factor) are not met yet: docs/results/controller.md gives the full sweep's figures.
These bounds hold today's law to what the slice measures with a margin, so that a change
that makes it worse fails here in seconds; tighten them as the law improves.
"""

import pytest

from benchmarks import controller_sweep as sweep
from benchmarks.lib import progress, reporting, results_io


@pytest.fixture(scope="module")
def sliced():
    cases, results = sweep.sweep(range(0, 30), processes=1)
    return cases, results


def test_the_sweep_draws_the_same_cases_from_the_same_seeds_and_records_round_trip(sliced):
    cases, results = sliced
    assert [sweep.draw_case(c.seed) for c in cases] == cases
    assert all(sweep.Case.from_record(c.record()) == c for c in cases)
    assert all(sweep.Result.from_record(r.record()) == r for r in results)
    assert len({c.change for c in cases}) == 3 and len({c.max_factor for c in cases}) == 3


@pytest.mark.parametrize("slope", sweep.SLOPES)
def test_the_supply_law_holds_its_measured_distribution_on_the_slice(sliced, slope):
    _, results = sliced
    summary = sweep.summarize(results, sweep.Law.SUPPLY, slope)
    assert summary.p50 <= 1.08 and summary.worst <= 2.5, summary


def test_the_progress_slopes_the_sweep_cites_are_the_fits_to_the_committed_sample_runs():
    runs = reporting.results_of(results_io.read_results(results_io.RESULTS_DIR / "time_to_target.json")).runs
    assert progress.progress_slope(runs, "resnet", "before_augment", 1024) == pytest.approx(0.080, abs=0.0005)
    assert progress.progress_slope(runs, "transformer", "example", 256) == pytest.approx(0.212, abs=0.0005)
