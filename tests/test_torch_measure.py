"""echoing.torch.measure_ratio: R for a PyTorch loader and step function, with the verdicts of the tf.data path."""

import time

import pytest

torch = pytest.importorskip("torch")

import echoing  # noqa: E402
from echoing import torch as echo_torch  # noqa: E402


class Counted(torch.utils.data.IterableDataset):
    """``n`` batches, each taking ``seconds`` to make; counts the batches made."""

    def __init__(self, n, seconds=0.0):
        self.n, self.seconds, self.made = n, seconds, 0

    def __iter__(self):
        for i in range(self.n):
            time.sleep(self.seconds)
            self.made += 1
            yield torch.full((2, 3), float(i))


def test_the_step_runs_on_batches_in_memory_only_and_as_often_as_asked():
    source = Counted(100)
    seen = []
    m = echo_torch.measure_ratio(torch.utils.data.DataLoader(source, batch_size=None), lambda b: seen.append(int(b[0, 0])),
                                 batches=5, warmup=2, repeats=3)
    assert source.made == 2 + 3 * 5  # The loader is read once, for the upstream half.
    assert len(seen) == 2 + 3 * 5 and set(seen) == {0, 1, 2, 3, 4}  # The first min(batches, 8), cycled.
    assert len(m.upstream_repeats) == len(m.downstream_repeats) == 3 and m.ratio > 0


def test_restore_puts_the_model_and_optimizer_back():
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def step(batch):
        optimizer.zero_grad()
        model(batch).pow(2).mean().backward()
        optimizer.step()

    batches = [torch.randn(4, 3) for _ in range(30)]
    echo_torch.measure_ratio(batches, step, batches=4, warmup=1, repeats=2, restore=[model, optimizer])
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert optimizer.state_dict()["state"] == {}
    echo_torch.measure_ratio(batches, step, batches=4, warmup=1, repeats=2)  # Without restore, the steps stay.
    assert not all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("kwargs, error, message", [
    ({"loader": 3}, TypeError, r"loader: expected an iterable of batches .* got int: 3"),
    ({"train_step": "step"}, TypeError, r"train_step: expected a callable taking one batch, got str: 'step'"),
    ({"batches": 0}, ValueError, r"batches: expected an int >= 1, got 0"),
    ({"warmup": -1}, ValueError, r"warmup: expected an int >= 0, got -1"),
    ({"repeats": 1.5}, TypeError, r"repeats: expected an int >= 1, got float: 1.5"),
    ({"restore": "model"}, TypeError, r"restore: expected a list of objects with state_dict\(\) and load_state_dict\(\)"),
    ({"restore": [object()]}, TypeError, r"restore: expected objects with state_dict\(\) and load_state_dict\(\), got object"),
    ({"loader": [torch.zeros(2)] * 5}, ValueError, r"loader: ran out of batches; one pass must yield at least 103"),
])
def test_bad_arguments_are_refused_by_name(kwargs, error, message):
    arguments = {"loader": [torch.zeros(2)] * 200, "train_step": lambda batch: None, **kwargs}
    with pytest.raises(error, match=message):
        echo_torch.measure_ratio(arguments.pop("loader"), arguments.pop("train_step"), **arguments)


@pytest.mark.timing
def test_a_slow_loader_gets_the_verdicts_of_the_tf_data_path():
    # The same halves as tests of echoing.measure_ratio: 8 ms a batch to read, 1 ms a step; R about 8.
    import tensorflow as tf

    loader = torch.utils.data.DataLoader(Counted(1000, seconds=0.008), batch_size=None)
    torch_measured = echo_torch.measure_ratio(loader, lambda batch: time.sleep(0.001), batches=10, repeats=3)
    slow = tf.data.Dataset.range(1000).map(
        lambda x: tf.numpy_function(lambda v: (time.sleep(0.008), v)[1], [x], tf.int64))
    tf_measured = echoing.measure_ratio(slow, lambda batch: time.sleep(0.001), batches=10, repeats=3)
    assert torch_measured.ratio == pytest.approx(tf_measured.ratio, rel=0.3)
    assert torch_measured.bottleneck.split(" (")[0] == tf_measured.bottleneck.split(" (")[0] == "the input pipeline"
    torch_advice, tf_advice = (echoing.recommend(m, batch_size=32, max_factor=4.0) for m in (torch_measured, tf_measured))
    assert torch_advice.factor == tf_advice.factor == 4.0 and torch_advice.placement == tf_advice.placement
