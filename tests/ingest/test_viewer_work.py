"""Shared results: one computation per key for every viewer; background work coalesced per name."""

from __future__ import annotations

import threading

import pytest

from monitor_cb.ingest.viewer_work import Background, SharedResults


def test_many_sessions_asking_at_once_compute_once() -> None:
    shared = SharedResults()
    started, release = threading.Event(), threading.Event()
    calls = []

    def compute() -> str:
        calls.append(1)
        started.set()
        release.wait(10)
        return "figures"

    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(shared.get(("run", 1), compute))) for _ in range(20)]
    for thread in threads:
        thread.start()
    assert started.wait(10)
    release.set()
    for thread in threads:
        thread.join(10)
    assert results == ["figures"] * 20 and len(calls) == 1 and shared.computed == 1
    assert shared.get(("run", 1), lambda: "again") == "figures"  # stored: no work


def test_bounded_and_a_failure_is_retried() -> None:
    shared = SharedResults(max_entries=3)
    for version in range(5):
        shared.get(("run", version), lambda v=version: v)
    assert len(shared) == 3 and shared.peek(("run", 0)) is None and shared.peek(("run", 4)) == 4
    with pytest.raises(ValueError):
        shared.get("bad", lambda: (_ for _ in ()).throw(ValueError("boom")))
    assert shared.get("bad", lambda: "ok") == "ok"


def test_a_result_kept_under_a_second_key_is_found_there_and_bounded() -> None:
    shared = SharedResults(max_entries=2)
    value = shared.get("first", lambda: object())
    shared.put("second", value)
    assert shared.get("second", lambda: "rebuilt") is value and shared.computed == 1
    shared.put("third", 3)
    assert len(shared) == 2 and shared.peek("first") is None


def test_background_computes_the_newest_version_and_never_blocks() -> None:
    background = Background()
    gate, running = threading.Event(), threading.Event()
    ran: list[int] = []

    def job(version: int):
        def compute() -> int:
            if version == 0:
                running.set()
                gate.wait(10)  # the first one is slow: the others queue behind it
            ran.append(version)
            return version * 10

        return compute

    background.submit("findings", 0, job(0))
    assert running.wait(10)
    for version in range(6):
        background.submit("findings", version, job(version))
        background.submit("findings", version, job(version))  # the same again: nothing new
    assert background.result("findings") is None and background.busy("findings")
    gate.set()
    assert background.wait_idle(10)
    assert ran == [0, 5]  # versions 1-4 were replaced by newer ones before they ran
    done = background.result("findings")
    assert done is not None and (done.key, done.value) == (5, 50)
    background.submit("findings", 5, job(5))
    assert background.wait_idle(10) and ran == [0, 5]  # already computed for that key


def test_a_failing_job_is_reported_and_the_worker_goes_on() -> None:
    background = Background()
    background.submit("a", 1, lambda: 1 / 0)
    background.submit("b", 1, lambda: "fine")
    assert background.wait_idle(10)
    assert background.result("a") is None and background.result("b").value == "fine"  # type: ignore[union-attr]
    assert "ZeroDivisionError" in background.errors[0]
