"""The headless watcher on real runs (MetricsWriter -> RunStore -> diagnose -> outbox -> receiver)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor_cb.masking import Secret
from monitor_cb.notify.channels import WebhookChannel
from monitor_cb.notify.config import NotifyConfig, Route
from monitor_cb.notify.state import WatchState
from monitor_cb.notify.training import TrainingNotifier, guard_message
from monitor_cb.notify.watcher import Watcher
from monitor_cb.train.writer import MetricsWriter

from .conftest import wait_for

pytest.importorskip("monitor_cb.ingest")
pytest.importorskip("monitor_cb.diagnosis")

NAN = math.nan


def make_config(receiver) -> NotifyConfig:
    route = Route(WebhookChannel("hook", Secret(receiver.url + "/hook")), min_severity="info")
    return NotifyConfig(
        routes=[route], timeout=2, response_timeout=2, retries=1, backoff=0.05, group_window=0, gather=0.05
    )


def state_file(root: Path) -> Path:
    """The watcher's own state for ``root`` (under $MONITOR_STATE_DIR, which conftest points at tmp_path)."""
    return WatchState.default_path(root)


def sent(receiver) -> list[dict]:
    """Every alert the receiver got, digests unpacked."""
    return [alert for body in receiver.bodies() for alert in body["alerts"]]


def write_run(root: Path, name: str, steps: range, nan_from: int | None = None, **close: str) -> MetricsWriter:
    """A run whose records are time-stamped at a steady 0.1 s a step, the last one now.

    Written in a tight loop with wall-clock stamps, a pause of the test process between two records
    (a collection, a busy machine) reads as a throughput drop at a million steps a second.
    """
    writer = MetricsWriter(root / name, fsync_interval=0)
    end = time.time()
    for i, step in enumerate(steps, start=1 - len(steps)):
        loss = NAN if nan_from is not None and step >= nan_from else 2.0 / (1 + step * 0.01)
        writer.log_at(end + 0.1 * i, step=step, loss=loss, lr=1e-3, grad_norm=1.0)
    if close:
        writer.close(**close)
    else:
        assert writer.flush()
    return writer


def watch_once(root: Path, receiver, **kwargs) -> list:
    watcher = Watcher(root, make_config(receiver), **kwargs)
    alerts = watcher.poll()
    assert watcher.deliver(timeout=10)
    return alerts


def test_nan_run_alerts_once_restart_sends_nothing_new_run_is_watched(tmp_path: Path, http_receiver):
    root = tmp_path / "logs"
    rx = http_receiver()
    write_run(
        root, "exp1", range(1, 601), nan_from=101, status="stopped", reason="stopped: non-finite loss at step 100"
    )

    watch_once(root, rx)
    alerts = sent(rx)
    assert [a["kind"] for a in alerts].count("nan") == 1  # 500 NaN steps: one alert
    (nan,) = [a for a in alerts if a["kind"] == "nan"]
    assert (nan["run"], nan["severity"], nan["step"]) == ("exp1", "error", 101)
    (stopped,) = [a for a in alerts if a["kind"] == "stopped"]
    assert stopped["severity"] == "error" and stopped["message"] == "stopped: non-finite loss at step 100"
    state = json.loads(state_file(root).read_text())
    assert "nan" in state["runs"]["exp1"]["alerted"]
    assert state["outbox"]["entries"] == []  # all delivered: nothing left pending
    assert state["outbox"]["channels"]["hook"]["delivered"] == len(alerts)
    assert not (root / ".monitor" / "watch-state.json").exists()  # never in the shared root

    before = len(rx.requests)
    watch_once(root, rx)  # a restart: a fresh watcher and notifier over the same state
    assert len(rx.requests) == before

    write_run(root, "exp2", range(1, 51), status="finished")  # a run that appears later
    watch_once(root, rx)
    new = sent(rx)[len(alerts) :]
    assert [(a["run"], a["kind"]) for a in new] == [("exp2", "finished")]
    assert new[0]["severity"] == "info" and new[0]["message"] == "run finished at step 50"
    watch_once(root, rx)
    assert len(sent(rx)) == len(alerts) + 1  # "finished" reported once


