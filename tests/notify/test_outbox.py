"""The durable outbox: real receivers on 127.0.0.1, real ``python -m monitor_cb watch`` processes.

Each receiver failure mode (HTTP 500, a hang, a slow 200, a closed port, SIGKILL mid-delivery) is
followed by a restart of ``watch``; the alert must arrive, in order, each with its id, and a
duplicate (at least once) must carry the same id.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from monitor_cb.notify.alert import Alert
from monitor_cb.notify.state import Outbox, RetryPolicy, WatchState

from .conftest import wait_for
from .test_watcher import write_run

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("monitor_cb.ingest")
pytest.importorskip("monitor_cb.diagnosis")


# --- the outbox itself --------------------------------------------------------------------------


def alert(run: str, step: int = 1, kind: str = "finished") -> Alert:
    return Alert(run=run, kind=kind, severity="info", message=f"{run} {kind}", step=step, segment=1, time=1e9)


def test_ids_are_stable_and_distinct() -> None:
    assert alert("exp1").id == alert("exp1").id  # found again after a restart: the same id
    assert len({alert("exp1").id, alert("exp2").id, alert("exp1", 2).id, alert("exp1", kind="nan").id}) == 4
    other_segment = Alert(run="exp1", kind="finished", severity="info", message="", step=1, segment=2)
    assert other_segment.id != alert("exp1").id  # a resumed run that finishes again at the same step
    assert alert("exp1").id.startswith("a-") and alert("exp1").id.isascii()


def test_a_failed_batch_is_resent_as_is_before_anything_newer() -> None:
    box, policy = Outbox(), RetryPolicy(backoff=1.0, max_backoff=8.0)
    for name in ("a", "b"):
        assert box.add(alert(name), ["hook"], now=100.0)
    assert not box.add(alert("a"), ["hook"], now=101.0)  # the same id is queued once
    first = box.batch("hook")
    assert [e.alert.run for e in first] == ["a", "b"]
    box.mark_sending("hook", first)
    box.record("hook", first, False, 102.0, policy, error="HTTP 500")
    box.add(alert("c"), ["hook"], now=103.0)
    again = box.batch("hook")
    assert [e.id for e in again] == [e.id for e in first]  # same message, same ids; "c" waits its turn
    assert box.due_at("hook", again) == 103.0  # 1 s back-off after the first failure
    box.record("hook", again, False, 103.0, policy, error="HTTP 500")
    assert box.due_at("hook", again) == 105.0  # doubled
    box.record("hook", again, True, 105.5, policy)
    box.prune()
    assert [e.alert.run for e in box.batch("hook")] == ["c"]
    assert box.channels["hook"].delivered == 2 and box.pending_counts() == {"hook": 1}


def test_expiry_is_counted_listed_and_survives_a_reload(tmp_path: Path) -> None:
    state = WatchState()
    state.outbox.add(alert("old"), ["hook", "mail"], now=0.0)
    state.outbox.add(alert("new"), ["hook"], now=5000.0)
    gone = state.outbox.expire(now=3700.0, expire_after=3600.0)
    assert [(g["run"], g["channel"]) for g in gone] == [("old", "hook"), ("old", "mail")]
    state.outbox.prune()
    state.save(tmp_path / "s.json")
    loaded = WatchState.load(tmp_path / "s.json")
    assert loaded.outbox.pending_counts() == {"hook": 1, "mail": 0}
    assert [e["run"] for e in loaded.outbox.expired] == ["old", "old"] and loaded.outbox.channels["mail"].expired == 1
    assert [e.alert for e in loaded.outbox.entries] == [alert("new")]  # every field round-trips


def test_a_hostile_or_damaged_state_never_hangs_and_loses_only_the_damage(tmp_path: Path, caplog) -> None:
    fifo = tmp_path / "fifo-state.json"
    os.mkfifo(fifo)
    assert WatchState.load(fifo).outbox.entries == []  # not opened for a blocking read: refused at once
    assert "not a regular file" in caplog.text
    state = WatchState()
    state.outbox.add(alert("good"), ["hook"], now=1.0)
    state.outbox.add(alert("bad"), ["hook"], now=2.0)
    data = state.to_json()
    data["outbox"]["entries"][1]["alert"]["step"] = "not a step"
    data["outbox"]["entries"].append({"id": "a-x", "seq": 9})  # fields missing
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    loaded = WatchState.load(path)
    assert [e.alert.run for e in loaded.outbox.entries] == ["good"] and loaded.outbox.next_seq == 3
    assert caplog.text.count("outbox entry is damaged") == 2


def test_watcher_ids_name_the_run_kind_step_and_segment(tmp_path: Path) -> None:
    from monitor_cb.notify.alert import alert_id
    from monitor_cb.notify.config import NotifyConfig
    from monitor_cb.notify.watcher import Watcher
    from monitor_cb.train.writer import MetricsWriter

    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 21), status="finished")
    watcher = Watcher(root, NotifyConfig(), skip_older=0)
    (first,) = watcher.poll()
    started = watcher.store.run_info("exp1").meta["first_start_time"]  # the run's first start: kept on resumes
    scope = (os.path.realpath(root), started)  # the root: the same run name under another root is another run
    assert (first.segment, first.id) == (1, alert_id("exp1", "finished", 20, 1, scope))
    resumed = MetricsWriter(root / "exp1", fsync_interval=0)  # a resume: the writer's next segment
    for step in range(21, 31):
        resumed.log(step=step, loss=1.0 / step, lr=1e-3, grad_norm=1.0)
    resumed.close("finished")
    (second,) = watcher.poll()
    assert (second.segment, second.id) == (2, alert_id("exp1", "finished", 30, 2, scope))


# --- real receivers, real watch processes -----------------------------------------------------------


def notify_toml(tmp_path: Path, name: str = "hook", **overrides: object) -> Path:
    """Settings with short clocks so each case takes seconds; the URL comes from $TEST_HOOK_URL."""
    settings = {
        "timeout": 1,
        "response_timeout": 1,
        "retries": 1,
        "backoff": 0.1,
        "max_backoff": 0.5,
        "gather": 0,
        "group_window": 0,
    }
    settings.update(overrides)
    lines = ["[notify]", *(f"{k} = {json.dumps(v)}" for k, v in settings.items())]
    lines += ["", "[[channels]]", 'type = "webhook"', f'name = "{name}"', 'url_env = "TEST_HOOK_URL"']
    path = tmp_path / "notify.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def watch(
    root: Path, config: Path, url: str, *extra: str, once: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "monitor_cb", "watch", str(root), "--config", str(config), "--skip-older", "0"]
    command += ["--once"] if once else []
    env = {**os.environ, "TEST_HOOK_URL": url}
    return subprocess.run([*command, *extra], env=env, capture_output=True, text=True, timeout=timeout)


def received_ids(receiver) -> list[str]:
    """Every alert id the receiver got, in arrival order, duplicates included."""
    return [a["id"] for body in receiver.bodies() for a in body["alerts"]]


def three_runs(root: Path) -> None:
    for name in ("exp1", "exp2", "exp3"):
        write_run(root, name, range(1, 21), status="finished")


def test_http_500_then_recovery_across_a_restart(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    three_runs(root)
    rx = http_receiver(default_status=500)
    config = notify_toml(tmp_path)
    down = watch(root, config, rx.url + "/h")
    assert down.returncode == 1, down.stderr
    assert "hook: 3 pending" in down.stdout and "HTTP 500" in down.stdout
    found = [e["alert"]["run"] for e in json.loads(WatchState.default_path(root).read_text())["outbox"]["entries"]]
    assert sorted(found) == ["exp1", "exp2", "exp3"]
    assert "still undelivered" in down.stderr and "retried by the next watch" in down.stderr
    assert len(rx.requests) == 2  # one digest, tried retries + 1 times, the same message both times
    assert len({r.headers["Idempotency-Key"] for r in rx.requests}) == 1

    rx.default_status = 200  # the receiver is back; a new watch process picks the outbox up
    up = watch(root, config, rx.url + "/h")
    assert up.returncode == 0, up.stderr
    assert "hook: 0 pending, 3 delivered, 0 expired" in up.stdout
    accepted = rx.bodies()[-1]
    assert [a["run"] for a in accepted["alerts"]] == found  # in the order they were found
    assert set(received_ids(rx)) == {a["id"] for a in accepted["alerts"]}  # every copy: the same ids
    again = watch(root, config, rx.url + "/h")
    assert again.returncode == 0 and len(rx.requests) == 3  # nothing re-sent once delivered


def test_a_slow_200_is_one_success_not_a_failure(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 21), status="finished")
    rx = http_receiver(delay=1.5)  # longer than the connect timeout, within the response timeout
    done = watch(root, notify_toml(tmp_path, timeout=0.5, response_timeout=5), rx.url + "/h")
    assert done.returncode == 0, done.stderr
    assert len(rx.requests) == 1 and "hook: 0 pending, 1 delivered" in done.stdout


def test_an_answer_later_than_the_response_timeout_is_retried_with_the_same_id(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 21), status="finished")
    rx = http_receiver(delay=2.0)
    config = notify_toml(tmp_path, response_timeout=0.5, retries=0)
    first = watch(root, config, rx.url + "/h")
    assert first.returncode == 1 and "outcome unknown" in first.stdout
    rx.delay = 0.0
    second = watch(root, config, rx.url + "/h")
    assert second.returncode == 0, second.stderr
    ids = received_ids(rx)
    assert len(ids) == 2 and len(set(ids)) == 1  # one logical delivery, the copy recognisable by its id
    assert len({r.headers["Idempotency-Key"] for r in rx.requests}) == 1


def test_a_hanging_receiver_then_a_restart(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 21), status="finished")
    rx = http_receiver(hang=True)
    config = notify_toml(tmp_path, response_timeout=0.3, retries=0)
    started = time.monotonic()
    hung = watch(root, config, rx.url + "/h")
    assert hung.returncode == 1 and "hook: 1 pending" in hung.stdout
    assert time.monotonic() - started < 20  # bounded by the response timeout, not the receiver
    rx.hang = False
    assert watch(root, config, rx.url + "/h").returncode == 0
    assert len(set(received_ids(rx))) == 1 and len(rx.requests) == 2


def test_a_closed_port_then_the_receiver_starts(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    three_runs(root)
    with socket.socket() as probe:  # a port nothing listens on (yet)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/h"
    config = notify_toml(tmp_path)
    refused = watch(root, config, url)
    assert refused.returncode == 1 and "hook: 3 pending" in refused.stdout
    assert "Connection refused" in refused.stdout
    found = [e["alert"]["run"] for e in json.loads(WatchState.default_path(root).read_text())["outbox"]["entries"]]
    rx = http_receiver(port=port)
    assert watch(root, config, url).returncode == 0
    (body,) = rx.bodies()
    assert [a["run"] for a in body["alerts"]] == found and sorted(found) == ["exp1", "exp2", "exp3"]


def test_sigkill_mid_delivery_then_restart_still_delivers(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 21), status="finished")
    rx = http_receiver(hang=True)  # the first delivery is in flight when the watcher dies
    config = notify_toml(tmp_path, response_timeout=30)
    command = [sys.executable, "-m", "monitor_cb", "watch", str(root), "--config", str(config), "--skip-older", "0"]
    process = subprocess.Popen(
        [*command, "--interval", "0.2"],
        env={**os.environ, "TEST_HOOK_URL": rx.url + "/h"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: rx.requests, timeout=30, what="the first delivery attempt")
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    state = json.loads(WatchState.default_path(root).read_text())
    assert [e["alert"]["run"] for e in state["outbox"]["entries"]] == ["exp1"]  # saved before it was sent
    rx.hang = False
    done = watch(root, config, rx.url + "/h")
    assert done.returncode == 0, done.stderr
    ids = received_ids(rx)
    assert len(ids) == 2 and len(set(ids)) == 1  # at least once; the copy carries the same id


def test_expiry_is_logged_shown_and_not_retried(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 21), status="finished")
    rx = http_receiver(default_status=503)
    config = notify_toml(tmp_path, retries=0)
    assert watch(root, config, rx.url + "/h", "--expire", "1s").returncode == 1
    created = json.loads(WatchState.default_path(root).read_text())["outbox"]["entries"][0]["created"]
    wait_for(lambda: time.time() > created + 1.0, timeout=5, what="the alert to be a second old")
    expired = watch(root, config, rx.url + "/h", "--expire", "1s")
    assert expired.returncode == 1
    assert "gave up on alert" in expired.stderr and "given up after" in expired.stderr
    assert "hook: 0 pending, 0 delivered, 1 expired" in expired.stdout
    state = json.loads(WatchState.default_path(root).read_text())
    assert [e["run"] for e in state["outbox"]["expired"]] == ["exp1"] and state["outbox"]["entries"] == []
    assert len(rx.requests) == 1  # given up: not tried again
    assert watch(root, config, rx.url + "/h", "--expire", "1s").returncode == 0  # said once, then quiet


def test_alerts_left_for_a_removed_channel_are_named(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 21), status="finished")
    rx = http_receiver(default_status=500)
    assert watch(root, notify_toml(tmp_path, retries=0), rx.url + "/h").returncode == 1
    rx.default_status = 200
    renamed = watch(root, notify_toml(tmp_path, name="team"), rx.url + "/h")
    assert renamed.returncode == 1  # still undelivered for "hook", not silently dropped
    assert "channel 'hook' has 1 undelivered alert(s) but is not configured any more" in renamed.stderr
    assert "hook: 1 pending" in renamed.stdout and len(rx.requests) == 1


def test_bad_expire_and_a_second_watcher_are_refused(tmp_path: Path, http_receiver) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    rx = http_receiver()
    config = notify_toml(tmp_path)
    bad = watch(root, config, rx.url + "/h", "--expire", "soon")
    assert bad.returncode == 2 and "--expire must be a duration" in bad.stderr
    from monitor_cb.notify.state import exclusive

    with exclusive(WatchState.default_path(root)):
        busy = watch(root, config, rx.url + "/h")
    assert busy.returncode == 2 and f"another watcher (pid {os.getpid()})" in busy.stderr


@pytest.mark.parametrize("others_can_write", [False, True])
def test_an_old_state_in_the_root_is_imported_only_when_trusted(
    tmp_path: Path, http_receiver, others_can_write: bool
) -> None:
    root = tmp_path / "logs"
    write_run(root, "exp1", range(1, 21), status="finished")
    old = root / ".monitor" / "watch-state.json"  # what an older watcher left after reporting exp1
    old.parent.mkdir(exist_ok=True)
    old.parent.chmod(0o755)
    reported = {"n_records": 20, "status": "finished", "findings": [], "alerted": ["finished@20"]}
    old.write_text(json.dumps({"version": 1, "runs": {"exp1": reported}}))
    old.chmod(0o666 if others_can_write else 0o644)
    rx = http_receiver()
    done = watch(root, notify_toml(tmp_path), rx.url + "/h")
    assert done.returncode == 0, done.stderr
    if others_can_write:  # anyone could have written it (to silence alerts): not taken, the alert goes out
        assert "not importing the old state" in done.stderr and "others can write it" in done.stderr
        assert [a["run"] for a in rx.bodies()[0]["alerts"]] == ["exp1"]
    else:
        assert "imported what was already reported" in done.stderr and rx.requests == []
    assert old.read_text() == json.dumps({"version": 1, "runs": {"exp1": reported}})  # the root is not written


def test_each_test_notification_has_its_own_id(http_receiver) -> None:
    from monitor_cb.masking import Secret
    from monitor_cb.notify.channels import WebhookChannel
    from monitor_cb.notify.config import NotifyConfig, Route
    from monitor_cb.notify.delivery import send_test_notification

    rx = http_receiver()
    config = NotifyConfig(routes=[Route(WebhookChannel("hook", Secret(rx.url + "/h")))], timeout=2)
    assert all(r.ok for r in send_test_notification(config) + send_test_notification(config))
    keys = [r.headers["Idempotency-Key"] for r in rx.requests]
    assert len(keys) == 2 and len(set(keys)) == 2  # a receiver deduplicating on the key still shows the second


@pytest.mark.slow
def test_outage_with_a_restart_loses_nothing(tmp_path: Path) -> None:
    """bench/bench_alert_outage.py compressed: down 3 s, alerts before, during and across a SIGKILL restart."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_alert_outage", REPO / "bench" / "bench_alert_outage.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    scenario = bench.Scenario(
        down_seconds=3.0,
        runs=3,
        baseline_runs=1,
        interval=0.3,
        backoff=0.2,
        max_backoff=0.5,
        gather=0.0,
        group_window=0.5,
        grace=30.0,
        kill=True,
    )
    result = bench.play(scenario, tmp_path)
    assert (result.expected, result.delivered, result.lost) == (4, 4, 0)
    assert result.in_order
    assert result.requests > result.delivered  # the outage was real: refused attempts came first


