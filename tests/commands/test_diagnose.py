import json
import os
import socket

import numpy as np
import pytest

from monitor_cb.cli import main
from monitor_cb.record import encode_record
from tests.diagnosis.helpers import decaying_loss


def write_run(root, name: str, loss: np.ndarray, status: str = "finished"):
    run = root / name
    run.mkdir(parents=True)
    lines = []
    for i, value in enumerate(loss):
        record = {"step": i + 1, "t": 1.76e9 + i, "rank": 0, "seg": 1, "loss": float(value), "lr": 1e-3}
        lines.append(json.dumps(encode_record(record)))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    meta = {
        "schema": 1,
        "name": name,
        "status": status,
        "reason": None,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "rank": 0,
        "world_size": 1,
        "segment": 1,
    }
    (run / "metrics.meta.json").write_text(json.dumps(meta))
    return run


@pytest.fixture
def root(tmp_path):
    write_run(tmp_path, "healthy", decaying_loss(300))
    bad = decaying_loss(300)
    bad[200:] = np.nan
    write_run(tmp_path, "diverged", bad, status="failed")
    return tmp_path


def test_healthy_run_exits_zero(root, capsys):
    assert main(["diagnose", "healthy", "--root", str(root)]) == 0
    assert "0 errors" in capsys.readouterr().out


def test_error_finding_exits_one_and_says_why(root, capsys):
    assert main(["diagnose", "diverged", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "ERROR" in out and "loss became NaN at step 201" in out


def test_json_output(root, capsys):
    assert main(["diagnose", "diverged", "--root", str(root), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["error"] == 1
    assert data["findings"][0]["kind"] == "nan" and data["findings"][0]["step"] == 201
    assert "not a finite number" in data["findings"][0]["why"]  # why it fired, also in the message
    assert data["findings"][0]["message"].endswith(data["findings"][0]["why"] + ".")


def test_run_directory_by_path(root, capsys):
    assert main(["diagnose", str(root / "diverged")]) == 1


def test_missing_run_is_a_usage_error(root, capsys):
    assert main(["diagnose", "nope", "--root", str(root)]) == 2
    assert "error: no run 'nope'" in capsys.readouterr().err


def test_corrupt_settings_file_warns_but_works(root, capsys):
    (root / ".monitor").mkdir()
    (root / ".monitor" / "diagnosis.json").write_text("{oops")
    assert main(["diagnose", "healthy", "--root", str(root)]) == 0
    assert "not valid JSON" in capsys.readouterr().err


def test_settings_file_applies(root, capsys):
    (root / ".monitor").mkdir()
    (root / ".monitor" / "diagnosis.json").write_text(json.dumps({"disabled": ["nan"]}))
    assert main(["diagnose", "diverged", "--root", str(root)]) == 0


def test_a_tensorboard_run_opened_two_days_later_is_ended_not_stalled(tmp_path, capsys):
    # issue 25: a finished MindFormers TensorBoard run got "ERROR stalled: no new records for 48 h" and exit 1
    import time

    from tests.importers.tb_helpers import loss_at, mindformers_step
    from tests.importers.tb_helpers import write_run as write_tb

    writer = write_tb(tmp_path / "mf", (0,), range(1, 4))[0]
    for step in range(4, 40):
        mindformers_step(writer, step, loss_at(step, 0) if step != 3 else 1.0)
    writer.sync()
    writer.close()
    two_days_ago = time.time() - 2 * 86400
    for path in (tmp_path / "mf" / "rank_0").iterdir():
        os.utime(path, (two_days_ago, two_days_ago))
    code = main(["diagnose", "mf", "--root", str(tmp_path)])
    out = capsys.readouterr().out
    assert "stalled" not in out and "hung" not in out
    assert code == (1 if "ERROR" in out else 0)  # the NaN at step 3 is the only error it may have


def test_the_parameter_that_blew_up_first_is_named(tmp_path, capsys):
    """A run logging a grad_norm/<param> family (issue 33): the text and the JSON name the culprit."""
    from monitor_cb.testing.synthetic_families import family_run
    from tests.app.family_runs import write_family_run

    run = family_run(1, blowup=True, n_points=600, params=12)
    write_family_run(tmp_path, "blown", run, close="failed")
    write_family_run(tmp_path, "healthy", family_run(1, n_points=400, params=12))
    assert main(["diagnose", "blown", "--root", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"starting in {run.culprit} (grad_norm)" in out and "layer_origin" in out
    main(["diagnose", "blown", "--root", str(tmp_path), "--json"])
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["kind"] == "layer_origin"]
    assert [f["details"]["member"] for f in found] == [run.culprit]
    assert main(["diagnose", "healthy", "--root", str(tmp_path)]) == 0
    assert "layer_origin" not in capsys.readouterr().out
