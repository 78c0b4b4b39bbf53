"""TrainingStateMonitor's per-parameter outputs, in MindFormers 1.9's exact tag names and line forms, read as
families and named by ``layer_origin``.

TrainingStateMonitor's local norms need ``TensorDump``, which MindSpore's CPU build lacks, so its
outputs are written here as it writes them. Where each form comes from (MindFormers 1.9,
``mindformers/core/callback/callback.py`` in the installed package):

* ``local_norm/<param>``: ``TrainingStateMonitor._dump_data_in_step``,
  ``self._output(f'local_norm/{suffix}', data, self.dump_step, self.local_norm_format)``;
* ``adam_m_norm/<param>``, ``adam_v_norm/<param>``: ``_dump_optimizer_state``, the optimizer
  parameter's name without its first part (``adam_m.model.layers.0...`` -> ``model.layers.0...``);
* ``device_local_norm``, ``local_<tag>_loss`` (``local_lm_loss``), ``weight_norm``: ``_dump_data_in_step``,
  ``_dump_local_loss``, ``_calc_weight_state``;
* ``max_attention_logit/<param>`` as ``add_scalars(tag, {"head_<i>": v})`` and
  ``max_attention_logit/mean`` / ``max``: ``_dump_max_attention_logit``;
* TensorBoard: ``_to_tensorboard`` -> ``add_scalar`` / ``add_scalars`` of the tensorboardX
  ``SummaryWriter`` that ``mindformers/utils/tensorboard.py`` creates; the loss and global norm as
  ``MFLossMonitor.print_output_info`` writes them (``loss``, ``grad-norm``, ``learning-rate``);
* the log: ``_to_log``, ``"Epoch:[%3d/%3d], step:[%5d/%5d] %s: %s"`` (tag, value) and
  MFLossMonitor's ``"{ Epoch:[%3d/%3d], step:[%5d/%5d], loss: %5.6f, per_step_time: %dms, lr: %s,
  overflow cond: %s, loss_scale: %s, global_norm: %s"``.

Events are written with explicit wall times.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from monitor_cb.analysis.families import find_families
from monitor_cb.diagnosis import diagnose
from monitor_cb.ingest.store import RunStore
from monitor_cb.testing.synthetic_families import FamilyRun, family_run

tensorboardX = pytest.importorskip("tensorboardX")
T0 = 1_700_000_000.0
HEADS = 2
LOG_PREFIX = "[INFO] 2026-12-05 09:22:03,997 [mindformers/core/callback/callback.py:{line}] {func}: "


def _rows(run: FamilyRun):
    frame = run.frame
    family = [c for c in frame.columns if c.startswith("local_norm/")]
    for i in range(len(frame)):
        row = frame.iloc[i]
        yield i, int(row["step"]), row, {c.split("/", 1)[1]: float(row[c]) for c in family if not math.isnan(row[c])}


def write_events(rank_dir: Path, run: FamilyRun) -> None:
    writer = tensorboardX.SummaryWriter(str(rank_dir), flush_secs=3600, max_queue=1_000_000)
    for i, step, row, norms in _rows(run):
        wall = T0 + i * 0.5
        writer.add_scalar("learning-rate", float(row["lr"]), global_step=step, walltime=wall)
        writer.add_scalar("loss", float(row["loss"]), global_step=step, walltime=wall)
        writer.add_scalar("grad-norm", float(row["grad_norm"]), global_step=step, walltime=wall)
        for param, value in norms.items():
            writer.add_scalar(f"local_norm/{param}", value, global_step=step, walltime=wall)
        if norms:
            first = next(iter(norms))
            writer.add_scalar(f"adam_m_norm/{first}", 1e-3, global_step=step, walltime=wall)
            writer.add_scalar(f"adam_v_norm/{first}", 1e-6, global_step=step, walltime=wall)
            writer.add_scalar("device_local_norm", float(row["grad_norm"]), global_step=step, walltime=wall)
            writer.add_scalar("local_lm_loss", float(row["loss"]), global_step=step, walltime=wall)
            writer.add_scalar("weight_norm", 30.0, global_step=step, walltime=wall)
            logits = {f"head_{h}": 5.0 + h for h in range(HEADS)}
            writer.add_scalars("max_attention_logit/model.layers.0.attention", logits, global_step=step, walltime=wall)
            writer.add_scalar("max_attention_logit/mean", 5.5, global_step=step, walltime=wall)
            writer.add_scalar("max_attention_logit/max", 6.0, global_step=step, walltime=wall)
    writer.close()


def write_log(rank_dir: Path, run: FamilyRun) -> None:
    steps = int(run.frame["step"].iloc[-1])
    lines = []
    for _, step, row, norms in _rows(run):
        lines.append(
            LOG_PREFIX.format(line=747, func="print_output_info")
            + f"{{ Epoch:[{1:3d}/{1:3d}], step:[{step:5d}/{steps:5d}], loss: {row['loss']:5.6f}, per_step_time: 250ms, "
            f"lr: {row['lr']}, overflow cond: False, loss_scale: 1.0, global_norm: [{row['grad_norm']}]"
        )
        for param, value in norms.items():
            lines.append(
                LOG_PREFIX.format(line=1496, func="_to_log")
                + f"Epoch:[{1:3d}/{1:3d}], step:[{step:5d}/{steps:5d}] local_norm/{param}: {value}"
            )
    rank_dir.mkdir(parents=True)
    (rank_dir / "info.log").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def runs():
    return family_run(3, blowup=True, prefix="local_norm", n_points=500, params=12, every=2), family_run(
        3, prefix="local_norm", n_points=300, params=12, every=2
    )


@pytest.mark.parametrize("form", ["events", "log"])
def test_local_norm_family_is_read_and_the_culprit_named(tmp_path: Path, runs, form):
    blown, healthy = runs
    root = tmp_path / "logs"
    write = write_events if form == "events" else write_log
    write(root / "blown" / "rank_0", blown)
    write(root / "healthy" / "rank_0", healthy)
    store = RunStore(root)
    by_name = {r.name: r for r in store.list_runs()}
    data = store.read(by_name["blown"].id)
    families = {f.name: f for f in find_families(data.frame.columns)}
    local = families["local_norm"]
    assert sorted(local.members) == sorted(blown.members)  # every parameter ...
    assert [int(m.split(".")[2]) for m in local.members] == sorted(int(m.split(".")[2]) for m in local.members)
    if form == "events":  # ... by layer
        assert "max_attention_logit/mean" in families["max_attention_logit"].columns
        assert "max_attention_logit/model.layers.0.attention/head_1" in families["max_attention_logit"].columns
        for name in ("device_local_norm", "local_lm_loss", "weight_norm"):
            assert name in data.frame.columns  # plain metrics, no family
    found = [f for f in diagnose(data.frame, status="failed", logged=data.masks) if f.kind == "layer_origin"]
    assert [f.details["member"] for f in found] == [blown.culprit]
    assert found[0].details["family"] == "local_norm"
    assert blown.rise_step <= found[0].step < blown.blowup_step
    quiet = store.read(by_name["healthy"].id)
    assert local.columns[0] in quiet.frame.columns
    assert not [f for f in diagnose(quiet.frame, status="finished", logged=quiet.masks) if f.kind == "layer_origin"]
    assert np.isfinite(quiet.frame[local.columns[0]].dropna()).all()
