"""Every kind of file the reading side opens in a root, planted as a FIFO, a device, a link out of the root,
a huge (sparse) file, or forged content: nothing hangs, nothing is read past its cap or outside the root,
the file is named in a note, and the rest of the root reads as usual."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from monitor_cb.diagnosis.settings import DiagnosisSettings, load_settings_checked
from monitor_cb.ingest import RunStore
from monitor_cb.ingest.colcache import Place
from monitor_cb.rootfile import META_CAP, SETTINGS_CAP, STATE_CAP
from tests.ingest.helpers import line

T = TypeVar("T")
KINDS = ("fifo", "device", "link_out", "huge")
DEADLINE_S = 30.0  # a hang fails here instead of blocking the suite
STEPS = 40


def within_deadline(work: Callable[[], T]) -> T:
    """``work()`` in a thread, which must end within :data:`DEADLINE_S` (a FIFO opened blocking never would)."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), f"still running after {DEADLINE_S} s: hung"
    if "error" in out:
        raise out["error"]
    return out["value"]


def write_run(root: Path, name: str, steps: int = STEPS, meta: bool = True) -> Path:
    run = root / name
    run.mkdir(parents=True, exist_ok=True)
    path = run / "metrics.jsonl"
    path.write_bytes(b"".join(line({"step": s, "t": 1000.0 + s, "loss": 1.0 / s}) for s in range(1, steps + 1)))
    if meta:
        (run / "metrics.meta.json").write_text(json.dumps({"name": name, "status": "finished"}))
    return path


def plant(path: Path, kind: str, cap: int, outside: Path, content: bytes = b"{}") -> None:
    """A hostile file at ``path``: a FIFO, a link to /dev/zero, a link to a real file outside the root
    holding ``content``, or a sparse file one byte over ``cap``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "link_out":
        outside.mkdir(parents=True, exist_ok=True)
        target = outside / path.name
        target.write_bytes(content)
        path.symlink_to(target)
    else:
        with open(path, "wb") as f:
            f.truncate(cap + 1)


def store_of(root: Path) -> RunStore:
    return RunStore(root, cache=[Place(root / ".monitor" / "cache", root)])


def assert_run_reads(store: RunStore, run_id: str, steps: int = STEPS) -> None:
    info = store.run_info(run_id)
    assert (info.n_records, info.first_step, info.last_step) == (steps, 1, steps)
    frame = store.read(run_id).frame
    assert frame["loss"].tolist() == [1.0 / s for s in range(1, steps + 1)]


def assert_noted(store: RunStore, path: Path) -> None:
    notes = store.skipped_files()
    assert any(note.startswith(f"skipped {path}: ") for note in notes), notes


# ----------------------------------------------------------------------------- a run's metadata
@pytest.mark.parametrize("kind", KINDS)
def test_metadata(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "root"
    write_run(root, "good")
    write_run(root, "x")
    meta = root / "x" / "metrics.meta.json"
    plant(meta, kind, META_CAP, tmp_path / "outside", b'{"name": "stolen", "status": "failed"}')
    store = store_of(root)
    runs = within_deadline(store.list_runs)
    assert {r.id for r in runs} == {"good", "x"}
    by_id = {r.id: r for r in runs}
    assert by_id["good"].status == "finished"
    assert by_id["x"].meta == {} and by_id["x"].name == "x"  # nothing of the planted file was used
    assert_noted(store, meta)
    assert_run_reads(store, "x")


def test_metadata_forged_content(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_run(root, "x")
    (root / "x" / "metrics.meta.json").write_bytes(b"[" * 100_000)  # deep nesting, not an object
    store = store_of(root)
    (info,) = within_deadline(store.list_runs)
    assert info.meta == {}
    assert_run_reads(store, "x")


# ----------------------------------------------------------------------------- the summary index
def forged_index(path: Path) -> bytes:
    """An index whose entry for ``path`` has its identity (so it would be used) and claims 987,654 steps."""
    from monitor_cb.ingest.summary_index import FORMAT, file_ident

    ident = file_ident(path)
    assert ident is not None
    entry = {"ident": list(ident), "rank": 0, "n": 987_654, "first_step": 1, "last_step": 987_654}
    entry.update(last_write=ident[3] / 1e9, pending=0, bad_count=0, interval=1.0, partial_count=0)
    return json.dumps({"format": FORMAT, "files": {"good/metrics.jsonl": entry}}).encode()


@pytest.mark.parametrize("kind", KINDS)
def test_summary_index(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "root"
    path = write_run(root, "good")
    index = root / ".monitor" / "cache" / "index.json"
    plant(index, kind, STATE_CAP, tmp_path / "outside", forged_index(path))  # link_out: the case
    store = store_of(root)
    (info,) = within_deadline(store.list_runs)
    assert (info.n_records, info.last_step) == (STEPS, STEPS)
    assert_noted(store, index)


def test_summary_index_forged_in_place(tmp_path: Path) -> None:
    """A regular index.json whose entry keeps the file's identity but claims 987,654 steps is not believed."""
    root = tmp_path / "root"
    write_run(root, "good")
    first = store_of(root)
    first.list_runs()
    first.index.flush(force=True)
    index = root / ".monitor" / "cache" / "index.json"
    index.write_bytes(forged_index(root / "good" / "metrics.jsonl"))
    (info,) = store_of(root).list_runs()
    assert (info.n_records, info.last_step) == (STEPS, STEPS)


