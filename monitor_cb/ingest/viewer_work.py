"""Work on a run's data done once for every viewer, and slow work done off the request path.

Thirty people watching one run at a 1 s refresh ask thirty times a second for the same figures of
the same data version. :class:`SharedResults` is a process-wide, bounded map from a key (run, data
version, settings) to a result: the first session to ask computes it, sessions asking meanwhile
wait for that computation instead of starting their own, and everyone else gets the stored value.

Diagnosis of a long run takes seconds; a refresh must not wait for it. :class:`Background` is one
worker thread per store: a page submits "findings of run R at version V" and reads the latest
result there is (for V or an earlier version) without waiting; submissions for a run coalesce, so
a burst of refreshes costs one computation of the newest version.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from monitor_cb.ingest.heap import release_free_memory

T = TypeVar("T")


class SharedResults:
    """Results by key, each computed once however many threads ask; the least recently used go first.

    Args:
        max_entries: results kept (figures of a 1M-step run are about 100 kB each).
    """

    def __init__(self, max_entries: int = 64) -> None:
        self.max_entries = max_entries
        self.computed = 0  # computations run (for tests and benchmarks)
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._running: dict[Hashable, threading.Event] = {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result for ``key``: stored, or computed now by this thread (others asking meanwhile wait for it)."""
        while True:
            with self._lock:
                if key in self._values:
                    self._values.move_to_end(key)
                    return self._values[key]  # type: ignore[no-any-return]
                running = self._running.get(key)
                if running is None:
                    running = self._running[key] = threading.Event()
                    break
            running.wait()  # another session is computing it; then take the stored value (or compute on failure)
        try:
            value = compute()
            with self._lock:
                self._keep(key, value)
                self.computed += 1
            return value
        finally:
            with self._lock:
                self._running.pop(key, None)
            running.set()

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` for ``key`` too (the same result reached by another key)."""
        with self._lock:
            self._keep(key, value)

    def _keep(self, key: Hashable, value: Any) -> None:  # the lock held
        self._values[key] = value
        self._values.move_to_end(key)
        while len(self._values) > self.max_entries:
            self._values.popitem(last=False)

    def peek(self, key: Hashable) -> Any:
        with self._lock:
            return self._values.get(key)

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True)
class Done(Generic[T]):
    """A background result and the key (data version, settings) it was computed for."""

    key: Hashable
    value: T


class Background:
    """One daemon thread running submitted computations, newest submission per name first-come.

    ``submit(name, key, compute)`` is cheap and never waits: when ``key`` is already computed or
    queued for ``name`` nothing happens; otherwise it replaces whatever was queued for ``name``
    (an older version nobody needs any more). ``result(name)`` gives the latest :class:`Done`.
    """

    def __init__(self) -> None:
        self.computed = 0
        self.errors: list[str] = []
        self._lock = threading.Condition()
        self._queued: OrderedDict[Hashable, tuple[Hashable, Callable[[], Any]]] = OrderedDict()
        self._done: dict[Hashable, Done[Any]] = {}
        self._running: tuple[Hashable, Hashable] | None = None
        self._thread: threading.Thread | None = None

    def submit(self, name: Hashable, key: Hashable, compute: Callable[[], Any]) -> None:
        with self._lock:
            done = self._done.get(name)
            if (done is not None and done.key == key) or self._running == (name, key):
                return
            queued = self._queued.get(name)
            if queued is not None and queued[0] == key:
                return
            self._queued[name] = (key, compute)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="monitor-cb-background", daemon=True)
                self._thread.start()
            self._lock.notify()

    def result(self, name: Hashable) -> Done[Any] | None:
        with self._lock:
            return self._done.get(name)

    def busy(self, name: Hashable) -> bool:
        """Whether something for ``name`` is queued or running."""
        with self._lock:
            return name in self._queued or (self._running is not None and self._running[0] == name)

    def wait(self, name: Hashable, timeout: float) -> bool:
        """Block until nothing for ``name`` is queued or running; False on timeout."""
        with self._lock:
            return self._lock.wait_for(
                lambda: name not in self._queued and (self._running is None or self._running[0] != name), timeout
            )

    def wait_idle(self, timeout: float) -> bool:
        """Block until nothing is queued or running (tests, benchmarks); False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._queued and self._running is None, timeout)

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._lock.wait_for(lambda: bool(self._queued), timeout=60.0):
                    self._thread = None
                    return  # idle for a minute: the thread ends, the next submission starts one
                name, (key, compute) = self._queued.popitem(last=False)
                self._running = (name, key)
            try:
                value = compute()
            except Exception as exc:  # noqa: BLE001 - a failed computation must not stop the others
                self.errors.append(f"{name!r}: {type(exc).__name__}: {str(exc)[:200]}")
                value = None
                done = None
            else:
                done = Done(key, value)
            release_free_memory()  # what a diagnosis freed (hundreds of MB on a long run) leaves the process
            with self._lock:
                if done is not None:
                    self._done[name] = done
                    self.computed += 1
                self._running = None
                self._lock.notify_all()
