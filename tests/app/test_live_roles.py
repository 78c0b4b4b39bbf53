"""The live page on other frameworks' TensorBoard runs: each opens with its loss drawn, tiles filled, roles said.

The runs are written in each framework's exact tag names (monitor_cb.testing.framework_runs, explicit wall
times), read by the real reader, drawn by the real page (AppTest).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monitor_cb.diagnosis.settings import DiagnosisSettings, save_settings
from monitor_cb.testing.framework_runs import hf_trainer, lightning, ml_agents, write_run, yolov5
from tests.app.conftest import DASHBOARD
from tests.app.helpers import assert_ok, charts, run_entry, texts

pytest.importorskip("tensorboard")

# framework -> (recipe, run id, the loss metrics drawn, the lr metrics drawn, the words of the roles caption)
CASES: dict[str, tuple[Any, str, list[str], list[str], str]] = {
    "hf_trainer": (hf_trainer, "runs/Dec07_03-00-00_host", ["train/loss"], ["train/learning_rate"], "HF Trainer"),
    "lightning": (lightning, "lightning_logs/version_0", ["train_loss_step"], ["lr-AdamW"], "Lightning"),
    "yolov5": (
        yolov5,
        "runs/train/exp",
        ["train/box_loss", "train/obj_loss", "train/cls_loss"],
        ["x/lr0", "x/lr1", "x/lr2"],
        "YOLOv5",
    ),
    "ml_agents": (
        ml_agents,
        "results/ppo/3DBall",
        ["Losses/Policy Loss", "Losses/Value Loss"],
        ["Policy/Learning Rate"],
        "ML-Agents",
    ),
}


def _figure(at: Any, title: str) -> dict[str, Any]:
    found = [f for f in charts(at) if title in str(f["layout"].get("title", {}).get("text", ""))]
    assert found, f"no chart titled {title!r}: {[f['layout'].get('title') for f in charts(at)]}"
    return found[0]


def _names(fig: dict[str, Any]) -> set[str]:
    return {t.get("name", "") for t in fig["data"]}


@pytest.mark.parametrize("framework", sorted(CASES))
def test_a_frameworks_run_opens_with_its_loss_drawn(log_root: Path, framework: str) -> None:
    recipe, run_id, losses, lrs, who = CASES[framework]
    write_run(log_root, recipe())
    at = run_entry(DASHBOARD, {"run": run_id}, 120)
    assert_ok(at)
    assert "No chart selected" not in texts(at)
    drawn = _names(_figure(at, "Loss and learning rate"))
    assert set(losses) | set(lrs) <= drawn, drawn  # every loss together, with the lr
    tiles = {m.label: m.value for m in at.metric}
    assert tiles["Loss"] != "–" and tiles["LR"] != "–", tiles
    caption = " ".join(c.value for c in at.caption if "Roles" in c.value)
    assert who in caption.replace("\\", ""), caption


def test_the_eval_chart_draws_the_eval_role_and_not_eval_timing(log_root: Path) -> None:
    write_run(log_root, hf_trainer())
    at = run_entry(DASHBOARD, {"run": "runs/Dec07_03-00-00_host"}, 120)
    assert_ok(at)
    drawn = _names(_figure(at, "Eval metrics"))
    assert {"train/loss", "eval/loss", "eval/accuracy"} <= drawn
    assert not any("runtime" in n or "per_second" in n for n in drawn), drawn


def test_a_role_set_in_the_url_and_in_settings(log_root: Path) -> None:
    write_run(log_root, lightning())
    at = run_entry(DASHBOARD, {"run": "lightning_logs/version_0", "role.loss": "train_loss_epoch"}, 120)
    assert_ok(at)
    drawn = _names(_figure(at, "Loss and learning rate"))
    assert "train_loss_epoch" in drawn and "train_loss_step" not in drawn
    assert "set in the URL" in " ".join(c.value for c in at.caption)
    save_settings(log_root, DiagnosisSettings(roles={"lr": ["epoch"]}))
    at = run_entry(DASHBOARD, {"run": "lightning_logs/version_0"}, 120)
    assert_ok(at)
    drawn = _names(_figure(at, "Loss and learning rate"))
    assert "epoch" in drawn and "lr-AdamW" not in drawn
    assert "set in Settings" in " ".join(c.value for c in at.caption)


def test_a_role_set_to_a_metric_the_run_lacks_says_so(log_root: Path) -> None:
    write_run(log_root, lightning())
    at = run_entry(DASHBOARD, {"run": "lightning_logs/version_0", "role.loss": "train/total\n**bold**"}, 120)
    assert_ok(at)
    caption = " ".join(c.value for c in at.caption if "Roles" in c.value)
    assert "no such metric" in caption and "**bold**" not in caption  # escaped: never Markdown
    assert "train_loss_step" in _names(_figure(at, "Loss and learning rate"))  # the loss told from the names


def test_a_10_kB_role_name_in_the_url_is_a_clear_result(log_root: Path) -> None:
    write_run(log_root, hf_trainer())
    at = run_entry(DASHBOARD, {"run": "runs/Dec07_03-00-00_host", "role.loss": "y" * 20_000}, 120)
    assert_ok(at)
    caption = " ".join(c.value for c in at.caption if "Roles" in c.value)
    assert "no such metric" in caption and len(caption) < 2_000
    assert "train/loss" in _names(_figure(at, "Loss and learning rate"))
