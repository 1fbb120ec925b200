"""benchmarks.opening_cost: AutoEcho's timelines without their opening search, and the table of what that saves."""

import pytest

from benchmarks import opening_cost


def test_without_opening_sets_every_step_before_the_first_hold_to_the_factor_held():
    factors = [8.0] * 3 + [4.0] * 3 + [2.1, 1.5, 2.1]
    assert opening_cost.without_opening(factors, held_from_step=6, held_factor=2.1) == [2.1] * 7 + [1.5, 2.1]
    assert opening_cost.without_opening(factors, held_from_step=0, held_factor=2.1) == factors


@pytest.mark.parametrize("step", [-1, 10, None, 2.0])
def test_without_opening_rejects_a_first_hold_outside_the_timeline(step):
    with pytest.raises(ValueError, match=rf"held_from_step: expected a step in \[0, 9\], got {step!r}"):
        opening_cost.without_opening([2.0] * 9, held_from_step=step, held_factor=2.0)


def test_table_sets_each_seed_with_and_without_its_opening_beside_the_fixed_factor():
    def record(seed, with_opening, without, fixed):
        of = {"task": "resnet", "ratio": 2.0, "seed": seed, "placement": "before_augment", "echo_shuffle": 1024}
        return {"of": of, "held_factor": 2.1, "held_from_step": 64, "steps_with_opening": with_opening,
                "steps_without_opening": without, "reached": without is not None, "fixed_factor": 2.0,
                "fixed_steps": fixed}

    document = {"results": {"runs": [record(1, 600, 450, 400), record(0, 500, 500, 500), record(2, 550, None, 525)]}}
    table = opening_cost.table(document)
    lines = table.splitlines()
    assert lines[2] == "| resnet | 2 | 0 | 64, then 2.1 | 500 | 500 | 500 (e=2) | 1.00 | 1.00 | 1.00 |"
    assert lines[3] == "| resnet | 2 | 1 | 64, then 2.1 | 600 | 450 | 400 (e=2) | 1.50 | 1.12 | 0.75 |"
    assert lines[4] == "| resnet | 2 | 2 | 64, then 2.1 | 550 | - | 525 (e=2) | 1.05 | - | - |"  # Not reached.
    assert lines[5] == ("| | | median of 2 | | | | | 1.05 (1.00-1.50) | 1.06 (1.00-1.12) | 0.88 (0.75-1.00) |")


def test_measure_skips_a_timeline_that_never_held_a_factor(tmp_path):
    of = {"task": "resnet", "ratio": 2.0, "seed": 0, "placement": "before_augment", "echo_shuffle": 1024,
          "max_factor": 8.0}
    document = {"results": {"runs": [], "auto_echo_timelines": [
        {"of": of, "value": {"factors": [8.0] * 5, "held_from_step": None, "held_factor": None}}]}}
    said = []
    results = opening_cost.measure(document, 2.0, tmp_path / "opening.json", log=said.append)
    assert results.runs == [] and said == ["resnet R=2 seed=0: never held a factor; no opening to remove"]
