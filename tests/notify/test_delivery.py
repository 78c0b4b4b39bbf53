"""Delivery: retries with backoff, timeouts, isolation between channels, dedupe, digests, quiet hours."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from monitor_cb.masking import Secret
from monitor_cb.notify.alert import Alert
from monitor_cb.notify.channels import SlackChannel, WebhookChannel
from monitor_cb.notify.config import NotifyConfig, QuietHours, Route
from monitor_cb.notify.delivery import Notifier, deliver

from .conftest import wait_for


def alert(run: str = "exp1", kind: str = "nan", severity: str = "error", step: int = 412) -> Alert:
    return Alert(run=run, kind=kind, severity=severity, message=f"{kind} at step {step}", step=step)


def hook(receiver, name: str = "hook") -> WebhookChannel:
    return WebhookChannel(name, Secret(receiver.url + "/hook/secret-path-token", source="$HOOK"))


def fast_config(*routes: Route, **overrides: float) -> NotifyConfig:
    settings = {
        "timeout": 1.0,
        "response_timeout": 1.0,
        "retries": 2,
        "backoff": 0.05,
        "group_window": 0.0,
        "gather": 0.05,
    }
    settings.update(overrides)
    return NotifyConfig(routes=list(routes), **settings)  # type: ignore[arg-type]


def test_retries_with_exponential_backoff_then_success(http_receiver, caplog):
    rx = http_receiver(statuses=[500, 503], default_status=200)
    with caplog.at_level(logging.INFO, logger="monitor_cb.notify"):
        result = deliver(hook(rx), [alert()], timeout=2, retries=3, backoff=0.1)
    assert result.ok and result.attempts == 3
    t = [r.time for r in rx.requests]
    assert t[1] - t[0] >= 0.09 and t[2] - t[1] >= 0.19  # 0.1 s, then 0.2 s
    assert caplog.text.count("retrying in") == 2 and "HTTP 500" in caplog.text


def test_4xx_is_not_retried_but_429_is(http_receiver):
    rx = http_receiver(default_status=400)
    result = deliver(hook(rx), [alert()], timeout=2, retries=3, backoff=0.01)
    assert not result.ok and result.attempts == 1 and "HTTP 400" in (result.error or "")
    rx429 = http_receiver(statuses=[429], default_status=200)
    assert deliver(hook(rx429), [alert()], timeout=2, retries=3, backoff=0.01).attempts == 2


def test_connection_refused_is_retried_and_bounded():
    channel = WebhookChannel("nowhere", Secret("http://127.0.0.1:9/hook"))  # discard port: nothing listens
    started = time.monotonic()
    result = deliver(channel, [alert()], timeout=1, retries=2, backoff=0.01)
    assert not result.ok and result.attempts == 3 and time.monotonic() - started < 5


def test_hanging_and_failing_receivers_do_not_block_the_others(http_receiver):
    hanging = http_receiver(hang=True)
    failing = http_receiver(default_status=500)
    good = http_receiver(answer={"ok": True})
    slack_good = http_receiver()
    notifier = Notifier(
        fast_config(
            Route(hook(hanging, "hanging"), min_severity="info"),
            Route(hook(failing, "failing"), min_severity="info"),
            Route(hook(good, "good"), min_severity="info"),
            Route(SlackChannel("slack", Secret(slack_good.url + "/services/x")), min_severity="info"),
            timeout=0.5,
            response_timeout=0.5,
            retries=1,
        )
    )
    started = time.monotonic()
    notifier.notify(alert())
    wait_for(lambda: good.requests and slack_good.requests, timeout=2, what="the healthy channels")
    assert time.monotonic() - started < 1.0  # not held up by the hanging one
    # Everything settles within attempts * timeout + backoff, not "forever".
    assert notifier.close(timeout=5)
    assert time.monotonic() - started < 3.0
    by_channel = {r.channel: r for r in notifier.results}
    assert by_channel["good"].ok and by_channel["slack"].ok
    assert not by_channel["hanging"].ok and "did not answer within 0.5 s" in (by_channel["hanging"].error or "")
    assert "outcome unknown" in (by_channel["hanging"].error or "")  # it had the message: a retry repeats its id
    assert not by_channel["failing"].ok and by_channel["failing"].attempts == 2
    assert len(hanging.requests) == 2 and len(failing.requests) == 2


def test_same_run_and_kind_is_sent_once(http_receiver):
    rx = http_receiver()
    notifier = Notifier(fast_config(Route(hook(rx), min_severity="info")))
    for step in range(500):  # a run with 500 NaN steps
        notifier.notify(alert(step=step))
    assert notifier.close(timeout=5)
    (body,) = rx.bodies()
    assert body["count"] == 1 and body["step"] == 0


def test_flood_across_runs_becomes_one_digest_per_window(http_receiver):
    rx = http_receiver()
    notifier = Notifier(fast_config(Route(hook(rx), min_severity="info"), gather=0.2, group_window=0.5))
    for i in range(30):
        notifier.notify(alert(run=f"run{i}", kind="loss_spike", severity="warning"))
    wait_for(lambda: rx.requests, timeout=3, what="the digest")
    first = rx.bodies()[0]
    assert first["kind"] == "digest" and first["count"] == 30 and first["severity"] == "warning"
    assert "... and 10 more" in first["text"]
    notifier.notify(alert(run="late"))  # inside the window: held, then sent alone
    wait_for(lambda: len(rx.requests) == 2, timeout=3, what="the next window")
    assert rx.requests[1].time - rx.requests[0].time >= 0.45
    assert rx.bodies()[1]["run"] == "late"
    assert notifier.close(timeout=5)


def test_severity_filter_and_quiet_hours(http_receiver):
    errors_only = http_receiver()
    everything = http_receiver()
    night = datetime(2026, 12, 2, 2, 30).timestamp()
    quiet = QuietHours.parse("23:00-07:00")
    notifier = Notifier(
        fast_config(
            Route(hook(errors_only, "errors"), min_severity="error"),
            Route(hook(everything, "all"), min_severity="info", quiet=quiet, quiet_min_severity="error"),
        ),
        clock=lambda: night,
    )
    notifier.notify(alert(run="a", kind="plateau", severity="info"))
    notifier.notify(alert(run="b", kind="loss_spike", severity="warning"))
    notifier.notify(alert(run="c", kind="nan", severity="error"))
    assert notifier.close(timeout=5)
    assert [b["run"] for b in errors_only.bodies()] == ["c"]
    assert [b["run"] for b in everything.bodies()] == ["c"]  # quiet hours: only errors get through
    assert quiet.active(night) and not quiet.active(datetime(2026, 12, 2, 12, 0).timestamp())


def test_notify_never_raises_and_send_test_reports_each_channel(http_receiver):
    good = http_receiver()
    bad = http_receiver(default_status=404)
    notifier = Notifier(fast_config(Route(hook(good, "good")), Route(hook(bad, "bad"))))
    results = notifier.send_test("hello from the settings page")
    assert [(r.channel, r.ok) for r in results] == [("good", True), ("bad", False)]
    assert good.bodies()[0]["message"] == "hello from the settings page"
    assert notifier.notify(object()) is False  # type: ignore[arg-type]
    assert notifier.close(timeout=2)


def test_send_test_notification_for_a_settings_page(http_receiver):
    from monitor_cb.notify import find_config, load_config, send_test_notification  # the page's imports

    assert callable(find_config) and callable(load_config)
    good, hanging = http_receiver(), http_receiver(hang=True)
    config = fast_config(Route(hook(good, "good")), Route(hook(hanging, "hanging")), timeout=0.5)
    started = time.monotonic()
    results = send_test_notification(config, "test from the dashboard")
    assert time.monotonic() - started < 2.0
    assert [(r.channel, r.ok) for r in results] == [("good", True), ("hanging", False)]
    assert good.bodies()[0]["kind"] == "test" and good.bodies()[0]["message"] == "test from the dashboard"
