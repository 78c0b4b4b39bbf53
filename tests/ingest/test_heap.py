"""release_free_memory: the pages a big computation freed leave the process (glibc), or it says it cannot."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from monitor_cb.ingest import heap
from monitor_cb.ingest.viewer_work import Background

# In a fresh process: free 160 MB of numpy arrays that glibc served from its heap (after one freed
# 8 MB block raised its mmap threshold), each with a small block kept above it so that free() cannot trim.
CHILD = r"""
import json
import numpy as np
from monitor_cb.ingest.heap import release_free_memory

def anon_mb():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024

block = np.ones(1 << 20)  # 8 MB: mmapped; freeing it raises the threshold
del block
arrays, keep = [], []
for _ in range(40):  # 40 x 4 MB from the heap now, each with a small block kept above it
    arrays.append(np.ones(1 << 19))
    keep.append(np.ones(1 << 13))
base = anon_mb()
del arrays
freed = anon_mb()
ok = release_free_memory()
print(json.dumps({"base": base, "freed": freed, "trimmed": anon_mb(), "ok": ok}))
"""


def test_freed_heap_pages_are_given_back() -> None:
    if not sys.platform.startswith("linux") or heap._find_trim() is False:
        pytest.skip("malloc_trim is glibc's")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(out.stdout)
    assert got["ok"] is True
    assert got["freed"] > got["base"] - 40, got  # free() alone kept (most of) the 160 MB
    assert got["trimmed"] < got["freed"] - 120, got  # the trim gave them back


def test_unsupported_platforms_say_so(monkeypatch) -> None:
    monkeypatch.setattr(heap, "_trim", False)
    assert heap.release_free_memory() is False


def test_the_background_worker_trims_after_each_computation() -> None:
    if heap._find_trim() is False:
        pytest.skip("malloc_trim is glibc's")
    before = heap.released
    work = Background()
    work.submit("run", 1, lambda: sum(range(1000)))
    assert work.wait_idle(10)
    assert work.result("run").value == 499500
    assert heap.released == before + 1
