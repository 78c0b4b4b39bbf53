"""Device and host memory, each read in well under a millisecond.

MindSpore's ``mindspore.runtime.memory_*`` functions report 0 on CPU, so device
memory is only logged on Ascend/GPU; host memory is the process's resident set
size (``/proc/self/statm``, else psutil).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from monitor_cb.train.extract import Metrics


def device_memory_reader() -> Callable[[], Metrics]:
    """A function returning ``{"mem_device", "mem_device_peak"}`` in bytes, or ``{}`` where not reported."""
    try:
        import mindspore as ms
        from mindspore import runtime

        if ms.get_context("device_target") == "CPU":
            return dict
        allocated, peak = runtime.memory_allocated, runtime.max_memory_allocated
    except Exception:  # noqa: BLE001 - an old MindSpore without mindspore.runtime
        return dict

    def read() -> Metrics:
        try:
            return {"mem_device": int(allocated()), "mem_device_peak": int(peak())}
        except Exception:  # noqa: BLE001 - memory stats are optional
            return {}

    return read


_statm: tuple[int, int] | None = None  # (pid, fd): one open /proc/self/statm per process


def _statm_fd() -> int:
    """The process's open ``/proc/self/statm`` (reopened after a fork)."""
    global _statm
    pid = os.getpid()
    if _statm is None or _statm[0] != pid:
        _statm = (pid, os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC))
    return _statm[1]


def host_memory_reader() -> Callable[[], Metrics]:
    """A function returning ``{"mem_host_rss": bytes}``, or ``{}`` where neither /proc nor psutil answers.

    On Linux it keeps ``/proc/self/statm`` open and re-reads it with one ``pread``
    (a few microseconds; psutil opens the file each time, ~100 us on a busy host).
    """
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        int(os.pread(_statm_fd(), 128, 0).split()[1])
    except (OSError, ValueError, IndexError, AttributeError):
        return _psutil_rss_reader()

    def read() -> Metrics:
        try:
            return {"mem_host_rss": int(os.pread(_statm_fd(), 128, 0).split()[1]) * page}
        except (OSError, ValueError, IndexError):
            return {}

    return read


def _psutil_rss_reader() -> Callable[[], Metrics]:
    try:
        import psutil

        process: Any = psutil.Process(os.getpid())
    except Exception:  # noqa: BLE001 - psutil is optional
        return dict

    def read() -> Metrics:
        try:
            return {"mem_host_rss": int(process.memory_info().rss)}
        except Exception:  # noqa: BLE001
            return {}

    return read


def rank_info() -> tuple[int, int, int | None]:
    """``(rank, world_size, device_id)`` without crashing when not distributed.

    MindSpore's ``get_rank``/``get_group_size`` fall back to ``RANK_ID``/``RANK_SIZE``
    before ``init()``; any error falls back to the launcher environment.
    """
    from monitor_cb.train.run_meta import detect_rank

    rank, size = detect_rank()
    device_id = None
    try:
        import mindspore as ms
        from mindspore.communication import get_group_size, get_rank

        rank, size = int(get_rank()), int(get_group_size())
    except Exception:  # noqa: BLE001 - not distributed, or an older API
        pass
    try:
        device_id = int(ms.get_context("device_id"))
    except Exception:  # noqa: BLE001
        device_id = None
    return rank, max(size, 1), device_id
