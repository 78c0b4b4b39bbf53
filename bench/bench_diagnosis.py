"""Acceptance of the diagnosis detectors on labelled synthetic runs, and the cost of ``diagnose``.

Prints, in one run:
* per failure kind: runs, how many were flagged, the delay in logged points after the onset
  (median / max; for ``stalled`` the seconds of silence, for ``overfitting`` also evaluations),
  how many were flagged within 20 points, and warning/error findings of any kind before the onset;
* healthy runs (different seeds and lengths, 300..20,000 points, diagnosed as *live* runs): every
  warning or error is a false alarm; info findings (plateau) are counted separately;
* healthy runs from ``monitor_cb.samples`` (the dashboard's sample family, faults removed);
* the time ``diagnose`` takes on a 1M-row frame.

* with ``--demo STEPS``: real MindSpore demo runs (healthy seeds and each ``--inject`` fault), diagnosed.

Run: ``.venv/bin/python bench/bench_diagnosis.py [--runs 12] [--healthy 30] [--rows 1000000] [--demo 1000]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from monitor_cb.diagnosis import DiagnosisSettings, diagnose
from monitor_cb.diagnosis.synthetic import FAILURE_KINDS, healthy_run, labelled_run, score

GOAL_POINTS = 20


def bench_kinds(runs: int, settings: DiagnosisSettings) -> list[str]:
    lines = [
        f"{'kind':<16} {'runs':>4} {'flagged':>7} {'delay med':>9} {'delay max':>9} {'<=20 pts':>8} "
        f"{'early alarms':>12}  notes"
    ]
    for kind in FAILURE_KINDS:
        delays, early, missed, notes = [], Counter(), [], []
        evals = []
        for i in range(runs):
            seed = 1000 * (FAILURE_KINDS.index(kind) + 1) + i
            run = labelled_run(kind, seed)
            result = score(run, settings)
            early.update(result.early)
            if result.detected:
                delays.append(result.delay)
                if kind == "overfitting":
                    evals.append(_evals_between(run, result.delay))
            else:
                missed.append(f"{run.variant}/seed{seed}/{len(run.frame)}pts")
        flagged = len(delays)
        if kind == "stalled":
            med = f"{statistics.median(delays):.0f} s" if delays else "-"
            mx = f"{max(delays):.0f} s" if delays else "-"
            within = "n/a"
            notes.append("delay = seconds of silence: max(120 s, 20 x usual interval, 1.5 x p99 gap)")
        else:
            med = f"{statistics.median(delays):.0f}" if delays else "-"
            mx = f"{max(delays):.0f}" if delays else "-"
            within = f"{sum(d <= GOAL_POINTS for d in delays)}/{runs}"
        if evals:
            notes.append(f"evals after onset: median {statistics.median(evals):.0f}, max {max(evals)}")
        if kind == "plateau":
            notes.append(f"info; by definition needs plateau_points={settings.plateau_points}")
        if missed:
            notes.append("missed: " + ", ".join(missed))
        early_text = ", ".join(f"{k}:{v}" for k, v in sorted(early.items())) or "0"
        lines.append(
            f"{kind:<16} {runs:>4} {flagged:>7} {med:>9} {mx:>9} {within:>8} {early_text:>12}  {'; '.join(notes)}"
        )
    return lines


def _evals_between(run, delay: float) -> int:
    """Evaluations from the onset (excluded) to the detection point (included)."""
    ev = run.frame["eval_loss"].notna().to_numpy()
    return int(ev[run.onset_row + 1 : run.onset_row + 1 + int(delay)].sum())


def bench_healthy(n: int, settings: DiagnosisSettings) -> list[str]:
    alarms, info, lengths = Counter(), Counter(), []
    for seed in range(n):
        frame = healthy_run(50_000 + seed)
        lengths.append(len(frame))
        t = frame["t"].to_numpy()
        now = float(t[-1] + np.median(np.diff(t[-100:])))  # watched live, one interval after the last write
        for f in diagnose(frame, settings, status="running", now=now):
            (alarms if f.level >= 1 else info)[f.kind] += 1
            if f.level >= 1:
                print(f"  FALSE ALARM seed {50_000 + seed} ({len(frame)} pts): {f.kind} {f.severity}: {f.message}")
    return [
        f"healthy synthetic runs: {n} (seeds 50000..{50_000 + n - 1}, {min(lengths):,}..{max(lengths):,} points, "
        f"median {int(statistics.median(lengths)):,})",
        f"  warning/error findings: {sum(alarms.values())} {dict(alarms) or ''}",
        f"  info findings: {sum(info.values())} {dict(info)}",
    ]


def bench_samples(settings: DiagnosisSettings) -> list[str]:
    """The dashboard's sample family (helper 3's generator), faults removed, 3,000 and 20,000 steps."""
    try:
        from monitor_cb.samples import iter_records, sample_specs
    except ImportError as exc:  # pragma: no cover - the generator is someone else's module
        return [f"monitor_cb.samples unavailable: {exc}"]
    alarms, info, runs = Counter(), Counter(), 0
    for steps in (3000, 20_000):
        for spec in sample_specs(4, steps=steps, seed=7):
            spec = replace(spec, faults=())
            frame = _records_frame(iter_records(spec, now=2e9))
            runs += 1
            for f in diagnose(frame, settings, status="finished"):
                (alarms if f.level >= 1 else info)[f.kind] += 1
                if f.level >= 1:
                    print(f"  SAMPLE ALARM {spec.name} ({steps} steps): {f.kind}: {f.message}")
    return [
        f"monitor_cb.samples healthy runs: {runs}; warning/error findings: {sum(alarms.values())} "
        f"{dict(alarms) or ''}; info: {dict(info)}"
    ]


def _records_frame(records) -> pd.DataFrame:
    """Records merged per step, as RunStore.frame does (train and eval at one step are one row)."""
    rows: dict[int, dict] = {}
    for r in records:
        rows.setdefault(r["step"], {}).update({k: v for k, v in r.items() if k not in ("event", "reason")})
    return pd.DataFrame(list(rows.values())).sort_values("step").reset_index(drop=True)


def bench_speed(rows: int, settings: DiagnosisSettings) -> list[str]:
    frame = healthy_run(90_000, rows)
    diagnose(frame.iloc[:5000], settings)  # warm up imports and caches
    times = []
    for _ in range(3):
        started = time.perf_counter()
        found = diagnose(frame, settings, status="running", now=float(frame["t"].iloc[-1]) + 1)
        times.append(time.perf_counter() - started)
    per_kind = {}
    from monitor_cb.diagnosis.engine import SERIES_DETECTORS

    for kind, detector in SERIES_DETECTORS.items():
        started = time.perf_counter()
        detector(frame, settings)
        per_kind[kind] = time.perf_counter() - started
    detail = ", ".join(f"{k} {v * 1000:.0f}" for k, v in per_kind.items())
    return [
        f"diagnose on {len(frame):,} rows x {frame.shape[1]} columns: best {min(times):.3f} s, "
        f"median {statistics.median(times):.3f} s of 3 ({len(found)} findings)",
        f"  per detector (ms): {detail}",
    ]


DEMO_FAULTS = {  # demo --inject name -> the kind that must be flagged
    "nan": "nan",
    "grad_explosion": "grad_explosion",
    "lr_break": "lr_anomaly",
    "slow_data": "throughput_drop",
    "overfit": "overfitting",
}


def bench_demo(steps: int, healthy_seeds: int, settings: DiagnosisSettings) -> list[str]:
    """Real MindSpore demo runs (``python -m monitor_cb demo``): healthy seeds, then each fault at 60%."""
    import os
    import subprocess
    import sys
    import tempfile

    from monitor_cb.ingest import RunStore

    root = Path(tempfile.mkdtemp(prefix="diag-demo-"))
    jobs = [(f"healthy-seed{seed}", None, seed) for seed in range(healthy_seeds)]
    jobs += [(f"{fault}", fault, 0) for fault in DEMO_FAULTS]
    onset = int(steps * 0.6)
    lines = [f"real MindSpore demo runs ({steps} steps, a record every 2 steps, faults from step {onset:,}), {root}"]
    for name, fault, seed in jobs:
        argv = [sys.executable, "-m", "monitor_cb", "demo", "--steps", str(steps), "--log-interval", "2"]
        argv += ["--logdir", str(root), "--name", name, "--seed", str(seed)]
        if fault:
            argv += ["--inject", f"{fault}@{onset}"]
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=os.environ.copy(), check=False)
        took = time.perf_counter() - started
        if done.returncode != 0 and "finished" not in done.stdout:
            lines.append(f"  {name:<16} demo failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
            continue
        store = RunStore(root)
        store.refresh(force=True)
        info = store.run_info(name)
        frame = store.read(name).frame
        found = diagnose(frame, settings, status=info.status, last_write=info.last_write)
        alarms = [f for f in found if f.level >= 1]
        text = "; ".join(f"{f.kind}@{f.step}({f.severity})" for f in alarms) or "no warnings or errors"
        verdict = ""
        if fault:
            want = DEMO_FAULTS[fault]
            # an overfitting finding starts at the best eval (before the onset); it counts if it ends after
            hits = [f for f in found if f.kind == want and (f.end_step or f.step) >= onset and f.step >= onset - 200]
            if hits:
                seen = hits[0].details.get("detected_step", hits[0].step)
                rows = int(((frame["step"] > onset) & (frame["step"] <= seen)).sum())
                verdict = f"FLAGGED {want} at step {hits[0].step:,} ({rows} logged rows after onset)"
            else:
                verdict = f"MISSED {want}"
        lines.append(f"  {name:<16} {info.status:<9} {len(frame):>4} rows {took:5.1f} s  {verdict}  [{text}]")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="labelled runs per failure kind")
    parser.add_argument("--healthy", type=int, default=30, help="healthy synthetic runs")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the timing frame")
    parser.add_argument("--demo", type=int, default=0, metavar="STEPS", help="also run real MindSpore demos")
    parser.add_argument("--demo-healthy", type=int, default=3, help="healthy demo runs (different seeds)")
    parser.add_argument("--only-demo", action="store_true", help="skip the synthetic parts")
    args = parser.parse_args()
    if args.only_demo:
        for line in bench_demo(args.demo or 1000, args.demo_healthy, DiagnosisSettings()):
            print(line)
        return
    settings = DiagnosisSettings()
    started = time.perf_counter()
    for line in bench_kinds(args.runs, settings):
        print(line)
    print()
    for line in bench_healthy(args.healthy, settings) + bench_samples(settings):
        print(line)
    print()
    for line in bench_speed(args.rows, settings):
        print(line)
    if args.demo:
        print()
        for line in bench_demo(args.demo, args.demo_healthy, settings):
            print(line)
    print(f"\n(bench took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