def test_live_run_is_tailed(tmp_path: Path, http_receiver):
    root = tmp_path / "logs"
    rx = http_receiver()
    watcher = Watcher(root, make_config(rx))
    writer = write_run(root, "live", range(1, 101))
    assert watcher.poll() == []  # healthy and running: nothing to say
    for step in range(101, 121):
        writer.log(step=step, loss=NAN, lr=1e-3, grad_norm=NAN)
    assert writer.flush()
    kinds = [a.kind for a in watcher.poll()]
    assert kinds.count("nan") == 1
    assert watcher.deliver(timeout=5)
    assert [a["kind"] for a in sent(rx)].count("nan") == 1
    for step in range(121, 141):  # more NaN: already reported
        writer.log(step=step, loss=NAN, lr=1e-3)
    assert writer.flush()
    assert [a.kind for a in watcher.poll()].count("nan") == 0
    writer.close("finished")
    assert [a.kind for a in watcher.poll()] == ["finished"]
    assert watcher.deliver(timeout=5)


def test_500_findings_of_one_kind_send_one_alert(tmp_path: Path, http_receiver):
    """Even a detector that reports every NaN step separately produces one alert per (run, kind)."""
    from monitor_cb.diagnosis import Finding

    def per_step(frame, settings=None, *, status=None, now=None):
        return [Finding("nan", "error", int(s), f"NaN at {s}") for s in frame["step"][frame["loss"].isna()]]

    root = tmp_path / "logs"
    rx = http_receiver()
    write_run(root, "exp1", range(1, 601), nan_from=101, status="failed", reason="RuntimeError: boom")
    alerts = watch_once(root, rx, diagnose=per_step)
    assert [a.kind for a in alerts] == ["nan", "failed"]
    assert len(json.loads(state_file(root).read_text())["runs"]["exp1"]["findings"]) == 500
    assert [a["kind"] for a in sent(rx)] == ["nan", "failed"]


def test_old_runs_are_recorded_without_alerts(tmp_path: Path, http_receiver):
    import time

    root = tmp_path / "logs"
    rx = http_receiver()
    write_run(root, "old", range(1, 201), nan_from=150, status="stopped", reason="stopped: non-finite loss")
    alerts = watch_once(root, rx, clock=lambda: time.time() + 7200)  # the run looks two hours old
    assert alerts == [] and rx.requests == []
    assert "nan" in WatchState.load(state_file(root)).runs["old"].alerted
    assert [a.kind for a in watch_once(root, rx, skip_older=0)] == []  # still nothing: already recorded


def test_a_failing_receiver_does_not_stop_the_watcher(tmp_path: Path, http_receiver):
    root = tmp_path / "logs"
    hanging, failing, good = http_receiver(hang=True), http_receiver(default_status=500), http_receiver()
    routes = [
        Route(WebhookChannel(name, Secret(rx.url + "/h")), min_severity="info")
        for name, rx in (("hanging", hanging), ("failing", failing), ("good", good))
    ]
    config = NotifyConfig(
        routes=routes, timeout=0.5, response_timeout=0.5, retries=1, backoff=0.05, group_window=0, gather=0
    )
    watcher = Watcher(root, config)
    watcher.outbox.start()
    write_run(root, "exp1", range(1, 101), nan_from=50, status="stopped", reason="stopped: non-finite loss")
    assert len(watcher.poll()) >= 2
    wait_for(lambda: good.requests, timeout=2, what="the healthy channel")
    write_run(root, "exp2", range(1, 30), status="finished")
    assert [a.kind for a in watcher.poll()] == ["finished"]  # the watcher goes on
    wait_for(lambda: {a["run"] for a in sent(good)} == {"exp1", "exp2"}, timeout=5, what="both runs on the good one")
    assert watcher.outbox.close(timeout=5)
    pending = watcher.pending()
    assert pending["good"] == 0 and pending["hanging"] >= 2 and pending["failing"] >= 2  # kept, not dropped


