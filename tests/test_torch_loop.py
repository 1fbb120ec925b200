"""The plain PyTorch loop of examples/torch_loop.py: the counts add up, and (on the clock) the controller settles above 1."""

import pytest

pytest.importorskip("torch", reason="torch is not installed; pip install torch==2.13.0 -e '.[torch]'")


def test_the_torch_loop_trains_on_exactly_what_the_echo_stage_handed_out():
    from examples import torch_loop

    # No sleeps and no workers: what is checked here does not depend on the clock.
    summary = torch_loop.train(40, batch_size=8, input_seconds=0.0, step_seconds=0.0, num_workers=0, verbose=0)
    assert summary["consumed_examples"] == 40 * 8
    assert summary["emitted_batches"] == 40  # Handed out, one a step: the count is of copies that went out.
    assert 1 <= summary["fresh_batches"] <= 40
    assert summary["decisions"] and "(open, start)" in summary["decisions"][0]


@pytest.mark.timing
def test_the_torch_loop_finds_it_is_input_bound_and_echoes():
    from examples import torch_loop

    # A batch every 40 ms from one worker against a 10 ms step: R is about 4.
    summary = torch_loop.train(400, batch_size=32, input_seconds=0.04, step_seconds=0.01, verbose=0)
    assert summary["factor"] >= 2.0, summary["decisions"]
    assert summary["consumed_examples"] == 400 * 32 and summary["emitted_batches"] == 400
    assert 400 / 8 <= summary["fresh_batches"] <= 400 / 1.5, summary
    assert summary["last_loss"] < summary["first_loss"]