# ----------------------------------------------------------------------------- the columnar cache
@pytest.mark.parametrize("kind", KINDS)
def test_cache_file(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "root"
    path = write_run(root, "good")
    cache_file = root / ".monitor" / "cache" / "good" / "metrics.jsonl.arrow"
    cap = 16 * path.stat().st_size + (64 << 20)  # colcache's cap for this file
    plant(cache_file, kind, cap, tmp_path / "outside", b"ARROW1")
    store = store_of(root)
    within_deadline(lambda: assert_run_reads(store, "good"))
    source = next(iter(store._runs["good"].sources.values()))
    assert not source.cache_hit
    assert_noted(store, cache_file)


# ----------------------------------------------------------------------------- diagnosis settings
@pytest.mark.parametrize("kind", KINDS)
def test_diagnosis_settings(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    settings = root / ".monitor" / "diagnosis.json"
    plant(settings, kind, SETTINGS_CAP, tmp_path / "outside", b'{"disabled": ["nan"]}')
    got, problems = within_deadline(lambda: load_settings_checked(root))
    assert got == DiagnosisSettings()  # the defaults: nothing of the planted file
    assert len(problems) == 1 and "diagnosis.json" in problems[0] and "skipped" in problems[0], problems


def test_diagnosis_settings_forged_content(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ".monitor").mkdir(parents=True)
    (root / ".monitor" / "diagnosis.json").write_bytes(b"\xff\xfe not json")
    got, problems = load_settings_checked(root)
    assert got == DiagnosisSettings() and problems


# ----------------------------------------------------------------------------- the metrics file itself
@pytest.mark.parametrize("kind", ("fifo", "device", "link_out"))
def test_metrics_file_planted(tmp_path: Path, kind: str) -> None:
    """A metrics file (a second rank of a good run) that is a FIFO or a link out is never a source."""
    root = tmp_path / "root"
    write_run(root, "good")
    plant(root / "good" / "metrics.rank1.jsonl", kind, 0, tmp_path / "outside", line({"step": 1, "loss": 9.0}))
    store = store_of(root)
    (info,) = within_deadline(store.list_runs)
    assert info.ranks == (0,)
    assert_run_reads(store, "good")
    assert_noted(store, root / "good" / "metrics.rank1.jsonl")


def test_metrics_file_swapped_for_a_fifo_after_listing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path = write_run(root, "good")
    store = store_of(root)
    assert_run_reads(store, "good")
    path.unlink()
    os.mkfifo(path)
    within_deadline(lambda: store.read("good"))
    assert_noted(store, path)


def test_metrics_file_huge_and_sparse(tmp_path: Path) -> None:
    """3 GB of holes: skipped as one over-long line without reading them; records after them are read."""
    root = tmp_path / "root"
    path = write_run(root, "good")
    with open(path, "r+b") as f:
        f.truncate(3 * 1024**3)
    store = store_of(root)
    (info,) = within_deadline(store.list_runs)
    assert (info.n_records, info.bad_lines) == (STEPS, 1)
    with open(path, "ab") as f:
        f.write(b"\n" + line({"step": STEPS + 1, "t": 2000.0, "loss": 0.5}))
    assert within_deadline(lambda: store.run_info("good")).last_step == STEPS + 1


# ----------------------------------------------------------------------------- what the product writes there
def test_writes_never_go_through_planted_temporary_names(tmp_path: Path) -> None:
    """Links planted at the temporary names the writers used to use (``.<name>.<pid>[.<thread>].tmp``) for
    diagnosis.json, the summary index and a cache file: the files are written, the link targets untouched."""
    import threading

    from monitor_cb.diagnosis.settings import save_settings

    root = tmp_path / "root"
    path = write_run(root, "good")
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    hidden, cache = root / ".monitor", root / ".monitor" / "cache"
    (cache / "good").mkdir(parents=True)
    pid, tid = os.getpid(), threading.get_ident()
    for planted in (
        hidden / f".diagnosis.json.{pid}.tmp",
        cache / f".index.json.{pid}.{tid}.tmp",
        cache / "good" / f".metrics.jsonl.arrow.{pid}.{tid}.tmp",
    ):
        planted.symlink_to(victim)
    save_settings(root, DiagnosisSettings())
    store = RunStore(root, cache=[Place(cache, root)])
    store.cache.min_bytes = 1
    store.list_runs()
    store.read("good")
    store.cache.wait()
    store.index.flush(force=True)
    assert victim.read_text() == "untouched"
    assert (hidden / "diagnosis.json").is_file() and (cache / "index.json").is_file()
    assert (cache / "good" / "metrics.jsonl.arrow").is_file(), store.cache.last_error
    assert path.exists()
