"""Memory readers and rank detection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from monitor_cb.train.system import device_memory_reader, host_memory_reader, rank_info


def test_host_rss_matches_psutil_and_follows_allocations() -> None:
    read = host_memory_reader()
    before = read()["mem_host_rss"]
    assert before == pytest.approx(psutil.Process().memory_info().rss, rel=0.05)
    block = bytearray(64 << 20)  # touched: 64 MiB more resident memory
    after = read()["mem_host_rss"]
    assert after - before > 48 << 20
    del block


FORK_CHECK = """
import os
from monitor_cb.train.system import host_memory_reader
read = host_memory_reader()
read()  # the parent's /proc/self/statm is now open
rfd, wfd = os.pipe()
pid = os.fork()
if pid == 0:  # child: grow, then report what the reader sees
    block = bytearray(128 << 20)
    os.write(wfd, str(read()["mem_host_rss"]).encode())
    os._exit(0)
os.close(wfd)
child_rss = int(os.read(rfd, 64))
os.waitpid(pid, 0)
print(child_rss - read()["mem_host_rss"])
"""


def test_host_rss_after_fork_reads_the_child() -> None:
    # A fresh single-threaded interpreter: forking this test process (MindSpore threads) could deadlock.
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", FORK_CHECK], cwd=root, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 96 << 20


@pytest.mark.mindspore
def test_device_memory_is_not_reported_on_cpu_and_rank_comes_from_the_environment(monkeypatch) -> None:
    import mindspore as ms

    ms.set_context(device_target="CPU")
    assert device_memory_reader()() == {}
    monkeypatch.setenv("RANK_ID", "3")
    monkeypatch.setenv("RANK_SIZE", "4")
    rank, world_size, device_id = rank_info()
    assert (rank, world_size) == (3, 4) and isinstance(device_id, int)
