"""Acceptance of the diagnosis detectors: real runs first, then real runs with faults, then synthetic runs.

Prints, side by side for the two halves of the real corpus (a leave-half-out check: "A" and "B" by a
hash of the run name) and for all of it:

(a) **real corpus** (``../shared/real_runs`` or ``$MONITOR_REAL_RUNS``; skipped when absent):
    * healthy runs: warnings/errors per run, as the finished run is diagnosed and as the watcher would
      have seen them live (the union over 40 growing prefixes), by kind; runs on which ``diagnose``
      would exit 1 (an error finding);
    * labelled events: found with the right kind near the labelled step, by kind (each run cut 20
      logged points after the event, 6 evaluations for overfitting), with what was found instead;
(b) **injected faults on real curves** (``monitor_cb.testing.inject``): NaN onset, persistent loss
    spikes x3..x10, eval-loss rise, throughput drop to 30..70%, lr break, a slow rank in an 8-rank run
    built from real curves: found within 20 logged points (6 evaluations) of the onset, and warnings
    before the onset;
* **leave-half-out tuning** (``--only tune``): the knobs tuned on the real corpus (``TUNED``), each chosen on
  half A alone (the most sensitive value with no live alarm of its kind on A's healthy runs) and judged on
  half B against the default;
(c) **synthetic runs** (``monitor_cb.testing.synthetic``): per failure kind, the delay in logged points,
    and false alarms on healthy synthetic runs and on ``monitor_cb.demo.samples`` runs;
* the time ``diagnose`` takes on a 1M-row frame, with the time of one pandas rolling median over the
  same loss column measured in the same run as the yardstick.

* with ``--demo STEPS``: real MindSpore demo runs (healthy seeds and each ``--inject`` fault), diagnosed.

Run: ``.venv/bin/python bench/bench_diagnosis.py [--seeds 3] [--runs 12] [--healthy 30] [--rows 1000000]``
(``--only real|injected|tune|synthetic|speed`` runs one part).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from monitor_cb.diagnosis import DiagnosisSettings, diagnose
from monitor_cb.testing.corpus import corpus_dir, iter_runs, live_alarms, score_event
from monitor_cb.testing.inject import FAULTS, inject, score_injected
from monitor_cb.testing.synthetic import FAILURE_KINDS, healthy_run, labelled_run, score

SPLITS = ("A", "B", "all")


# --------------------------------------------------------------------------- (a) the real corpus
def bench_real(root: Path, settings: DiagnosisSettings, verbose: bool) -> list[str]:
    runs = list(iter_runs(root))
    final, live, exits, healthy = defaultdict(Counter), defaultdict(Counter), Counter(), Counter()
    noisy_runs = Counter()
    events, found, misses = defaultdict(Counter), defaultdict(Counter), []
    for run in runs:
        for split in (run.split, "all"):
            healthy[split] += run.healthy
        if run.healthy:
            now = [f for f in diagnose_finished(run, settings) if f.level >= 1]
            seen = live_alarms(run, settings)
            for split in (run.split, "all"):
                final[split].update(f.kind for f in now)
                live[split].update(f.kind for f in seen)
                exits[split] += any(f.severity == "error" for f in now)
                noisy_runs[split] += bool(seen)
            if verbose:
                for f in seen:
                    print(f"  FALSE ALARM {run.name} ({run.split}): {f.kind} {f.severity} @{f.step}: {f.message}")
        for event in run.events:
            result = score_event(run, event, settings)
            for split in (run.split, "all"):
                events[split][event.kind] += 1
                found[split][event.kind] += result.found
            if not result.found:
                misses.append(f"{run.name}:{event.kind}@{event.step}")
    lines = [f"(a) real corpus: {len(runs)} runs in {root} (healthy: A {healthy['A']}, B {healthy['B']})"]
    lines.append(f"  {'':<44}" + "".join(f"{s:>22}" for s in SPLITS))

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"  {label:<44}" + "".join(f"{c:>22}" for c in cells))

    row("healthy runs", [str(healthy[s]) for s in SPLITS])
    row("warnings+errors, finished run (per run)", [_per_run(final[s], healthy[s]) for s in SPLITS])
    row("warnings+errors seen live (per run)", [_per_run(live[s], healthy[s]) for s in SPLITS])
    row("healthy runs with any live alarm", [str(noisy_runs[s]) for s in SPLITS])
    row("healthy runs where diagnose exits 1", [str(exits[s]) for s in SPLITS])
    for kind in sorted(set(live["all"]) | set(final["all"])):
        row(f"  {kind} (finished / live)", [f"{final[s][kind]} / {live[s][kind]}" for s in SPLITS])
    row("labelled events found (right kind)", [_ratio(found[s], events[s]) for s in SPLITS])
    for kind in sorted(events["all"]):
        row(f"  {kind}", [_ratio_kind(found[s], events[s], kind) for s in SPLITS])
    lines.append("  missed: " + (", ".join(misses) if misses else "none"))
    return lines


def diagnose_finished(run, settings):
    return diagnose(run.frame, settings, status="finished", logged=run.logged)


def _per_run(counter: Counter, runs: int) -> str:
    total = sum(counter.values())
    return f"{total} ({total / runs:.2f})" if runs else "-"


def _ratio(found: Counter, total: Counter) -> str:
    return f"{sum(found.values())}/{sum(total.values())}"


def _ratio_kind(found: Counter, total: Counter, kind: str) -> str:
    return f"{found[kind]}/{total[kind]}" if total[kind] else "-"


# --------------------------------------------------------------------------- (b) faults on real curves
def bench_injected(root: Path, settings: DiagnosisSettings, seeds: int, verbose: bool) -> list[str]:
    runs = [r for r in iter_runs(root) if r.healthy]
    cases, within, anywhere, early_cases = (
        defaultdict(Counter),
        defaultdict(Counter),
        defaultdict(Counter),
        defaultdict(Counter),
    )
    delays, early_kinds, missed = defaultdict(list), Counter(), defaultdict(list)
    for fi, fault in enumerate(FAULTS):
        for ri, run in enumerate(runs):
            for seed in range(seeds):
                inj = inject(run, fault, 1_000_003 * (fi + 1) + 1009 * ri + seed)
                if inj is None:
                    continue
                result = score_injected(inj, settings)
                for split in (run.split, "all"):
                    cases[split][fault] += 1
                    within[split][fault] += result.within_goal
                    anywhere[split][fault] += result.delay is not None
                    early_cases[split][fault] += bool(result.early)
                delays[fault].append(result.delay)
                early_kinds.update(result.early)
                if not result.within_goal:
                    missed[fault].append(f"{run.name}[{inj.variant}]:{'-' if result.delay is None else result.delay}")
                if verbose and result.early:
                    print(f"  EARLY {fault} {run.name} [{inj.variant}] onset {inj.onset_step}: {result.early}")
    lines = [f"(b) faults injected into healthy real runs ({seeds} seed(s) per run and fault; goal: within 20 points)"]
    lines.append(
        f"  {'fault':<16}"
        + "".join(f"{s + ' within/cases':>22}" for s in SPLITS)
        + f"{'delay med/max':>15}{'found at all':>18}{'early':>7}"
    )
    for fault in FAULTS:
        got = [d for d in delays[fault] if d is not None]
        dl = f"{statistics.median(got):.0f}/{max(got)}" if got else "-"
        cells = "".join(f"{_pct(within[s][fault], cases[s][fault]):>22}" for s in SPLITS)
        lines.append(
            f"  {fault:<16}{cells}{dl:>15}{_pct(anywhere['all'][fault], cases['all'][fault]):>18}"
            f"{early_cases['all'][fault]:>7}"
        )
    tot = [_pct(sum(within[s].values()), sum(cases[s].values())) for s in SPLITS]
    lines.append(f"  {'all faults':<16}" + "".join(f"{c:>22}" for c in tot))
    lines.append(f"  warnings before the onset, by kind: {dict(early_kinds) or 0}")
    for fault, items in missed.items():
        lines.append(f"  not within goal, {fault}: " + ", ".join(items[:30]) + (" ..." if len(items) > 30 else ""))
    return lines


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "-"


# --------------------------------------------------------------------------- leave-half-out tuning
# knob -> (candidates from most to least sensitive, the finding kind it may raise falsely, the fault it must find)
TUNED = {
    "spike_shift_z": ((5.0, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0), "loss_spike", "spike"),
    "diverge_persist": ((1, 2, 3, 4), "divergence", None),
    "diverge_z": ((3.0, 4.0, 5.0, 6.0), "divergence", None),
    "diverge_runaway_points": ((1, 2, 3, 4), "divergence", None),
    "diverge_runaway_factor": ((1.0, 1.5, 2.0, 3.0), "divergence", None),
    "diverge_runaway_history": ((10, 20, 30, 50), "divergence", None),
}


def bench_tune(root: Path, settings: DiagnosisSettings, seeds: int) -> list[str]:
    """Each knob chosen on half A alone (the most sensitive value with no live alarm of its kind on A's healthy
    runs), then judged on half B: live alarms of that kind, and the fault it must find, against the default."""
    runs = list(iter_runs(root))
    healthy = {h: [r for r in runs if r.healthy and r.split == h] for h in "AB"}
    events_b = [(r, e) for r in runs if r.split == "B" for e in r.events]
    lines = ["leave-half-out: each knob tuned on half A alone, judged on half B (the other knobs at their defaults)"]
    for knob, (candidates, kind, fault) in TUNED.items():
        chosen = candidates[-1]
        for value in candidates:
            trial = replace(settings, **{knob: value})
            if not any(f.kind == kind for r in healthy["A"] for f in live_alarms(r, trial)):
                chosen = value
                break
        cells = []
        for label, value in (("tuned on A", chosen), ("default", getattr(settings, knob))):
            trial = replace(settings, **{knob: value})
            alarms = sum(f.kind == kind for r in healthy["B"] for f in live_alarms(r, trial))
            found = sum(score_event(r, e, trial).found for r, e in events_b)
            cell = f"{label} {value:g}: B live {kind} alarms {alarms}, B events {found}/{len(events_b)}"
            if fault is not None:
                results = [
                    score_injected(inj, trial)
                    for ri, r in enumerate(healthy["B"])
                    for seed in range(seeds)
                    if (inj := inject(r, fault, 7919 * ri + seed)) is not None
                ]
                cell += f", B {fault} {_pct(sum(x.within_goal for x in results), len(results))}"
            cells.append(cell)
        lines.append(f"  {knob:<23} " + " | ".join(cells))
    return lines


# --------------------------------------------------------------------------- (c) synthetic runs
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
            notes.append(
                f"delay = seconds of silence: max({settings.stall_min_seconds:g} s, "
                f"{settings.stall_factor:g} x usual interval, 1.5 x p99 gap)"
            )
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
        from monitor_cb.demo.samples import iter_records, sample_specs
    except ImportError as exc:  # pragma: no cover - the generator is someone else's module
        return [f"monitor_cb.demo.samples unavailable: {exc}"]
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
        f"monitor_cb.demo.samples healthy runs: {runs}; warning/error findings: {sum(alarms.values())} "
        f"{dict(alarms) or ''}; info: {dict(info)}"
    ]


def _records_frame(records) -> pd.DataFrame:
    """Records merged per step, as RunStore.frame does (train and eval at one step are one row)."""
    rows: dict[int, dict] = {}
    for r in records:
        rows.setdefault(r["step"], {}).update({k: v for k, v in r.items() if k not in ("event", "reason")})
    return pd.DataFrame(list(rows.values())).sort_values("step").reset_index(drop=True)


def bench_speed(rows: int, settings: DiagnosisSettings) -> list[str]:
    """Best of 3 ``diagnose`` calls on a ``rows``-row frame, against a rolling median of its loss (same run).

    Wall time and this process's CPU time are both shown: on a shared machine the wall time also
    counts the other processes' turns.
    """
    frame = healthy_run(90_000, rows)
    diagnose(frame.iloc[:5000], settings)  # warm up imports and caches
    times, cpu, yardstick = [], [], []
    for _ in range(3):
        started, started_cpu = time.perf_counter(), time.process_time()
        found = diagnose(frame, settings, status="running", now=float(frame["t"].iloc[-1]) + 1)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        started = time.process_time()
        frame["loss"].rolling(101).median()
        yardstick.append(time.process_time() - started)
    per_kind = {}
    from monitor_cb.diagnosis.engine import SERIES_DETECTORS

    for kind, detector in SERIES_DETECTORS.items():
        started = time.process_time()
        detector(frame, settings)
        per_kind[kind] = time.process_time() - started
    detail = ", ".join(f"{k} {v * 1000:.0f}" for k, v in per_kind.items())
    return [
        f"diagnose on {len(frame):,} rows x {frame.shape[1]} columns: best {min(times):.3f} s wall, "
        f"{min(cpu):.3f} s CPU, of 3 ({len(found)} findings); goal < 1 s",
        f"  = {min(cpu) / min(yardstick):.1f}x the CPU time of one pandas rolling median (101 points) of the loss "
        f"column ({min(yardstick):.3f} s in this run)",
        f"  per detector alone (ms CPU, without the shared per-call memo): {detail}",
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
    parser.add_argument("--seeds", type=int, default=3, help="injections per healthy real run and fault")
    parser.add_argument("--runs", type=int, default=12, help="labelled synthetic runs per failure kind")
    parser.add_argument("--healthy", type=int, default=30, help="healthy synthetic runs")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the timing frame")
    parser.add_argument("--only", choices=("real", "injected", "tune", "synthetic", "speed"), help="run one part")
    parser.add_argument("--verbose", action="store_true", help="print every false alarm")
    parser.add_argument("--demo", type=int, default=0, metavar="STEPS", help="also run real MindSpore demos")
    parser.add_argument("--demo-healthy", type=int, default=3, help="healthy demo runs (different seeds)")
    parser.add_argument("--only-demo", action="store_true", help="only the MindSpore demos")
    args = parser.parse_args()
    settings = DiagnosisSettings()
    if args.only_demo:
        for line in bench_demo(args.demo or 1000, args.demo_healthy, settings):
            print(line)
        return
    started = time.perf_counter()
    parts = [args.only] if args.only else ["real", "injected", "tune", "synthetic", "speed"]
    root = corpus_dir()
    if root is None and {"real", "injected", "tune"} & set(parts):
        print("(a), (b), tune: the real corpus is not there (../shared/real_runs or $MONITOR_REAL_RUNS): skipped\n")
    for part in parts:
        if part == "real" and root is not None:
            lines = bench_real(root, settings, args.verbose)
        elif part == "injected" and root is not None:
            lines = bench_injected(root, settings, args.seeds, args.verbose)
        elif part == "tune" and root is not None:
            lines = bench_tune(root, settings, min(args.seeds, 2))
        elif part == "synthetic":
            lines = ["(c) synthetic runs (monitor_cb.testing.synthetic)", *bench_kinds(args.runs, settings), ""]
            lines += [*bench_healthy(args.healthy, settings), *bench_samples(settings)]
        elif part == "speed":
            lines = bench_speed(args.rows, settings)
        else:
            continue
        for line in lines:
            print(line, flush=True)
        print()
    if args.demo:
        for line in bench_demo(args.demo, args.demo_healthy, settings):
            print(line)
    print(f"(bench took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
