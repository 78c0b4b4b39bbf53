"""Trying a webhook URL from the Settings page before any ``notify.toml`` exists (issue 36, item 9): one test
message to a real receiver on 127.0.0.1, nothing saved, the URL never shown back; not on a read-only
dashboard; and the settings example wraps rather than being cut at the right edge."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.app.test_settings_page import SECRET_PATH, all_text, root, run_app  # noqa: F401 - fixtures
from tests.notify.conftest import HttpReceiver, http_receiver  # noqa: F401 - the fixture, reused


def test_a_typed_webhook_url_gets_a_test_message_without_a_settings_file(
    root: Path,  # noqa: F811
    http_receiver: Callable[..., HttpReceiver],  # noqa: F811
) -> None:
    receiver = http_receiver()
    at = run_app()
    assert any("No notification settings" in i.value for i in at.info)
    at.text_input(key="notify_try_url").input(receiver.url + SECRET_PATH)
    at.button(key="notify_try").click().run()
    assert not at.exception and not at.error
    assert [s.value for s in at.success] == ["webhook URL typed here: delivered"]
    bodies = receiver.bodies()
    assert len(bodies) == 1 and "test notification" in bodies[0]["message"]
    assert receiver.requests[0].path == SECRET_PATH
    shown = all_text(at).replace(f'value: "{receiver.url + SECRET_PATH}"', "")  # the input's own value aside
    assert "SECRET" not in shown, "the URL is not written back on the page"
    assert not (root.parent / "xdg").exists() and not (root / ".monitor").exists(), "nothing is saved"


@pytest.mark.parametrize(
    ("url", "said"), [("", "enter the webhook URL"), ("ftp://example.invalid/hook", "must start with http(s)://")]
)
def test_a_bad_url_is_said_and_nothing_is_sent(
    root: Path,  # noqa: F811
    http_receiver: Callable[..., HttpReceiver],  # noqa: F811
    url: str,
    said: str,
) -> None:
    receiver = http_receiver()
    at = run_app()
    at.text_input(key="notify_try_url").input(url)
    at.button(key="notify_try").click().run()
    assert not at.exception
    assert any(said in e.value for e in at.error), [e.value for e in at.error]
    assert receiver.bodies() == []


def test_a_read_only_dashboard_offers_no_url_to_try(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("MONITOR_READ_ONLY_SETTINGS", "1")
    at = run_app()
    assert not [t for t in at.text_input if t.key == "notify_try_url"]
    assert not [b for b in at.button if b.key in ("notify_try", "notify_test")]


def test_the_settings_example_wraps(root: Path) -> None:  # noqa: F811
    at = run_app()
    (example,) = [c for c in at.code if c.language == "toml"]
    assert example.proto.wrap_lines, "a long line wraps instead of running past the right edge"
