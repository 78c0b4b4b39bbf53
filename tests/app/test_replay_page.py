"""AppTests of the replay page: a run from the log root, the step slider and Play, "jump to", uploads."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from monitor_cb.demo.samples import write_sample_runs
from tests.app.helpers import assert_ok, charts, run_entry, texts

ENTRY = str(Path(__file__).with_name("compare_app.py"))
TIMEOUT = 60
DIVERGED = "run02-lr0.001-bs64-seed1"


@pytest.fixture(autouse=True)
def _replay_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_TEST_PAGE", "replay")


@pytest.fixture
def samples(log_root: Path) -> Path:
    write_sample_runs(log_root, n_runs=2, steps=400, seed=0)
    return log_root


def run_app(query: dict[str, Any] | None = None) -> AppTest:
    return run_entry(ENTRY, query, TIMEOUT)


def x_span(fig: dict[str, Any]) -> tuple[float, float]:
    """The smallest and largest x drawn in a figure (plotly sends numpy arrays as base64 typed arrays)."""
    import base64

    import numpy as np

    low, high = math.inf, -math.inf
    for trace in fig["data"]:
        x = trace.get("x")
        if isinstance(x, dict) and "bdata" in x:
            values = np.frombuffer(base64.b64decode(x["bdata"]), dtype=np.dtype(x["dtype"]))
        else:
            values = np.asarray(x or [], dtype=float)
        if values.size:
            low, high = min(low, float(values.min())), max(high, float(values.max()))
    return low, high


def max_x(fig: dict[str, Any]) -> float:
    return x_span(fig)[1]


def upload(at: AppTest, name: str, content: bytes) -> AppTest:
    at.sidebar.radio(key="rp_source").set_value("upload").run()
    at.sidebar.file_uploader(key="rp_upload").upload(name, content, "application/octet-stream")
    return at.run()


def jsonl(records: list[dict[str, Any]], bare_nan: bool = False) -> bytes:
    """Lines as the collector writes them (``"NaN"`` strings) or as plain ``json.dumps`` does (bare ``NaN``)."""
    lines = []
    for record in records:
        if bare_nan:
            lines.append(json.dumps(record))
        else:
            fixed = {k: ("NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}
            lines.append(json.dumps(fixed))
    return ("\n".join(lines) + "\n").encode()


def article_records(n: int = 300, nan_at: int = 250) -> list[dict[str, Any]]:
    out = []
    for step in range(1, n + 1):
        loss = math.nan if step >= nan_at else 2.0 * math.exp(-step / 100) + 0.1
        out.append({"step": step, "loss": loss, "lr": 1e-3, "ts": 1_700_000_000 + step})
    return out


# ----------------------------------------------------------------------------- runs from the log root
def test_no_finished_run_points_to_upload(log_root: Path) -> None:
    at = run_app()
    assert_ok(at)
    assert "Upload a JSONL file instead" in texts(at)


def test_replays_the_chosen_run_up_to_the_slider(samples: Path) -> None:
    at = run_app({"run": DIVERGED})
    assert_ok(at)
    assert at.sidebar.selectbox(key="rp_run").value == DIVERGED
    slider = at.slider(key="rp_cursor")
    assert slider.value == slider.max, "opens at the end of the run"
    slider.set_value(100).run()
    assert_ok(at)
    figs = charts(at)
    assert figs and all(max_x(f) <= 100 for f in figs), "the charts grow only to the chosen step"
    assert figs[0]["layout"]["xaxis"]["range"][1] >= 240, "the x axis keeps the whole run's range"


def test_play_advances_the_cursor_and_pause_stops(samples: Path) -> None:
    at = run_app({"run": DIVERGED})
    at.slider(key="rp_cursor").set_value(50).run()
    at.button(key="rp_play").click().run()
    assert_ok(at)
    assert at.session_state["rp_playing"] is True
    assert at.slider(key="rp_cursor").value > 50, "a play tick moves the cursor on"
    at.button(key="rp_pause").click().run()
    assert_ok(at)
    assert at.session_state["rp_playing"] is False


def test_a_slider_value_sent_before_a_tick_arrived_does_not_move_playback(samples: Path) -> None:
    """Every rerun the browser asks for carries the slider as it last saw it: one asked for as Play was clicked
    carried the end of the run, and playback jumped there and stopped (a browser test saw Pause vanish)."""
    at = run_app({"run": DIVERGED})
    assert_ok(at)
    end = at.slider(key="rp_cursor").max
    at.button(key="rp_play").click().run()  # from the end: playback starts again from the first step
    assert at.session_state["rp_playing"] is True
    started = at.slider(key="rp_cursor").value
    assert started < end and at.slider(key="rp_cursor").disabled, "playback owns the slider"
    at.session_state["rp_cursor"] = end  # the stale value the browser sends (AppTest cannot move a disabled slider)
    at.run()
    assert_ok(at)
    assert at.session_state["rp_playing"] is True, "playback stopped"
    assert started < at.slider(key="rp_cursor").value < end, "playback moved on from its own position"
    ticked = at.slider(key="rp_cursor").value
    at.button(key="rp_pause").click().run()
    assert at.session_state["rp_playing"] is False and not at.slider(key="rp_cursor").disabled
    assert at.slider(key="rp_cursor").value == ticked, "paused where playback was"
    at.slider(key="rp_cursor").set_value(40).run()  # paused, the slider is the user's again
    assert at.slider(key="rp_cursor").value == 40
    figs = charts(at)
    assert figs and all(max_x(f) <= 40 for f in figs)


def test_jump_to_first_nan_opens_a_full_resolution_window(samples: Path) -> None:
    at = run_app({"run": DIVERGED})
    jump = at.selectbox(key="rp_jump")
    labels = [str(o) for o in jump.options]  # labels[0] is the whole run (value -1), labels[k] is item k - 1
    k = next(i for i, o in enumerate(labels) if "nan: loss became NaN" in o)
    assert sum("nan:" in o for o in labels) == 1, "the NaN is one entry, worded as its finding"
    assert len(set(labels)) == len(labels), "no entry twice"
    step = int(labels[k].split("·")[0].replace("step", "").replace(",", ""))
    jump.set_value(k - 1).run()
    assert_ok(at)
    assert f"**Step {step:,}**" in texts(at)
    low, high = x_span(charts(at)[0])
    assert high == step and step - 60 <= low <= step - 50, "±50 logged steps around it (the run ends there)"
    at.button(key="rp_back").click().run()
    assert_ok(at)
    assert at.slider(key="rp_cursor").value == at.slider(key="rp_cursor").max


# ----------------------------------------------------------------------------- uploads
@pytest.mark.parametrize("bare_nan", [False, True], ids=["collector-NaN-strings", "json.dumps-bare-NaN"])
def test_upload_a_good_file(log_root: Path, bare_nan: bool) -> None:
    at = upload(run_app(), "article.jsonl", jsonl(article_records(), bare_nan=bare_nan))
    assert_ok(at)
    assert not at.error, [e.value for e in at.error]
    assert charts(at), "the uploaded run is drawn"
    labels = [str(o) for o in at.selectbox(key="rp_jump").options]
    assert any("250" in label and "nan: loss became NaN" in label for label in labels)
    assert not any(p.name != "logs" for p in log_root.parent.iterdir() if p.is_file()), "nothing written"
    assert list(log_root.iterdir()) == [], "the upload is never written under the log root"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("model.ckpt", b"\x00\x01\x02binary\x00" * 100, "binary"),
        ("run.jsonl.gz", b"\x1f\x8b\x08\x00" + b"x" * 100, "gzip"),
        ("notes.txt", b"hello\nthis is not json\n" * 20, "No JSON object lines"),
        ("empty.jsonl", b"", "empty"),
    ],
)
def test_upload_a_corrupt_file_says_why(log_root: Path, name: str, content: bytes, message: str) -> None:
    at = upload(run_app(), name, content)
    assert_ok(at)
    errors = " ".join(e.value for e in at.error)
    assert message in errors
    assert not charts(at)


def test_upload_an_oversized_file_is_refused(log_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_UPLOAD_MAX_MB", "0.01")  # 10 KiB
    at = upload(run_app(), "big.jsonl", jsonl(article_records(n=2000)))
    assert_ok(at)
    errors = " ".join(e.value for e in at.error)
    assert "limited to" in errors
    assert not charts(at)