# --- clock jumps (issue 34, item 7) --------------------------------------------------------------------

DAY = 86_400.0


class JumpingClock:
    """Wall-clock time plus an offset the test moves (a clock jump and its correction)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def jumped_sender(tmp_path: Path, receiver, clock: JumpingClock, **settings: float):
    """An OutboxSender over a fresh state holding one alert found now (by ``clock``), for a webhook on ``receiver``."""
    import threading

    from monitor_cb.masking import Secret
    from monitor_cb.notify.channels import WebhookChannel
    from monitor_cb.notify.config import NotifyConfig, Route
    from monitor_cb.notify.outbox import OutboxSender

    route = Route(WebhookChannel("hook", Secret(receiver.url + "/hook")), min_severity="info")
    options = {"backoff": 0.1, "max_backoff": 0.5, "gather": 0.0, "group_window": 0.0, "retries": 0, **settings}
    config = NotifyConfig(routes=[route], timeout=2, response_timeout=2, **options)
    state = WatchState()
    save = lambda: state.save(tmp_path / "state.json")  # noqa: E731
    sender = OutboxSender(config, state, save, lock=threading.RLock(), clock=clock)
    state.outbox.add(alert("exp1"), ["hook"], clock())
    return sender, state


def test_a_retry_set_while_the_clock_was_ten_days_ahead_waits_no_longer_than_the_longest_backoff(
    tmp_path: Path, http_receiver
) -> None:
    """As found: while the clock was ten days ahead an alert was found and its delivery failed (its next try
    ten days ahead); the clock came back, the continuous watch waited for that next try, and the alert expired
    undelivered."""
    rx = http_receiver(statuses=[500])
    clock = JumpingClock()
    clock.offset = 10 * DAY
    sender, state = jumped_sender(tmp_path, rx, clock)
    assert not sender.drain(timeout=5)  # tried once (retries=0) ten days ahead: HTTP 500
    (entry,) = state.outbox.entries
    assert entry.channels["hook"].next_try > time.time() + 9 * DAY
    clock.offset = 0.0  # NTP corrects the clock
    sender.start()
    try:
        wait_for(lambda: len(rx.requests) == 2, timeout=0.5 + 5, what="the retry within the longest back-off")
        wait_for(lambda: state.outbox.pending_counts() == {"hook": 0}, what="the alert delivered")
    finally:
        sender.close(5)
    assert state.outbox.channels["hook"].delivered == 1 and state.outbox.channels["hook"].expired == 0
    assert rx.requests[0].headers["Idempotency-Key"] == rx.requests[1].headers["Idempotency-Key"]


def test_an_alert_found_while_the_clock_was_ahead_is_gathered_for_gather_seconds_only(
    tmp_path: Path, http_receiver
) -> None:
    rx = http_receiver()
    clock = JumpingClock()
    clock.offset = 10 * DAY
    sender, state = jumped_sender(tmp_path, rx, clock, gather=0.2, group_window=0.3)
    clock.offset = 0.0  # the alert's "created" is now ten days in the future
    sender.start()
    try:
        wait_for(lambda: state.outbox.pending_counts() == {"hook": 0}, timeout=5, what="delivery after gather")
    finally:
        sender.close(5)
    assert len(rx.requests) == 1
