"""``grad_norm_model(param_norms=...)``: real ``Model.train`` on the CPU logs each parameter's gradient norm as the
``grad_norm/<param>`` family, equal to the host's float64 norms, every ``param_norm_interval`` steps."""

from __future__ import annotations

from pathlib import Path

import mindspore as ms
import numpy as np
import pytest
from mindspore import nn

from monitor_cb import LiveMonitor, grad_norm_model
from monitor_cb.analysis.families import find_families
from monitor_cb.ingest.store import RunStore
from monitor_cb.train.cells import select_params
from monitor_cb.train.extract import param_norm_metrics
from tests.collector.ms_helpers import Net, batches, ce, dataset, train_records

pytestmark = pytest.mark.mindspore


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # MindSpore drops rank_0/ and kernel_meta/ into the cwd
    for name in ("RANK_ID", "RANK_SIZE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


def _host_norms(net: nn.Cell, n: int) -> list[dict[str, float]]:
    """Per batch, each parameter's gradient norm on the host in float64 (lr 0: the weights do not move)."""
    loss_net = nn.WithLossCell(net, ce())
    params = net.trainable_params()
    grad_fn = ms.value_and_grad(loss_net, None, params)
    out = []
    for x, y, _ in batches(n):
        _, grads = grad_fn(ms.Tensor(x), ms.Tensor(y))
        out.append(
            {
                p.name: float(np.sqrt((g.asnumpy().astype(np.float64) ** 2).sum()))
                for p, g in zip(params, grads, strict=True)
            }
        )
    return out


@pytest.mark.parametrize("sink", [False, True])
def test_every_parameter_every_second_step(tmp_path: Path, sink: bool) -> None:
    # The run sits in a root of its own: tmp_path.parent is the worker's temp root, holding every earlier test's
    # runs (listing them took 67 s in the full suite, 1.5 s alone).
    run_dir = tmp_path / "logs" / "exp1"
    net = Net()
    expected = _host_norms(net, 6)
    model = grad_norm_model(
        net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.0), param_norms=True, param_norm_interval=2
    )
    names = [p.name for p in net.trainable_params()]
    assert model.train_network.param_norm_names == tuple(names)
    model.train(1, dataset(6), callbacks=[LiveMonitor(run_dir, log_interval=1)], dataset_sink_mode=sink)
    records = train_records(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    for r in records:
        have = {k[len("grad_norm/") :]: v for k, v in r.items() if k.startswith("grad_norm/")}
        if r["step"] % 2:
            assert not have or r["step"] == 1  # the first logged step opens interval 0
            continue
        assert set(have) == set(names)
        for name in names:
            assert have[name] == pytest.approx(expected[r["step"] - 1][name], rel=1e-5)
        total = np.sqrt(sum(v**2 for v in have.values()))
        assert r["grad_norm"] == pytest.approx(total, rel=1e-5)  # the parts make up the global norm
    store = RunStore(run_dir.parent)
    (run,) = store.list_runs()
    (family,) = find_families(store.read(run.id).frame.columns)
    assert family.name == "grad_norm" and set(family.members) == set(names)


def test_a_pattern_selects_parameters_and_a_bad_one_says_why(tmp_path: Path) -> None:
    net = Net()
    model = grad_norm_model(net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.0), param_norms=r"\.weight$")
    assert model.train_network.param_norm_names == ("hidden.weight", "out.weight")
    model.train(1, dataset(2), callbacks=[LiveMonitor(tmp_path, log_interval=1)], dataset_sink_mode=False)
    first = train_records(tmp_path / "metrics.jsonl")[0]
    assert sorted(k for k in first if k.startswith("grad_norm/")) == ["grad_norm/hidden.weight", "grad_norm/out.weight"]
    with pytest.raises(ValueError, match="matches none of the trainable parameters"):
        grad_norm_model(net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.0), param_norms="nothing_here")
    with pytest.raises(ValueError, match="not a valid regular expression"):
        grad_norm_model(net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.0), param_norms="(")
    with pytest.raises(ValueError, match="param_norm_interval"):
        grad_norm_model(
            net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.0), param_norms=True, param_norm_interval=0
        )


def test_without_param_norms_the_outputs_are_unchanged(tmp_path: Path) -> None:
    net = Net()
    model = grad_norm_model(net, ce(), nn.SGD(net.trainable_params(), learning_rate=0.0))
    assert model.train_network.param_norm_names == ()
    model.train(1, dataset(2), callbacks=[LiveMonitor(tmp_path, log_interval=1)], dataset_sink_mode=False)
    assert not [k for r in train_records(tmp_path / "metrics.jsonl") for k in r if k.startswith("grad_norm/")]


def test_pure_helpers() -> None:
    assert select_params(["a.w", "a.b", "c.w"], True) == (0, 1, 2)
    assert select_params(["a.w", "a.b", "c.w"], r"\.w$") == (0, 2)
    assert select_params(["a.w"], None) == () and select_params(["a.w"], False) == ()
    out = param_norm_metrics((1.0, 2.0, np.array([9.0, 1.0, 16.0])), ["p", "q"], (0, 2), scale=2.0)
    assert out == {"grad_norm/p": 1.5, "grad_norm/q": 2.0}  # roots of the chosen sums of squares, unscaled
    assert param_norm_metrics((1.0, 2.0), ["p", "q"], (0, 1)) == {}  # a scalar last: no vector
    assert param_norm_metrics((1.0, np.array([1.0])), [], ()) == {}
