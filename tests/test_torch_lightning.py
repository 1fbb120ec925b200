"""echoing.torch.lightning.AutoEcho under Lightning's fit: decisions, logs, interrupts, checkpoints, and two DDP ranks in step."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not installed; pip install torch==2.13.0 -e '.[torch]'")
pytest.importorskip("lightning", reason="Lightning is not installed; pip install -e '.[lightning]'")

import lightning as L  # noqa: E402
import torch  # noqa: E402

from echoing import Cause  # noqa: E402
from echoing import torch as echo_torch  # noqa: E402
from echoing.torch.lightning import AutoEcho  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.logged = []

    def training_step(self, batch, batch_idx):
        return self.layer(batch).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Interrupts(L.Callback):
    """Counts the controller's interrupts by wrapping it."""

    def __init__(self, auto):
        self.count = 0
        interrupt = auto.controller.interrupt

        def counted():
            self.count += 1
            interrupt()

        auto.controller.interrupt = counted


def trainer(**settings):
    return L.Trainer(**{"logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
                        "enable_model_summary": False, "accelerator": "cpu", "devices": 1, **settings})


def echoed(factor, stats, rows=64):
    return echo_torch.echo(torch.utils.data.DataLoader(torch.randn(rows, 4), batch_size=8), factor, seed=0,
                           stats=stats)


def test_it_opens_at_max_factor_assigns_the_factor_and_logs_it_every_step():
    factor, stats = echo_torch.Factor(1.0), echo_torch.EchoStats()
    auto = AutoEcho(factor, stats, max_factor=4.0)
    module = Tiny()
    fit = trainer(max_steps=30, log_every_n_steps=1, callbacks=[auto])
    fit.fit(module, echoed(factor, stats))
    assert auto.decisions[0].cause == Cause.START and auto.decisions[0].factor == 4.0
    assert float(factor) == auto.controller.factor
    assert fit.callback_metrics["echo_factor"] == pytest.approx(float(factor))
    assert fit.callback_metrics["fresh_batches"] == pytest.approx(stats.fresh)
    assert stats.emitted >= 30  # Every step's batch went out of the echo stage.


def test_validation_a_checkpoint_and_each_epoch_are_announced_as_pauses(tmp_path):
    factor, stats = echo_torch.Factor(1.0), echo_torch.EchoStats()
    auto = AutoEcho(factor, stats, max_factor=2.0)
    interrupts = Interrupts(auto)
    validation = torch.utils.data.DataLoader(torch.randn(16, 4), batch_size=8)
    fit = trainer(max_epochs=2, check_val_every_n_epoch=1, num_sanity_val_steps=0, callbacks=[auto])
    fit.fit(Tiny(), echoed(factor, stats, rows=32), validation)
    # The start, two epochs' starts and two validations' ends at least.
    assert interrupts.count >= 5
    fit.save_checkpoint(tmp_path / "last.ckpt")
    assert interrupts.count >= 6


def test_its_state_is_saved_in_the_checkpoint_and_restores_the_factor_and_a_warm_search(tmp_path):
    factor, stats = echo_torch.Factor(1.0), echo_torch.EchoStats()
    auto = AutoEcho(factor, stats, max_factor=4.0)
    fit = trainer(max_steps=20, callbacks=[auto])
    fit.fit(Tiny(), echoed(factor, stats))
    path = tmp_path / "echo.ckpt"
    fit.save_checkpoint(path)
    saved = torch.load(path, weights_only=False)["callbacks"]
    (state,) = [value for key, value in saved.items() if key.startswith("AutoEcho")]
    assert state["factor"] == float(factor) and state["step"] == 20
    assert state["decisions"][0] == (0, 4.0, "start")

    factor2, stats2 = echo_torch.Factor(1.0), echo_torch.EchoStats()
    resumed = AutoEcho(factor2, stats2, max_factor=4.0)
    trainer(max_steps=25, callbacks=[resumed]).fit(Tiny(), echoed(factor2, stats2), ckpt_path=path)
    assert resumed.controller.settings.initial_factor == max(1.0, min(4.0, state["factor"]))
    assert resumed._step == 25


