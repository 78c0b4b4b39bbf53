"""What the pages write is plain and inert: no emoji (many machines have no emoji font), and no
user-controlled string (file names, run names, paths, reasons, query parameters) rendered as
Markdown: it never becomes bold text or a link.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToJson
from streamlit.testing.v1 import AppTest

from monitor_cb.demo.samples import write_sample_runs
from tests.app.conftest import DASHBOARD, write_run
from tests.app.helpers import assert_ok, run_entry

COMPARE_APP = str(Path(__file__).with_name("compare_app.py"))
SETTINGS_APP = str(Path(__file__).with_name("settings_app.py"))
HOSTILE = "**bold**[click](javascript:alert(1))"
# Emoji blocks: pictographs, symbols, dingbats, misc technical (hourglass), variation selector 16.
EMOJI = re.compile("[\U0001f000-\U0001faff\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\ufe0f]")


def protos(at: AppTest) -> Iterator[Any]:
    """Every element's protobuf message on the page, the sidebar included."""
    stack: list[Any] = [at._tree]
    while stack:
        node = stack.pop()
        proto = getattr(node, "proto", None)
        if proto is not None:
            yield proto
        stack.extend(getattr(node, "children", {}).values())


def shown(at: AppTest) -> str:
    """Everything the page sends the browser as text (labels, options, values, icons, tooltips)."""
    return "\n".join(MessageToJson(p, ensure_ascii=False) for p in protos(at))


def markdown_texts(at: AppTest) -> list[str]:
    """Every string the browser renders as Markdown: captions, boxes, toasts, markdown."""
    parts = [*at.markdown, *at.caption, *at.info, *at.warning, *at.error, *at.success, *at.toast]
    parts += [*at.sidebar.markdown, *at.sidebar.caption]
    return [str(p.value) for p in parts]


URL = "http://127.0.0.1:1/x"
# What remark-gfm's autolink-literal transform links in text once the escapes are resolved
# (mdast-util-gfm-autolink-literal): a URL with its scheme, ``www.``, an e-mail address.
AUTOLINK = re.compile(r"(?i)(https?://|www\.)[-.\w]|[-.\w+]@[-\w]+\.[-\w]")


def inert(text: str) -> bool:
    """No unescaped ``**``, no unescaped ``](`` and nothing GFM autolinks, outside code spans (shown literally)."""
    outside = re.sub(r"`[^`]*`", "", text)
    return not re.search(r"(?<!\\)\*\*", outside) and not re.search(r"(?<!\\)\]\(", outside) and linkless(text)


def linkless(text: str) -> bool:
    """Nothing GFM would autolink in the text the browser gets once escapes are resolved (code spans aside)."""
    return not AUTOLINK.search(re.sub(r"\\(.)", r"\1", re.sub(r"`[^`]*`", "", text)))


def test_inert_tells_markdown_from_escaped_text() -> None:
    from monitor_cb.views.escape import escape_code, escape_markdown

    assert not inert(HOSTILE) and not inert(f"Cannot replay {HOSTILE!r}")
    assert inert(escape_markdown(HOSTILE)) and inert(f"run `{escape_code(HOSTILE)}` is gone")
    for linked in (URL, "see WWW.example.com", "mail ana@example.com", "https\\://evil\\.example"):
        assert not inert(linked), linked
        assert inert(escape_markdown(linked)), escape_markdown(linked)


