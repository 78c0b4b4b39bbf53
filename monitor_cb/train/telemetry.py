"""Hardware telemetry sampled off the training thread, about once a second.

Sources, each optional and each disabled after its first failure:

* host: system CPU %, system memory %, this process's RSS and CPU % (psutil);
* MindSpore device memory (``mindspore.runtime.memory_*``; skipped where it reports 0, as on CPU);
* NVIDIA GPUs through NVML (``nvidia-ml-py``), when importable;
* Ascend NPUs through ``npu-smi info -t usages`` (parsed), when the tool is on PATH.

Each sample is handed to ``emit`` with the training step it is closest to, so it lines up with
step time on the same x axis. A source that hangs only stalls this sampler's thread; a subprocess
is bounded by a timeout.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable

Sample = dict[str, float]

# Every key a sample can hold: a record made only of these (plus step/t/rank/seg) is a telemetry sample.
TELEMETRY_KEYS = frozenset(
    {
        "sys_cpu_percent",
        "sys_mem_percent",
        "proc_cpu_percent",
        "mem_host_rss",
        "mem_device",
        "mem_device_peak",
        "mem_device_reserved",
        "gpu_util",
        "gpu_mem_util",
        "gpu_mem_used",
        "gpu_mem_total",
        "npu_util",
        "npu_mem_util",
        "npu_mem_total_mb",
        "npu_ddr_util",
        "npu_aicpu_util",
        "npu_mem_bw_util",
    }
)
Source = Callable[[], Sample]

_NPU_KEYS = {
    "aicore usage rate(%)": "npu_util",
    "hbm usage rate(%)": "npu_mem_util",
    "hbm capacity(mb)": "npu_mem_total_mb",
    "memory usage rate(%)": "npu_ddr_util",
    "aicpu usage rate(%)": "npu_aicpu_util",
    "hbm bandwidth usage rate(%)": "npu_mem_bw_util",
}
_KEY_VALUE = re.compile(r"^\s*([^:]+?)\s*:\s*([-+0-9.eE]+)\s*$")


def parse_npu_smi_usages(text: str) -> Sample:
    """Parse ``npu-smi info -t usages -i ID`` output ("Key : value" lines) into metric names."""
    sample: Sample = {}
    for line in text.splitlines():
        match = _KEY_VALUE.match(line)
        if not match:
            continue
        name = _NPU_KEYS.get(match.group(1).strip().lower())
        if name:
            with contextlib.suppress(ValueError):
                sample[name] = float(match.group(2))
    return sample


def host_source() -> Source:
    """System and process CPU/memory from psutil."""
    import psutil

    process = psutil.Process()
    psutil.cpu_percent(None)  # the first call primes the counters and returns 0
    process.cpu_percent(None)

    def sample() -> Sample:
        return {
            "sys_cpu_percent": psutil.cpu_percent(None),
            "sys_mem_percent": psutil.virtual_memory().percent,
            "proc_cpu_percent": process.cpu_percent(None),
            "mem_host_rss": float(process.memory_info().rss),
        }

    return sample


def mindspore_memory_source() -> Source:
    """Device memory from MindSpore's runtime API; raises where it only reports zeros (CPU)."""
    from mindspore import runtime

    def sample() -> Sample:
        allocated = float(runtime.memory_allocated())
        peak = float(runtime.max_memory_allocated())
        reserved = float(runtime.memory_reserved())
        if allocated == peak == reserved == 0.0:
            raise RuntimeError("MindSpore reports no device memory here")
        return {"mem_device": allocated, "mem_device_peak": peak, "mem_device_reserved": reserved}

    return sample


def nvml_source(device_index: int) -> Source:
    """GPU utilisation and memory of one device through NVML."""
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)

    def sample() -> Sample:
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return {
            "gpu_util": float(util.gpu),
            "gpu_mem_util": float(util.memory),
            "gpu_mem_used": float(memory.used),
            "gpu_mem_total": float(memory.total),
        }

    return sample


def npu_smi_source(device_id: int, timeout: float = 2.0, executable: str = "npu-smi") -> Source:
    """Ascend NPU utilisation and HBM use from ``npu-smi``, bounded by ``timeout`` seconds."""
    path = shutil.which(executable)
    if path is None:
        raise FileNotFoundError(f"{executable} not on PATH")

    def sample() -> Sample:
        result = subprocess.run(
            [path, "info", "-t", "usages", "-i", str(device_id)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        parsed = parse_npu_smi_usages(result.stdout)
        if not parsed:
            raise ValueError("npu-smi printed nothing recognisable")
        return parsed

    return sample


def default_sources(device_id: int | None = None) -> list[Source]:
    """Every source that can start here; the absent ones are skipped silently."""
    if device_id is None:
        device_id = int(os.environ.get("DEVICE_ID", os.environ.get("LOCAL_RANK", "0")) or 0)
    factories: list[Callable[[], Source]] = [
        host_source,
        mindspore_memory_source,
        lambda: nvml_source(device_id),
        lambda: npu_smi_source(device_id),
    ]
    sources = []
    for factory in factories:
        try:
            sources.append(factory())
        except Exception:  # noqa: BLE001 - absent tools and libraries are normal
            continue
    return sources


class TelemetrySampler:
    """Calls each source every ``interval`` seconds on a daemon thread and emits the merged sample.

    Args:
        emit: receives ``(step, sample)``; e.g. ``lambda step, s: writer.log(step=step, **s)``.
        current_step: returns the latest training step (or None before the first).
        sources: sample functions; default :func:`default_sources`. A source that raises is
            dropped for the rest of the run.
        interval: seconds between samples.
    """

    def __init__(
        self,
        emit: Callable[[int | None, Sample], None],
        current_step: Callable[[], int | None],
        sources: Iterable[Source] | None = None,
        interval: float = 1.0,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval}")
        self._emit = emit
        self._current_step = current_step
        self._sources = list(sources) if sources is not None else None
        self.interval = interval
        self.samples = 0
        self.failed_sources: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monitor-telemetry", daemon=True)

    def start(self) -> TelemetrySampler:
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the thread to end; never waits longer than ``timeout`` (a hung source stays behind)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def sample_once(self) -> Sample:
        """One merged sample from every live source (failing ones are removed)."""
        merged: Sample = {}
        for source in list(self._sources or ()):
            try:
                merged.update(source())
            except Exception as exc:  # noqa: BLE001 - a sampler never fails training
                self._sources.remove(source)  # type: ignore[union-attr]
                self.failed_sources.append(f"{getattr(source, '__qualname__', source)}: {exc!r}")
        return merged

    def _run(self) -> None:
        if self._sources is None:
            self._sources = default_sources()
        next_tick = time.monotonic()
        while not self._stop.is_set():
            sample = self.sample_once()
            if sample:
                try:
                    self._emit(self._current_step(), sample)
                    self.samples += 1
                except Exception:  # noqa: BLE001
                    pass
            if not self._sources:
                return
            next_tick += self.interval
            self._stop.wait(max(0.0, next_tick - time.monotonic()))
