"""A Lightning callback that sets the echo factor of an :func:`echoing.torch.echo` loader while ``fit`` runs.

:class:`AutoEcho` does for Lightning what :class:`echoing.AutoEcho` does for Keras: it
timestamps the end of every training batch, reads the echo stage's fresh count from its
:class:`echoing.torch.EchoStats`, hands both to an :class:`echoing.EchoController` and
assigns the controller's factor to the :class:`echoing.torch.Factor` the loader reads.

* **Pauses that are not training.** Validation, a checkpoint's save and a new epoch's
  iterator are announced to the controller (:meth:`echoing.EchoController.interrupt`),
  so their time is never measured.
* **Data-parallel training.** Every rank must run the same number of steps, or the
  collectives hang; so every rank must read the same factor at the same step. With more
  than one process, rank 0 alone decides and the factor is broadcast to every rank at
  every step (``trainer.strategy.broadcast``, one small object a step), and every rank
  assigns it before the step's next batch is drawn. Each rank's echo stage draws its
  copies from the same seed (:func:`echoing.torch.echo` requires one under
  ``torch.distributed``), so the ranks stay in step.
* **Logs.** ``echo_factor`` and ``fresh_batches`` are logged every step
  (``pl_module.log``; ``fresh_batches`` is the stage's fresh count over
  ``elements_per_step``), and every decision is in :attr:`decisions`; with ``verbose=1``
  each decision is printed as one sentence.
* **Checkpoints.** The callback's state (the factor, the steps seen, the decisions as
  ``(step, factor, cause)``) is saved in Lightning's checkpoint; on resume the factor is
  restored and the controller searches from it (``initial_factor``) rather than from
  ``sqrt(max_factor)``. The loader's own position is the loader's state
  (``EchoedLoader.state_dict``), which Lightning saves with the fit loop where the
  loader is stateful.

Install Lightning beside the ``torch`` extra: ``pip install lightning``.

>>> import torch, lightning as L
>>> from echoing import torch as echo_torch
>>> from echoing.torch.lightning import AutoEcho
>>> class Tiny(L.LightningModule):
...     def __init__(self):
...         super().__init__()
...         self.layer = torch.nn.Linear(4, 1)
...     def training_step(self, batch, batch_idx):
...         return self.layer(batch).pow(2).mean()
...     def configure_optimizers(self):
...         return torch.optim.SGD(self.parameters(), lr=0.01)
>>> factor, stats = echo_torch.Factor(1.0), echo_torch.EchoStats()
>>> loader = echo_torch.echo(torch.utils.data.DataLoader(torch.randn(64, 4), batch_size=8), factor, seed=0, stats=stats)
>>> auto = AutoEcho(factor, stats, max_factor=4.0)
>>> trainer = L.Trainer(max_steps=40, callbacks=[auto], logger=False, enable_checkpointing=False,
...                     enable_progress_bar=False, enable_model_summary=False)
>>> trainer.fit(Tiny(), loader)
>>> auto.decisions[0].cause.value, auto.decisions[0].factor  # It opens at max_factor.
('start', 4.0)
>>> float(factor) == auto.controller.factor  # Later decisions depend on the step times.
True
"""

from __future__ import annotations

import numbers
import time
from typing import Any, Optional

try:
    import lightning.pytorch as pl
except ImportError as error:  # pragma: no cover - exercised in a process without Lightning
    raise ImportError("echoing.torch.lightning needs Lightning: pip install lightning") from error

from echoing.controller import ControllerSettings, EchoController, EchoDecision
from echoing.torch import EchoStats, Factor

__all__ = ["AutoEcho"]


