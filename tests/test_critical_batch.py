"""The critical-batch experiment end to end on tiny settings: results, resume, fit, table and plot."""

import json

import pytest

from benchmarks import critical_batch as C
from benchmarks.lib import results_io, tradeoff

TINY = C.CriticalBatchSettings(
    batch_sizes=(16, 32), seeds=(0,), target=0.0, budget_examples=256, eval_every_examples=64, eval_examples=32,
    noise_every_steps=1, num_microbatches=4, model={"depth": 8, "width": 4}, num_train_examples=1000,
)


def results_of(output):
    return C.typed(results_io.read_results(output))[1]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    output = tmp_path_factory.mktemp("critical") / "critical_batch.json"
    lines = []
    C.run(TINY, output, overhead=False, log=lines.append)
    return output, lines


def test_every_batch_size_is_recorded_with_its_noise_scale(finished):
    output, lines = finished
    runs = results_of(output).runs
    assert [r.batch_size for r in runs] == [16, 32]
    for run in runs:
        # The target 0 is met at the first evaluation and confirmed at the second (the shared loop's rule).
        assert run.reached and run.examples == 64
        assert run.steps == 64 // run.batch_size
        assert [point.step for point in run.curve] == [run.steps, 2 * run.steps]
        # Measured before every step trained, on the weights that step updated.
        assert [m.step for m in run.noise_scale] == list(range(2 * run.steps))
        assert all(m.b_simple == m.b_simple for m in run.noise_scale[:1])  # A number, not nan.
        assert run.learning_rate == pytest.approx(0.1 * run.batch_size / 128)
    assert any("B=16 seed=0: reached" in line for line in lines)


def test_a_rerun_resumes_without_training_again(finished):
    output, _ = finished
    lines = []
    C.run(TINY, output, overhead=False, log=lines.append)
    assert lines == []
    assert len(results_of(output).runs) == 2


def test_table_and_plot_are_generated_from_the_results(finished):
    output, _ = finished
    text = C.table(json.loads(output.read_text()))
    assert "| 16 | 0.0125 | 1/1 | 4 | 64 |" in text
    path = C.plot(output)
    assert path.exists() and path.read_bytes()[:4] == b"\x89PNG"


def test_tradeoff_fit_recovers_a_known_hyperbola_and_needs_two_points():
    fit = tradeoff.fit_tradeoff([16, 64, 256], [50 * (1 + 100 / b) for b in (16, 64, 256)])
    assert fit.s_min == pytest.approx(50) and fit.b_crit == pytest.approx(100)
    with pytest.raises(ValueError, match="batch_sizes: .*at least 2"):
        tradeoff.fit_tradeoff([16], [10])


def test_overhead_is_measured_with_and_without_the_callback(tmp_path):
    result = C.measure_overhead(TINY, batch_size=16, steps=6, repeats=1, skip=1)
    assert result.seconds_per_step_with > 0 and result.seconds_per_step_without > 0
    assert C.Overhead.from_record(result.record()) == result and len(result.record()["per_repeat"]["with"]) == 1
