"""Real MindFormers trainings shared by the tests of this folder.

The three trainings start together, each in its own process and working directory, on the first
test that needs one (most of each is import and graph compilation, which overlap well on 2 cores);
each fixture then waits for its own. The YAML trainings also write MindFormers' TensorBoard event files
(``test_tensorboard.py``); nothing else of theirs changes with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import pytest

from tests.mindformers.harness import TIMEOUT_S, TrainedRun, Training, start

TENSORBOARD = ("--tensorboard", "tensorboard")  # MindFormers' own event files too, in <cwd>/tensorboard/rank_0
VARIANTS = {
    "yaml": TENSORBOARD,  # run_mindformer.py's path: 20 steps, LiveMonitor and MFLossMonitor every step
    "overflow": ("--loss-scale", "1e38", *TENSORBOARD),  # the first steps overflow and the scale halves
    "args": ("--args-api",),  # Trainer(args=TrainingArguments(...), model=..., callbacks=[LiveMonitor(...)])
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first test here waits for the trainings (see harness.TIMEOUT_S): its time bound is theirs."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.timeout(TIMEOUT_S + 120))


@pytest.fixture(scope="session")
def trainings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Training]:
    """The three trainings, shared by every test process of the run: the first process to need them starts
    them (under a lock) in the run's common temp root; the others wait on the same ones. Test files go to
    workers one file each (``--dist loadfile``), so without this each worker trained its own three."""
    pytest.importorskip("mindformers", reason="MindFormers is not installed")
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # every worker's basetemp is a child of the run's
    shared = base / "mindformers_trainings"
    with open(base / "mindformers_trainings.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if shared.exists():
            started = {name: Training(shared / name) for name in VARIANTS}
        else:
            started = {name: start(shared / name, *flags) for name, flags in VARIANTS.items()}
    yield started
    # The process that started them ends them: waiting first, as another process may still be reading.
    for training in started.values():
        if training.process is not None:
            with contextlib.suppress(Exception):
                training.wait()
            training.kill()


@pytest.fixture(scope="session")
def yaml_run(trainings: dict[str, Training]) -> TrainedRun:
    """The YAML path (``run_mindformer.py``'s): 20 steps, LiveMonitor and MFLossMonitor every step, TensorBoard on."""
    return trainings["yaml"].wait()


@pytest.fixture(scope="session")
def overflow_run(trainings: dict[str, Training]) -> TrainedRun:
    """The same with ``loss_scale_value: 1e38``: the first steps overflow and the scale halves."""
    return trainings["overflow"].wait()


@pytest.fixture(scope="session")
def args_run(trainings: dict[str, Training]) -> TrainedRun:
    """``Trainer(args=TrainingArguments(...), model=..., train_dataset=..., callbacks=[LiveMonitor(...)])``."""
    return trainings["args"].wait()


@pytest.fixture
def run_root(yaml_run: TrainedRun, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The YAML run's parent as the dashboard's log root."""
    monkeypatch.setenv("MONITOR_LOGDIR", str(yaml_run.run_dir.parent))
    return yaml_run.run_dir.parent