def test_training_notifier_sends_the_guard_decision(tmp_path: Path, http_receiver):
    rx = http_receiver()
    route = Route(WebhookChannel("hook", Secret(rx.url + "/h")), min_severity="info")
    config = NotifyConfig(routes=[route], timeout=2, retries=1, backoff=0.05, group_window=0, gather=0)
    reported: list[str] = []
    notifier = TrainingNotifier(config, run="exp1", run_name="exp1", on_sent=reported.append)
    assert notifier.guard_stopped(41_200, "stopped: loss NaN for 3 steps") is True
    assert notifier.guard_stopped(41_201, "again") is False  # same run and kind: once
    assert notifier.close(timeout=5)
    (alert,) = sent(rx)
    assert alert["message"] == "stopped at step 41,200: loss NaN for 3 steps" and alert["kind"] == "guard_stop"
    assert reported == ["guard_stop"] and notifier.delivered == {"guard_stop"}
    assert guard_message(7, None) == "stopped at step 7"
    assert guard_message(60, "stopped: non-finite loss at step 60") == "stopped: non-finite loss at step 60"

    # The watcher does not repeat a stop the training process already announced.
    root = tmp_path / "logs"
    writer = MetricsWriter(root / "exp1", fsync_interval=0)
    writer.log(step=1, loss=1.0)
    writer.update_meta(notified=["guard_stop"])
    writer.close("stopped", reason="stopped: loss NaN for 3 steps")
    rx2 = http_receiver()
    assert "stopped" not in [a.kind for a in watch_once(root, rx2)]


