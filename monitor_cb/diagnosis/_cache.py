"""A memo that lives for one :func:`~monitor_cb.diagnosis.engine.diagnose` call.

Several detectors judge the same series against its own noise (the loss for spikes, divergence and
grad-norm follow-ups; the grad norm for explosions and for corroborating loss spikes). Computing a
series' trend and noise costs a few partitions of the data (~0.2 s on a 1M-point series), so inside
one ``diagnose`` call it is computed once. Outside one (a detector called on its own, as tests do)
nothing is kept, so a frame changed between calls is never judged on stale numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")
_MEMO: ContextVar[dict[Hashable, Any] | None] = ContextVar("diagnosis_memo", default=None)


@contextmanager
def diagnosis_memo() -> Iterator[None]:
    """Keep computed series for the duration of the ``with`` block (one diagnose call)."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def memo(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, remembered under ``key`` while a :func:`diagnosis_memo` block is open."""
    store = _MEMO.get()
    if store is None:
        return compute()
    if key not in store:
        store[key] = compute()
    return store[key]


def frame_memo(frame: Any, key: Hashable, compute: Callable[[], T]) -> T:
    """:func:`memo` for a value computed from ``frame``: keyed by the frame's identity, which the memo keeps
    alive (so a frame freed during the call can never hand its id, and its numbers, to another one)."""
    pinned = memo(("frame", id(frame), key), lambda: (frame, compute()))
    if pinned[0] is not frame:  # pragma: no cover - cannot happen while the frame is pinned
        return compute()
    return pinned[1]
