"""Telemetry sampler: sources, failures that never reach training, npu-smi parsing."""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from monitor_cb.train.telemetry import TelemetrySampler, host_source, npu_smi_source, nvml_source, parse_npu_smi_usages

NPU_SMI_USAGES = """\
        Memory Capacity(MB)            : 15039
        Memory Usage Rate(%)           : 6
        Hugepages Total(page)          : 0
        Hugepages Usage Rate(%)        : 0
        HBM Capacity(MB)               : 65536
        HBM Usage Rate(%)              : 37
        Aicore Usage Rate(%)           : 88
        Aicpu Usage Rate(%)            : 0
        Ctrlcpu Usage Rate(%)          : 3
        HBM Bandwidth Usage Rate(%)    : 12
"""


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_parse_npu_smi_usages() -> None:
    sample = parse_npu_smi_usages(NPU_SMI_USAGES)
    assert sample == {
        "npu_ddr_util": 6.0,
        "npu_mem_total_mb": 65536.0,
        "npu_mem_util": 37.0,
        "npu_util": 88.0,
        "npu_aicpu_util": 0.0,
        "npu_mem_bw_util": 12.0,
    }
    assert parse_npu_smi_usages("Error: no device\n") == {}


def test_host_source_reports_plausible_values() -> None:
    sample = host_source()()
    assert 0 <= sample["sys_cpu_percent"] <= 100 * os.cpu_count()
    assert 0 < sample["sys_mem_percent"] <= 100
    assert sample["mem_host_rss"] > 10 * 2**20


def test_sampler_emits_with_the_current_step() -> None:
    got: list[tuple[int | None, dict]] = []
    step = {"value": 41}
    sampler = TelemetrySampler(lambda s, sample: got.append((s, sample)), lambda: step["value"], interval=0.02)
    sampler._sources = [host_source()]
    sampler.start()
    assert wait_for(lambda: len(got) >= 2)
    step["value"] = 99
    assert wait_for(lambda: got[-1][0] == 99)
    sampler.stop()
    assert all("mem_host_rss" in sample for _, sample in got)


def test_failing_source_is_dropped_and_the_others_go_on() -> None:
    def broken() -> dict:
        raise OSError("tool crashed")

    got: list[dict] = []
    sampler = TelemetrySampler(lambda s, sample: got.append(sample), lambda: 1, sources=[broken, lambda: {"x": 1.0}])
    first = sampler.sample_once()
    second = sampler.sample_once()
    assert first == second == {"x": 1.0}
    assert len(sampler.failed_sources) == 1 and "tool crashed" in sampler.failed_sources[0]


def test_hanging_source_never_blocks_the_training_thread() -> None:
    release = threading.Event()

    def hangs() -> dict:
        release.wait(30)
        return {}

    sampler = TelemetrySampler(lambda s, sample: None, lambda: 1, sources=[hangs], interval=0.01).start()
    started = time.monotonic()
    work = sum(i * i for i in range(200_000))  # the "training" thread keeps running
    sampler.stop(timeout=0.2)
    assert work > 0 and time.monotonic() - started < 5
    release.set()


def fake_tool(tmp_path: Path, body: str) -> Path:
    tool = tmp_path / "npu-smi"
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return tool


def test_npu_smi_source_runs_the_tool(tmp_path: Path) -> None:
    data = tmp_path / "usages.txt"
    data.write_text(NPU_SMI_USAGES)
    tool = fake_tool(tmp_path, f'[ "$5" = "3" ] && cat {data}')
    sample = npu_smi_source(3, executable=str(tool))()
    assert sample["npu_util"] == 88.0 and sample["npu_mem_util"] == 37.0


def test_npu_smi_that_hangs_is_cut_off_by_the_timeout(tmp_path: Path) -> None:
    tool = fake_tool(tmp_path, "exec sleep 30")
    sampler = TelemetrySampler(lambda s, sample: None, lambda: 1, sources=[npu_smi_source(0, 0.2, str(tool))])
    started = time.monotonic()
    assert sampler.sample_once() == {}
    assert time.monotonic() - started < 5 and "Timeout" in sampler.failed_sources[0]


def test_missing_npu_smi_is_reported_at_construction() -> None:
    with pytest.raises(FileNotFoundError):
        npu_smi_source(0, executable="definitely-not-npu-smi")


def test_nvml_source_reads_utilisation_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in pynvml module: this machine has no GPU, the mapping is what is tested."""
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda index: f"gpu{index}",
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(gpu=73, memory=41),
        nvmlDeviceGetMemoryInfo=lambda handle: types.SimpleNamespace(used=5 * 2**30, total=80 * 2**30),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert nvml_source(1)() == {
        "gpu_util": 73.0,
        "gpu_mem_util": 41.0,
        "gpu_mem_used": float(5 * 2**30),
        "gpu_mem_total": float(80 * 2**30),
    }