def test_watch_command_once(tmp_path: Path, http_receiver):
    root = tmp_path / "logs"
    rx = http_receiver()
    write_run(root, "exp1", range(1, 201), nan_from=120, status="stopped", reason="stopped: non-finite loss")
    config = tmp_path / "notify.toml"
    config.write_text(
        '[notify]\nmin_severity = "info"\ngather = 0\ngroup_window = 0\ntimeout = 2\n\n'
        '[[channels]]\ntype = "webhook"\nurl_env = "TEST_HOOK_URL"\n'
    )
    env = {**os.environ, "TEST_HOOK_URL": rx.url + "/hook/cli-secret-token-123"}
    command = [sys.executable, "-m", "monitor_cb", "watch", str(root), "--config", str(config), "--once"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [a["kind"] for a in sent(rx)].count("nan") == 1
    assert "cli-secret-token-123" not in done.stderr + done.stdout
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and [a["kind"] for a in sent(rx)].count("nan") == 1


@pytest.mark.mindspore
@pytest.mark.slow
def test_real_mindspore_demo_nan_guard_stop_sends_one_alert(tmp_path: Path, http_receiver):
    """Train the demo with an injected NaN and the guard on: it stops, and the watcher says so once."""
    pytest.importorskip("mindspore")
    root = tmp_path / "logs"
    command = [sys.executable, "-m", "monitor_cb", "demo", "--steps", "200", "--inject", "nan@60", "--on-nan", "stop"]
    command += ["--logdir", str(root), "--name", "nan-demo"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads((root / "nan-demo" / "metrics.meta.json").read_text())
    assert meta["status"] == "stopped" and "non-finite" in meta["reason"]
    rx = http_receiver()
    watch_once(root, rx)
    alerts = sent(rx)
    assert [a["kind"] for a in alerts].count("nan") == 1
    (stopped,) = [a for a in alerts if a["kind"] == "stopped"]
    assert stopped["severity"] == "error" and "non-finite loss" in stopped["message"]
    watch_once(root, rx)
    assert sent(rx) == alerts  # a restart sends nothing again


def test_damaged_state_starts_afresh_and_is_replaced_atomically(tmp_path: Path, http_receiver, caplog):
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 20), status="finished")
    path = state_file(root)
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "runs": {"exp1": ')  # torn by a crash
    rx = http_receiver()
    assert [a.kind for a in watch_once(root, rx)] == ["finished"]
    assert "unreadable" in caplog.text
    assert json.loads(path.read_text())["version"] == 2
    assert sorted(p.name for p in path.parent.iterdir()) == ["watch-state.json"]  # no temp files


def test_watch_command_once_fails_when_delivery_fails(tmp_path: Path, http_receiver):
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 20), status="finished")
    rx = http_receiver(default_status=404)
    command = [sys.executable, "-m", "monitor_cb", "watch", str(root), "--once", "--webhook", rx.url + "/h"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "HTTP 404" in done.stderr
    assert len(rx.requests) == 1  # a 404 is not retried


def test_run_id_for_matches_the_store(tmp_path: Path, monkeypatch):
    from monitor_cb.ingest import RunStore
    from monitor_cb.notify.training import run_id_for

    root = tmp_path / "logs"
    write_run(root, "bert/exp1", range(1, 5), status="finished")
    assert [info.id for info in RunStore(root).list_runs()] == [run_id_for(root / "bert" / "exp1", root)]
    monkeypatch.setenv("MONITOR_LOGDIR", str(root))
    assert run_id_for(root / "bert" / "exp1") == "bert/exp1"
    assert run_id_for(tmp_path / "elsewhere" / "exp9") == "exp9"


def test_config_with_secrets_survives_deepcopy_but_not_pickle(http_receiver):
    import copy
    import pickle

    rx = http_receiver()
    config = NotifyConfig(routes=[Route(WebhookChannel("hook", Secret(rx.url + "/h/pickleSECRET")))])
    clone = copy.deepcopy(config)
    assert clone.routes[0].channel.url.reveal() == rx.url + "/h/pickleSECRET"
    with pytest.raises(TypeError):
        pickle.dumps(config)


def test_stalled_run_alerts_once_and_again_after_it_moves_on(tmp_path: Path, http_receiver):
    import time

    from monitor_cb.ingest import RunStore, StatusPolicy

    root = tmp_path / "logs"
    rx = http_receiver()
    offset = [0.0]
    clock = lambda: time.time() + offset[0]  # noqa: E731 - a clock the test moves forward
    store = RunStore(root, policy=StatusPolicy(stall_min_s=60), clock=clock)
    watcher = Watcher(root, make_config(rx), store=store, clock=clock)
    # records time-stamped at a steady 0.5 s a step: the pause between the two batches below is wall
    # time of this test (seconds on a loaded machine), which read as a throughput drop
    base = time.time() - 60.0
    writer = MetricsWriter(root / "slow", fsync_interval=0)
    for step in range(1, 51):
        writer.log_at(base + 0.5 * step, step=step, loss=2.0 / (1 + step * 0.01), lr=1e-3, grad_norm=1.0)
    assert writer.flush()
    assert watcher.poll() == []
    offset[0] = 600.0  # ten minutes without a record
    assert [(a.kind, a.step) for a in watcher.poll()] == [("stalled", 50)]
    assert watcher.poll() == []  # still stalled: said once
    offset[0] = 0.0
    for step in range(51, 61):
        writer.log_at(base + 0.5 * step, step=step, loss=1.0, lr=1e-3, grad_norm=1.0)
    assert writer.flush()
    assert watcher.poll() == []  # running again
    offset[0] = 600.0
    assert [(a.kind, a.step) for a in watcher.poll()] == [("stalled", 60)]
    writer.close("finished")
    assert watcher.deliver(timeout=5)
    assert [a["kind"] for a in sent(rx)] == ["stalled", "stalled"]


def test_watch_command_keeps_watching_until_terminated(tmp_path: Path, http_receiver):
    import signal

    root = tmp_path / "logs"
    root.mkdir()
    rx = http_receiver()
    command = [sys.executable, "-m", "monitor_cb", "watch", str(root), "--interval", "0.2", "--webhook", rx.url + "/h"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        write_run(root, "later", range(1, 30), status="finished")  # appears while the watcher runs
        wait_for(lambda: sent(rx), timeout=30, what="the watcher to report the new run")
        assert [(a["run"], a["kind"]) for a in sent(rx)] == [("later", "finished")]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_diagnosis_settings_others_can_write_cannot_switch_the_nan_alert_off(tmp_path: Path, http_receiver, caplog):
    """A colleague who can write the shared root writes ``disabled: ["nan"]`` into a group-writable
    diagnosis.json: the watcher says why it ignores the file and still alerts; a private file is honoured."""
    from monitor_cb.diagnosis.settings import settings_path

    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 201), nan_from=101, status="failed")
    path = settings_path(root)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"disabled": ["nan"]}))
    path.chmod(0o666)
    rx = http_receiver()
    with caplog.at_level("WARNING", logger="monitor_cb.notify"):
        watch_once(root, rx)
    assert "nan" in [a["kind"] for a in sent(rx)]
    assert "diagnosis settings not used" in caplog.text and f"chmod go-w {path}" in caplog.text

    path.chmod(0o644)  # the watcher's own, private file: its choice stands
    write_run(root, "exp2", range(1, 201), nan_from=101, status="failed")
    before = len(sent(rx))
    watch_once(root, rx)
    assert [a["kind"] for a in sent(rx)[before:] if a["run"] == "exp2"] == ["failed"]


