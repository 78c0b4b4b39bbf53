"""Real MindFormers trainings shared by the tests of this folder (one subprocess each, session-scoped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mindformers.harness import TrainedRun, train


def _skip_without_mindformers() -> None:
    pytest.importorskip("mindformers", reason="MindFormers is not installed")


@pytest.fixture(scope="session")
def yaml_run(tmp_path_factory: pytest.TempPathFactory) -> TrainedRun:
    """The YAML path (``run_mindformer.py``'s): 20 steps, LiveMonitor and MFLossMonitor every step."""
    _skip_without_mindformers()
    return train(tmp_path_factory.mktemp("mf_yaml"))


@pytest.fixture(scope="session")
def overflow_run(tmp_path_factory: pytest.TempPathFactory) -> TrainedRun:
    """The same with ``loss_scale_value: 1e38``: the first steps overflow and the scale halves."""
    _skip_without_mindformers()
    return train(tmp_path_factory.mktemp("mf_overflow"), "--loss-scale", "1e38")


@pytest.fixture(scope="session")
def args_run(tmp_path_factory: pytest.TempPathFactory) -> TrainedRun:
    """``Trainer(args=TrainingArguments(...), model=..., train_dataset=..., callbacks=[LiveMonitor(...)])``."""
    _skip_without_mindformers()
    return train(tmp_path_factory.mktemp("mf_args"), "--args-api")


@pytest.fixture
def run_root(yaml_run: TrainedRun, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The YAML run's parent as the dashboard's log root."""
    monkeypatch.setenv("MONITOR_LOGDIR", str(yaml_run.run_dir.parent))
    return yaml_run.run_dir.parent