# ----------------------------------------------------------------------------- no emoji
def test_no_emoji_on_any_page(log_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_sample_runs(log_root, n_runs=2, steps=300, seed=0)  # the second one diverges: findings, a reason
    write_run(log_root, "nan-run", steps=150, nan_from=120, close="failed")
    with (log_root / "nan-run" / "metrics.jsonl").open("a") as f:
        f.write('{"step": 151, "loss": oops\n{"step": 152}\n')  # corrupt lines: the warning box
    pages: dict[str, AppTest] = {
        "live": run_entry(DASHBOARD, {"run": "nan-run"}),
        "live-diverged": run_entry(DASHBOARD, {"run": "run02-lr0.001-bs64-seed1"}),
        "compare": run_entry(COMPARE_APP, {"runs": ["nan-run", "run02-lr0.001-bs64-seed1"]}),
        "settings": run_entry(SETTINGS_APP),
    }
    monkeypatch.setenv("MONITOR_TEST_PAGE", "replay")
    pages["replay"] = run_entry(COMPARE_APP, {"run": "nan-run"})
    pages["runs"] = AppTest.from_function(_runs_page, default_timeout=60).run()
    for name, at in pages.items():
        assert_ok(at)
        found = sorted(set(EMOJI.findall(shown(at))))
        assert not found, f"{name} page shows emoji {found}"
    assert any("error" in str(c.value) for c in pages["live"].sidebar.caption), "the findings badge is drawn"
    assert any(w.proto.icon == ":material/warning:" for w in pages["live"].warning), "corrupt lines: a font icon"
    statuses = set(pages["runs"].dataframe[0].value["status"])
    assert statuses <= {"running", "finished", "failed", "stopped", "stalled", "crashed"}, statuses


def test_no_emoji_on_the_empty_root(log_root: Path) -> None:
    at = run_entry(DASHBOARD)
    assert_ok(at)
    assert not EMOJI.findall(shown(at))


def _runs_page() -> None:
    from pages.runs_page import runs_page

    runs_page()


# ----------------------------------------------------------------------------- user strings stay text
def test_a_hostile_upload_name_is_shown_as_text(log_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_TEST_PAGE", "replay")
    at = run_entry(COMPARE_APP)
    at.sidebar.radio(key="rp_source").set_value("upload").run()
    at.sidebar.file_uploader(key="rp_upload").upload(f"{HOSTILE}.jsonl", b"not json\n" * 5, "text/plain")
    at.run()
    assert_ok(at)
    errors = [str(e.value) for e in at.error]
    assert errors and "click" in errors[0], errors
    assert all(inert(e) for e in errors), errors


def test_hostile_run_name_reason_and_query_are_shown_as_text(log_root: Path) -> None:
    writer = write_run(log_root, HOSTILE, steps=60, close=None)
    writer.close("failed", f"{HOSTILE} happened")
    meta_path = log_root / HOSTILE / "metrics.meta.json"
    meta = json.loads(meta_path.read_text())
    meta["name"] = f"<b>{HOSTILE}</b>"
    meta_path.write_text(json.dumps(meta))
    at = run_entry(DASHBOARD, {"run": HOSTILE})
    assert_ok(at)
    texts = markdown_texts(at)
    assert any("happened" in t for t in at_errors(at)), texts  # the reason box
    assert any("records" in t for t in texts), texts  # the run summary in the sidebar
    assert all(inert(t) for t in texts), [t for t in texts if not inert(t)]

    gone = run_entry(DASHBOARD, {"run": f"{HOSTILE}-gone"})  # a link to a run that is not there
    assert_ok(gone)
    assert any("no longer under the log root" in t for t in markdown_texts(gone))
    assert all(inert(t) for t in markdown_texts(gone))


def at_errors(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.error]


def test_a_url_in_a_run_name_or_an_upload_name_is_no_link(log_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose metadata ``name`` holds a URL, on Live and Replay, and an uploaded file named with one:
    every caption and box keeps it as text (GFM would link ``http://…`` even when escaped)."""
    writer = write_run(log_root, "urlrun", steps=60, close=None)
    writer.close("failed", f"see {URL} now")
    meta_path = log_root / "urlrun" / "metrics.meta.json"
    meta = json.loads(meta_path.read_text())
    meta["name"] = f"run {URL} by ana@example.com"
    meta_path.write_text(json.dumps(meta))
    live = run_entry(DASHBOARD, {"run": "urlrun"})
    assert_ok(live)
    texts = markdown_texts(live)
    assert any("127" in t for t in texts), texts
    assert all(inert(t) for t in texts), [t for t in texts if not inert(t)]

    monkeypatch.setenv("MONITOR_TEST_PAGE", "replay")
    replay = run_entry(COMPARE_APP, {"run": "urlrun"})
    assert_ok(replay)
    texts = markdown_texts(replay)
    assert any("127" in t and "by ana" in t for t in texts), texts  # the header caption names the run
    assert all(linkless(t) for t in texts), [t for t in texts if not linkless(t)]

    replay.sidebar.radio(key="rp_source").set_value("upload").run()
    lines = b"".join(b'{"step": %d, "loss": 1.0}\n' % s for s in range(1, 40))
    replay.sidebar.file_uploader(key="rp_upload").upload(f"a {URL} b.jsonl", lines, "text/plain")
    replay.run()
    assert_ok(replay)
    texts = markdown_texts(replay)
    assert any("127" in t for t in texts), texts
    assert all(linkless(t) for t in texts), [t for t in texts if not linkless(t)]
