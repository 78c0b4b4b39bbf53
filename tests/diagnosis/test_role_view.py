"""Detectors judge roles, not names: other frameworks' metrics under the format's keys, named in findings."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from monitor_cb.diagnosis import diagnose
from monitor_cb.diagnosis.findings import Finding
from monitor_cb.diagnosis.role_view import role_view
from monitor_cb.ingest import RunStore
from monitor_cb.testing.framework_runs import lightning, write_run, yolov5


def test_other_names_go_under_the_formats_keys_and_several_losses_are_summed() -> None:
    frame = pd.DataFrame(
        {
            "step": [1, 2, 3],
            "t": [1.0, 2.0, 3.0],
            "train/box_loss": [0.1, 0.2, np.nan],
            "train/obj_loss": [0.3, 0.4, 0.5],
            "val/box_loss": [1.0, 1.0, 1.0],
            "x/lr0": [0.01, 0.01, 0.01],
        }
    )
    view = role_view(frame)
    assert np.allclose(view.frame["loss"].to_numpy()[:2], [0.4, 0.6], rtol=1e-12)
    assert np.isnan(view.frame["loss"].iloc[2]), "a NaN in a component is a NaN of the total"
    assert view.frame["eval_loss"].tolist() == [1.0, 1.0, 1.0] and view.frame["lr"].tolist() == [0.01] * 3
    assert view.stands_for["loss"] == ("train/box_loss", "train/obj_loss")
    assert "train/box_loss" in view.frame.columns, "the metrics themselves stay"


def test_a_run_in_the_formats_own_keys_is_not_copied() -> None:
    frame = pd.DataFrame({"step": [1, 2], "loss": [1.0, 0.9], "lr": [0.1, 0.1], "eval_loss": [np.nan, 1.0]})
    view = role_view(frame)
    assert view.frame is frame and view.stands_for == {}


def test_a_role_set_by_hand_replaces_the_formats_key() -> None:
    frame = pd.DataFrame({"step": [1, 2], "loss": [1.0, 0.9], "train/total": [5.0, 4.0]})
    view = role_view(frame, chosen={"loss": ["train/total"]})
    assert view.frame["loss"].tolist() == [5.0, 4.0] and view.stands_for == {"loss": ("train/total",)}


class _Lazy(Mapping[str, np.ndarray]):
    """A mask mapping that records which masks were built (RunFrame.masks builds each when asked)."""

    def __init__(self, columns: list[str], n: int) -> None:
        self.columns, self.n = columns, n
        self.built: list[str] = []

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.columns:
            raise KeyError(key)
        self.built.append(key)
        return np.ones(self.n, bool)

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)


def test_masks_stay_lazy_and_follow_the_roles() -> None:
    layers = {f"layer.{i}": [0.0, 0.0] for i in range(50)}
    frame = pd.DataFrame({"step": [1, 2], "train/loss": [1.0, np.nan], **layers})
    lazy = _Lazy([c for c in frame.columns if c != "step"], 2)
    view = role_view(frame, lazy)
    assert set(lazy.built) == {"train/loss"}, "only the role's own mask was built"
    assert view.logged is not None and view.logged["loss"].tolist() == [True, True]
    assert "layer.3" in view.logged and set(lazy.built) <= {"train/loss", "layer.3"}


def _findings(root: Path) -> list[Finding]:
    store = RunStore(root, rescan_interval_s=0, cache=False)
    (info,) = store.list_runs()
    data = store.read(info.id)
    return diagnose(data.frame, status="finished", logged=data.masks)


@pytest.fixture(autouse=True)
def _needs_tensorboard() -> None:
    pytest.importorskip("tensorboard")


def test_a_lightning_run_that_overfits_is_found_and_the_finding_names_its_metrics(tmp_path: Path) -> None:
    run = lightning(seed=1, overfit_from=6)
    write_run(tmp_path, run)
    found = [f for f in _findings(tmp_path) if f.kind == "overfitting" and f.severity != "info"]
    assert found, "the labelled overfitting (val loss up 12% an epoch from epoch 6) is missed"
    assert found[0].step >= run.onset_step  # never before it began
    assert "val_loss" in found[0].message and "train_loss_step" in found[0].message


def test_healthy_lightning_and_yolo_runs_raise_no_overfitting(tmp_path: Path) -> None:
    for i, run in enumerate((lightning(seed=2), yolov5(seed=2))):
        write_run(tmp_path / str(i), run)
        assert not [f for f in _findings(tmp_path / str(i)) if f.kind == "overfitting" and f.severity != "info"]