class AutoEcho(pl.Callback):
    """Sets an :class:`echoing.torch.Factor` to the factor the law chooses, during Lightning's ``fit``.

    Args:
      factor: the :class:`echoing.torch.Factor` the training loader's :func:`echoing.torch.echo` reads.
      stats: that loader's :class:`echoing.torch.EchoStats`.
      max_factor: the largest factor it sets, and the one it opens at (>= 1).
      elements_per_step: the stage's fresh elements a step reads without echo: 1 where the
        stage echoes the loader's batches (the default), the batch size where it echoes
        examples.
      verbose: 1 prints each decision as one sentence (on rank 0).
      pulls_on_loop_thread: :func:`echoing.torch.echo` takes each fresh batch from the
        ``DataLoader`` on the loop's own thread, so the law reads what that costs a step
        (:class:`echoing.ControllerSettings`; ``docs/results/torch.md``). True by default;
        ``False`` only where the loop's thread does not pull (an echo inside the workers).
      **settings: any other field of :class:`echoing.ControllerSettings`.

    Attributes:
      controller: rank 0's :class:`echoing.EchoController` (every rank builds one; only
        rank 0's decides under data parallelism).
      decisions: its decisions so far.

    Raises:
      TypeError, ValueError: for an argument of the wrong type or value, naming it.
    """

    def __init__(self, factor: Factor, stats: EchoStats, *, max_factor: float = 8.0, elements_per_step: int = 1,
                 verbose: int = 0, pulls_on_loop_thread: bool = True, **settings: Any) -> None:
        super().__init__()
        if not isinstance(factor, Factor):
            raise TypeError(f"factor: expected the echoing.torch.Factor the loader's echo stage reads, got "
                            f"{type(factor).__name__}: {factor!r:.200}")
        if not isinstance(stats, EchoStats):
            raise TypeError(f"stats: expected the echo stage's echoing.torch.EchoStats, got {type(stats).__name__}: "
                            f"{stats!r:.200}")
        self.factor = factor
        self.stats = stats
        self._settings = ControllerSettings(max_factor=max_factor, elements_per_step=elements_per_step,
                                            verbose=verbose, pulls_on_loop_thread=pulls_on_loop_thread, **settings)
        self.controller = EchoController(self._settings)
        self._step = 0
        self._restored_factor: Optional[float] = None

    @property
    def decisions(self) -> list[EchoDecision]:
        return self.controller.decisions

    def on_train_start(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        if self._restored_factor is not None:
            self.factor.assign(self._restored_factor)
        self.controller.interrupt()

    def on_train_epoch_start(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        self.controller.interrupt()  # A new iterator: its start is not a step.

    def on_validation_end(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule") -> None:
        self.controller.interrupt()

    def on_save_checkpoint(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule", checkpoint: dict) -> None:
        self.controller.interrupt()

    def on_train_batch_end(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule", outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        now = time.perf_counter()
        if trainer.is_global_zero:
            if self.controller.observe(self._step, now, fresh=int(self.stats.fresh)) is not None:
                self.factor.assign(self.controller.factor)
        if trainer.world_size > 1:
            # Every rank reads rank 0's factor before its next batch is drawn: the ranks stay in step.
            decided = trainer.strategy.broadcast(float(self.factor), src=0)
            if decided != float(self.factor):
                self.factor.assign(decided)
        self._step += 1
        pl_module.log("echo_factor", float(self.factor), on_step=True, on_epoch=False)
        pl_module.log("fresh_batches", self.stats.fresh / self._settings.elements_per_step, on_step=True,
                      on_epoch=False)

    def state_dict(self) -> dict:
        return {"factor": float(self.factor), "step": self._step,
                "decisions": [(d.step, d.factor, d.cause.value) for d in self.controller.decisions]}

    def load_state_dict(self, state_dict: dict) -> None:
        restored = state_dict.get("factor")
        if isinstance(restored, bool) or not isinstance(restored, numbers.Real) or not 1 <= restored:
            raise ValueError(f"state_dict: expected the factor a saved AutoEcho held (a number >= 1), got {restored!r}")
        step = state_dict.get("step")
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            raise ValueError(f"state_dict: expected the steps a saved AutoEcho had seen (an int >= 0), got {step!r}")
        self._restored_factor = min(float(restored), self._settings.max_factor)
        self._step = int(step)
        # The search starts from the restored factor: a warm estimate, not a cold opening's half of max_factor.
        initial = self._restored_factor if self._restored_factor > 1 else 1.0
        self._settings = ControllerSettings(**{**self._settings.__dict__, "initial_factor": initial})
        self.controller = EchoController(self._settings)