def test_layer_origin_is_alerted_with_the_parameter_named(tmp_path: Path, http_receiver):
    """A per-parameter family whose one member blows up first: the alert names it (issue 33)."""
    from monitor_cb.testing.synthetic_families import family_run
    from tests.app.family_runs import write_family_run

    root = tmp_path / "logs"
    rx = http_receiver()
    run = family_run(1, blowup=True, n_points=600, params=12)
    write_family_run(root, "blown", run, close="failed", t0=time.time() - 0.5 * len(run.frame))
    write_family_run(root, "healthy", family_run(1, n_points=400, params=12), t0=time.time() - 200)
    watch_once(root, rx)
    origin = [a for a in sent(rx) if a["kind"] == "layer_origin"]
    assert [(a["run"], a["severity"]) for a in origin] == [("blown", "error")]
    assert f"starting in {run.culprit} (grad_norm)" in origin[0]["message"]


def test_a_run_that_logs_no_throughput_gets_no_throughput_alert(tmp_path: Path, http_receiver):
    """As found (#34 item 10): every run logging no throughput, whose record times cannot stand for it, sent
    an info alert of kind throughput_drop ("throughput was not judged"). A note is not an alert."""
    from monitor_cb.diagnosis import diagnose
    from monitor_cb.ingest import RunStore

    root = tmp_path / "logs"
    rx = http_receiver()
    writer = MetricsWriter(root / "custom-loop", fsync_interval=0)
    start = time.time() - 60
    for step in range(1, 601):  # a custom loop's records, stamped a microsecond apart (written at the end)
        writer.log_at(start + step * 1e-6, step=step, loss=2.0 / (1 + step * 0.01), lr=1e-3)
    writer.close()
    findings = diagnose(RunStore(root).read("custom-loop").frame)
    assert any(f.kind == "throughput_drop" and f.details.get("variant") == "not_judged" for f in findings)
    alerts = watch_once(root, rx)
    assert [a.kind for a in alerts] == ["finished"]
    assert [a["kind"] for a in wait_for(lambda: sent(rx), 10)] == ["finished"]
