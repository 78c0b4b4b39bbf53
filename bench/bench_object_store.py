"""Benchmark log roots on object storage against a real S3 API server (moto, a separate process on 127.0.0.1).

    .venv/bin/python bench/bench_object_store.py [--runs 1000] [--cut 30] [--quick]

1. Latency: a record written on a "node" (MetricsWriter with upload, 2 s ship interval) until a
   reader polling every 1 s (the dashboard's fastest refresh, a RunStore on the bucket) has it.
   Goal: <= 5 s.
2. A bucket with --runs runs (1 % of them still running and growing): time and requests of the
   first listing, then of each poll with listings cached, against the same runs in a local
   directory (the baseline, measured in this run). Goal: <= 1 s per poll; requests reported.
3. A --cut second network cut during training (a TCP proxy between the writer and the store
   drops every connection): time spent in ``log()`` during the cut, the backlog caught up after,
   and the bucket compared byte for byte with the local file. Goal: nothing lost.

Training overhead with upload on is measured by ``bench/bench_callback.py --upload``.
moto is much slower than S3 (a Python server on the same 2 cores): absolute times are upper bounds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from monitor_cb.ingest import RunStore  # noqa: E402
from monitor_cb.ingest.remote import RemoteReadOptions, RemoteRoot  # noqa: E402
from monitor_cb.storage.chunks import chunk_name  # noqa: E402
from monitor_cb.storage.objects import ObjectStore  # noqa: E402
from monitor_cb.storage.shipper import UploadOptions  # noqa: E402
from monitor_cb.train.writer import MetricsWriter  # noqa: E402
from tests.objectstore import TcpProxy, make_bucket, s3_environment  # noqa: E402


@contextlib.contextmanager
def moto_process(home: Path) -> Iterator[str]:
    """``moto_server`` in its own process (its CPU is not the writer's GIL), yielding its endpoint."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(home / "moto.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        os.environ.update(s3_environment(endpoint, home))
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def record(step: int) -> dict[str, float]:
    return {"loss": 2.0 / (1 + step * 1e-3), "lr": 1e-3, "throughput": 800.0, "step_time": 0.05, "grad_norm": 1.0}


# ----------------------------------------------------------------------------- 1. latency
def bench_latency(endpoint: str, tmp: Path, samples: int) -> None:
    import random

    make_bucket(endpoint, "latency")
    options = UploadOptions("s3://latency/logs/run", interval_s=2.0)
    writer = MetricsWriter(tmp / "latency-run", rank=0, world_size=1, fsync_interval=0, upload=options)
    for step in range(1, 101):
        writer.log(step=step, **record(step))
    store = RunStore("s3://latency/logs")
    deadline = time.monotonic() + 60
    while not store.list_runs() or store.list_runs()[0].last_step != 100:
        if time.monotonic() > deadline:
            raise RuntimeError("the first records never showed")
        time.sleep(0.2)
    rnd = random.Random(0)
    latencies = []
    step = 100
    next_poll = time.monotonic()
    for _ in range(samples):
        time.sleep(rnd.uniform(0.0, 2.0))  # records come at any phase of the ship and poll cycles
        step += 1
        writer.log(step=step, **record(step))
        written = time.monotonic()
        while True:
            now = time.monotonic()
            if now < next_poll:
                time.sleep(next_poll - now)
            next_poll = max(next_poll + 1.0, time.monotonic())  # a 1 s refresh
            runs = store.list_runs()
            if runs and runs[0].last_step == step:
                latencies.append(time.monotonic() - written)
                break
    writer.close()
    latencies.sort()
    print(f"1. record written on a node -> in the reader's store (2 s ship interval, 1 s polls), {samples} records")
    print(
        f"   median {statistics.median(latencies):.2f} s, p90 {latencies[int(0.9 * (len(latencies) - 1))]:.2f} s, "
        f"max {latencies[-1]:.2f} s (goal <= 5 s; the page adds its render, see the browser test)"
    )


# ----------------------------------------------------------------------------- 2. 1,000 runs
def bench_many_runs(endpoint: str, tmp: Path, runs: int, polls: int, rtt_ms: float = 0.0) -> None:
    make_bucket(endpoint, "many")
    store_ops, _ = ObjectStore.open("s3://many/logs")
    local = tmp / "many-local"
    active = max(1, runs // 100)
    writers: list[tuple[MetricsWriter, Path]] = []
    start = time.perf_counter()
    for i in range(runs):
        run = local / f"run{i:04d}"
        writer = MetricsWriter(run, rank=0, world_size=1, fsync_interval=0)
        for step in range(1, 51):
            writer.log_at(1.7e9 + step, step=step, **record(step))
        writer.flush()
        if i >= active:
            writer.close()
        else:
            writers.append((writer, run))
        for path in sorted(run.iterdir()):
            data = path.read_bytes()
            if path.name.endswith(".jsonl"):
                store_ops.put(f"many/logs/{run.name}/{path.name}.chunks/{chunk_name(0, len(data))}", data)
            else:
                store_ops.put(f"many/logs/{run.name}/{path.name}", data)
    print(
        f"2. {runs} runs ({active} running and growing, 50 records each): uploaded in "
        f"{time.perf_counter() - start:.0f} s"
    )
    sent = {run: (run / "metrics.jsonl").stat().st_size for _, run in writers}

    def grow(round_: int) -> None:  # the running runs each get a new chunk before every poll
        for writer, run in writers:
            writer.log_at(1.7e9 + 100 + round_, step=51 + round_, **record(51 + round_))
            writer.flush()
            path = run / "metrics.jsonl"
            data = path.read_bytes()
            store_ops.put(
                f"many/logs/{run.name}/metrics.jsonl.chunks/{chunk_name(sent[run], len(data))}", data[sent[run] :]
            )
            sent[run] = len(data)

    # baseline: the first listing one request at a time (as before issue 14), in this run
    serial = RunStore(RemoteRoot("s3://many/logs", read=RemoteReadOptions(parallel_requests=1)), cache=False)
    t0, r0 = time.perf_counter(), serial.remote.store.requests
    assert len(serial.list_runs()) == runs
    serial_s, serial_requests = time.perf_counter() - t0, serial.remote.store.requests - r0
    if rtt_ms:  # the same two listings through a proxy that holds each reply back: a bucket across a network
        proxy = TcpProxy(endpoint, delay_s=rtt_ms / 1000)
        for parallel in (1, RemoteReadOptions().parallel_requests):
            read = RemoteReadOptions(parallel_requests=parallel)
            far = RunStore(RemoteRoot("s3://many/logs", endpoint_url=proxy.endpoint, read=read), cache=False)
            t0, r0 = time.perf_counter(), far.remote.store.requests
            assert len(far.list_runs()) == runs
            print(
                f"   first listing with {rtt_ms:.0f} ms per reply, {parallel} in flight: "
                f"{time.perf_counter() - t0:.1f} s, {far.remote.store.requests - r0} requests"
            )
        proxy.close()
    remote = RunStore("s3://many/logs", cache=False)
    counter = remote.remote.store
    t0, r0 = time.perf_counter(), counter.requests
    listed = remote.list_runs()
    cold_s, cold_requests = time.perf_counter() - t0, counter.requests - r0
    assert len(listed) == runs, len(listed)
    baseline = RunStore(local)
    baseline.list_runs()
    times, requests, local_times = [], [], []
    for i in range(polls):
        grow(i)
        time.sleep(1.0)  # a 1 s refresh
        t0, r0 = time.perf_counter(), counter.requests
        found = remote.list_runs()
        times.append(time.perf_counter() - t0)
        requests.append(counter.requests - r0)
        t0 = time.perf_counter()
        baseline.list_runs()
        local_times.append(time.perf_counter() - t0)
    growing = {r.id: r.last_step for r in found if r.status == "running"}
    assert all(step == 50 + polls for step in growing.values()), growing
    print(
        f"   first listing: {cold_s:.1f} s, {cold_requests} requests, "
        f"{remote.remote.read.parallel_requests} in flight; one at a time (baseline): {serial_s:.1f} s, "
        f"{serial_requests} requests -> {serial_s / cold_s:.1f}x faster"
    )
    print(
        f"   poll with listings cached: median {statistics.median(times) * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms, "
        f"requests per poll median {statistics.median(requests):.0f} (min {min(requests)}, max {max(requests)}) "
        f"over {polls} polls (goal <= 1 s)"
    )
    print(
        f"   baseline, the same runs in a local directory: median {statistics.median(local_times) * 1e3:.0f} ms "
        f"per poll -> remote/local {statistics.median(times) / statistics.median(local_times):.1f}x"
    )
    for writer, _ in writers:
        writer.close()


# ----------------------------------------------------------------------------- 3. network cut
def bench_cut(endpoint: str, tmp: Path, cut_s: float) -> None:
    make_bucket(endpoint, "cut")
    proxy = TcpProxy(endpoint)
    options = UploadOptions("s3://cut/run", interval_s=2.0, endpoint_url=proxy.endpoint, retry_max_s=5.0)
    run = tmp / "cut-run"
    writer = MetricsWriter(run, rank=0, world_size=1, fsync_interval=0, upload=options)
    rate = 200  # records per second: log_interval 10 at 20 steps/s... times ten, to fill the backlog
    step = 0
    worst = 0.0

    def train(seconds: float) -> None:
        nonlocal step, worst
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            step += 1
            t0 = time.perf_counter()
            writer.log(step=step, **record(step))
            worst = max(worst, time.perf_counter() - t0)
            time.sleep(1 / rate)

    train(5)
    proxy.cut()
    cut_from = step
    train(cut_s)
    during = step - cut_from
    worst_during = worst
    proxy.restore()
    restored = time.monotonic()
    shipper = writer.shipper
    train(5)
    writer.close()
    caught_up = time.monotonic() - restored
    proxy.close()
    local = (run / "metrics.jsonl").read_bytes()
    store_ops, _ = ObjectStore.open("s3://cut/run")
    chunks = store_ops.list_prefix("cut/run/metrics.jsonl.chunks/")
    remote = b"".join(store_ops.read(e.path) for e in chunks)
    print(f"3. {cut_s:.0f} s network cut while training logged {rate} records/s ({during} records during the cut)")
    print(
        f"   slowest log() call {worst_during * 1e6:.0f} us; failed uploads {shipper.stats.failures}; "
        f"everything shipped {caught_up:.1f} s after the network came back (writer closed)"
    )
    ok = remote == local
    records = local.count(b"\n")
    print(
        f"   bucket vs local file: {len(chunks)} chunks, {len(remote):,} of {len(local):,} bytes, "
        f"{records:,} records -> {'IDENTICAL' if ok else 'DIFFERENT'} (goal: identical)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--polls", type=int, default=15)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--cut", type=float, default=30.0)
    parser.add_argument("--quick", action="store_true", help="100 runs, 5 samples, a 5 s cut")
    parser.add_argument("--rtt-ms", type=float, default=20.0, help="emulated round trip for the listing comparison")
    parser.add_argument("--only", choices=("latency", "many", "cut"), help="run one part only")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.polls, args.samples, args.cut = 100, 5, 5, 5.0
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    tmp = Path(tempfile.mkdtemp(prefix="bench-objstore-"))
    print(
        f"moto {__import__('moto').__version__} in its own process on 127.0.0.1, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    try:
        with moto_process(tmp) as endpoint:
            if args.only in (None, "latency"):
                bench_latency(endpoint, tmp, args.samples)
            if args.only in (None, "many"):
                bench_many_runs(endpoint, tmp, args.runs, args.polls, args.rtt_ms)
            if args.only in (None, "cut"):
                bench_cut(endpoint, tmp, args.cut)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
