"""AppTests with the log root on a real S3 API server (moto on 127.0.0.1): the pages work as on a directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.storage.shipper import Shipper, UploadOptions
from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, charts, run_entry, texts
from tests.objectstore import KEY_ID, SECRET, S3Env, TcpProxy, wait_for


def page_dump(at: AppTest) -> str:
    """Every element's message, as sent to the browser (text, labels, options, chart specs)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(out)


@pytest.fixture
def bucket_root(s3_env: S3Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Two runs written locally and shipped to ``s3://<bucket>/logs``, which the dashboard reads."""
    local = tmp_path / "local"
    write_run(local, "exp1", steps=150)
    write_run(local, "exp2", steps=80, close=None).close("failed", reason="RuntimeError: device lost")
    assert Shipper(local, UploadOptions(s3_env.url("logs"))).ship_all(30)
    url = s3_env.url("logs")
    monkeypatch.setenv("MONITOR_LOGDIR", url)
    monkeypatch.setattr(sys, "argv", ["dashboard.py"])
    return url


def test_live_page_shows_a_run_in_a_bucket(bucket_root: str) -> None:
    at = run_entry(DASHBOARD, {"run": "exp1"})
    assert_ok(at)
    assert f"Log root: `{bucket_root}`" in [c.value for c in at.sidebar.caption]
    assert at.sidebar.selectbox[0].value == "exp1"
    options = at.sidebar.selectbox[0].options
    assert len(options) == 2 and any("exp2 · failed" in o for o in options)
    figures = charts(at)
    assert figures and any(len(trace.get("x", [])) for fig in figures for trace in fig["data"])
    assert {m.label: m.value for m in at.metric}["Step"] == "150"


def _runs_app() -> None:
    from pages.runs_page import runs_page

    runs_page()


def test_runs_page_lists_statuses_from_the_bucket(bucket_root: str) -> None:
    at = AppTest.from_function(_runs_app, default_timeout=60).run()
    assert_ok(at)
    table = at.dataframe[0].value
    by_run = dict(zip(table["id"], table["status"], strict=True))
    assert set(by_run) == {"exp1", "exp2"} and "failed" in by_run["exp2"] and "finished" in by_run["exp1"]
    assert "RuntimeError: device lost" in set(table["reason"])


def test_credentials_in_the_logdir_url_never_reach_the_page(s3_env: S3Env, bucket_root: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    url = f"s3://{KEY_ID}:{SECRET}@{s3_env.bucket}/logs"
    monkeypatch.delenv("MONITOR_LOGDIR")
    monkeypatch.setattr(sys, "argv", ["dashboard.py", "--logdir", url])
    at = run_entry(DASHBOARD, {"run": "exp1"})
    assert_ok(at)
    dump = page_dump(at)
    assert charts(at) and f"s3://{s3_env.bucket}/logs" in dump
    assert SECRET not in dump and KEY_ID not in dump


def test_an_unreachable_bucket_keeps_the_last_data_and_says_so(s3_env: S3Env, bucket_root: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    proxy = TcpProxy(s3_env.endpoint)
    monkeypatch.setenv("MONITOR_ENDPOINT_URL", proxy.endpoint)
    monkeypatch.setenv("MONITOR_LOGDIR", s3_env.url("logs") + "/")  # another cache key: a store through the proxy
    try:
        at = run_entry(DASHBOARD, {"run": "exp1"})
        assert_ok(at)
        assert charts(at)
        proxy.cut()

        def warned() -> bool:  # the next refresh that asks the store (after its poll interval) notices
            at.run()
            return any("Object store unreachable" in w.value for w in at.sidebar.warning)

        wait_for(warned, timeout=30, interval=0.2, message="the unreachable-store warning")
        assert_ok(at)
        assert charts(at), "what was read stays on the page"
        assert SECRET not in page_dump(at)
        assert all(w.proto.icon.startswith(":material/") for w in at.sidebar.warning)  # no emoji font needed
    finally:
        proxy.close()


def test_empty_bucket_says_how_to_ship_runs(s3_env: S3Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_LOGDIR", s3_env.url("nothing-here"))
    monkeypatch.setattr(sys, "argv", ["dashboard.py"])
    at = run_entry(DASHBOARD)
    assert_ok(at)
    text = texts(at)
    assert "No runs under" in text and "upload=" in text and "sync" in text
    assert "Start the demo training" not in [b.label for b in at.button]


def test_a_missing_fsspec_package_is_an_error_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_LOGDIR", "nosuchproto://bucket/logs")
    monkeypatch.setattr(sys, "argv", ["dashboard.py"])
    at = run_entry(DASHBOARD)
    assert not at.exception
    assert any("Cannot open the log root" in e.value for e in at.error)


def test_a_mistyped_bucket_says_it_does_not_exist(s3_env: S3Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not "No runs yet": the page names the bucket and says it does not exist."""
    url = f"s3://{s3_env.bucket}-typo/logs"
    monkeypatch.setenv("MONITOR_LOGDIR", url)
    monkeypatch.setattr(sys, "argv", ["dashboard.py"])
    for at in (run_entry(DASHBOARD), AppTest.from_function(_runs_app, default_timeout=60).run()):
        assert_ok(at)
        errors = " ".join(str(e.value) for e in at.error)
        assert "does not exist" in errors and f"{s3_env.bucket}-typo".replace("-", "\\-") in errors, errors
        assert "No runs" not in texts(at)


def test_a_prefix_holding_nothing_says_it_may_be_mistyped(s3_env: S3Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_LOGDIR", s3_env.url("lgos"))
    monkeypatch.setattr(sys, "argv", ["dashboard.py"])
    at = run_entry(DASHBOARD)
    assert_ok(at)
    warnings = " ".join(str(w.value) for w in at.warning)
    assert "Nothing is stored under" in warnings and "lgos" in warnings and "typo" in warnings, warnings
    assert not at.error


def test_the_settings_page_of_a_bucket_names_real_paths(bucket_root: str, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Not ``s3:/bucket/logs/.monitor/notify.toml`` (a URL made a Path): the user's own config file."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MONITOR_NOTIFY_CONFIG", raising=False)
    at = run_entry(str(Path(__file__).with_name("settings_app.py")))
    assert_ok(at)
    shown = page_dump(at)
    assert "s3:/" not in shown.replace("s3://", ""), "no URL mangled into a path"
    info = " ".join(str(i.value) for i in at.info)
    assert str(tmp_path / "xdg" / "monitor_cb" / "notify.toml") in info, info