@pytest.mark.parametrize("state, message", [
    ({"factor": 0.5, "step": 0}, r"state_dict: expected the factor a saved AutoEcho held .* got 0.5"),
    ({"factor": 2.0, "step": -1}, r"state_dict: expected the steps a saved AutoEcho had seen .* got -1"),
    ({"step": 3}, r"state_dict: expected the factor .* got None"),
])
def test_a_bad_saved_state_is_refused_by_name(state, message):
    auto = AutoEcho(echo_torch.Factor(1.0), echo_torch.EchoStats())
    with pytest.raises(ValueError, match=message):
        auto.load_state_dict(state)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"factor": 2.0}, TypeError, r"factor: expected the echoing.torch.Factor .* got float: 2.0"),
    ({"stats": None}, TypeError, r"stats: expected the echo stage's echoing.torch.EchoStats, got NoneType"),
    ({"max_factor": 0.5}, ValueError, r"max_factor: expected a finite number >= 1, got 0.5"),
    ({"elements_per_step": 0}, ValueError, r"elements_per_step: expected an int >= 1 or None, got 0"),
    ({"window": 8}, TypeError, r"window"),
])
def test_bad_arguments_are_refused_by_name(kwargs, error, message):
    arguments = {"factor": echo_torch.Factor(1.0), "stats": echo_torch.EchoStats(), **kwargs}
    with pytest.raises(error, match=message):
        AutoEcho(arguments.pop("factor"), arguments.pop("stats"), **arguments)


def run_two_ddp_ranks(tmp_path, steps: int) -> list[dict]:
    """Runs examples/lightning_loop.py on two gloo ranks; returns their summaries, rank 0 first."""
    # Lightning's launcher runs the example again as rank 1; each rank writes its own file.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PL_DISABLE_FORK": "1", "MASTER_PORT": str(29500 + os.getpid() % 1000)}
    done = subprocess.run([sys.executable, "-m", "examples.lightning_loop", "--steps", str(steps), "--devices", "2",
                           "--input-seconds", "0.004", "--step-seconds", "0.001", "--summary-dir", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1], done.stdout
    return ranks


def test_two_ddp_ranks_on_gloo_hold_the_same_factor_at_every_step_and_finish_together(tmp_path):
    ranks = run_two_ddp_ranks(tmp_path, steps=120)
    assert ranks[0]["steps"] == ranks[1]["steps"] == 120 == ranks[0]["global_step"]
    # The same factor at every step (rank 0's, broadcast), so the same copies drawn and the same counts on both.
    assert ranks[0]["factors"] == ranks[1]["factors"]
    assert ranks[0]["emitted"] == ranks[1]["emitted"] and ranks[0]["fresh"] == ranks[1]["fresh"]
    assert ranks[0]["decisions"] and "(open, start)" in ranks[0]["decisions"][0]
    assert not ranks[1]["decisions"]  # Rank 1 never decides.


@pytest.mark.timing
def test_two_ddp_ranks_on_gloo_change_the_factor_at_the_same_steps(tmp_path):
    # The first change needs a reading at max_factor (64 steps at least, more where the machine is busy): a
    # run long enough to make one is a timing test. Input at 4 ms a batch, the step 1 ms plus DDP's own: R < 8.
    ranks = run_two_ddp_ranks(tmp_path, steps=400)
    assert ranks[0]["steps"] == ranks[1]["steps"] == 400
    assert len(set(ranks[0]["factors"])) > 1, ranks[0]["decisions"]
    assert ranks[0]["factors"] == ranks[1]["factors"]
    assert ranks[0]["emitted"] == ranks[1]["emitted"] and ranks[0]["fresh"] == ranks[1]["fresh"]
