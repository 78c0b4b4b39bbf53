"""Acceptance of ``straggler`` and ``rank_divergence`` on labelled synthetic 8-rank runs.

Prints, in one run:
* per failure kind (one slow or one diverging rank injected at a random step): runs, flagged on the
  right rank, the delay in logged points after the onset (median / max), and any other rank finding
  (another rank, another kind, or before the onset) as false alarms; misses are listed;
* a sensitivity sweep: detection rate against the size of a fixed fault (below and above the thresholds);
* healthy 8-rank runs (different seeds, lengths log-uniform 300..20,000 steps): every rank finding is
  a false alarm; the full ``diagnose`` (every detector, per rank and across ranks) is run on them too;
* the time the two detectors take on an 8-rank x 125k-step frame (1M rows).

Run: ``.venv/bin/python bench/bench_ranks.py [--runs 24] [--healthy 24] [--steps 125000]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, diagnose
from monitor_cb.testing.synthetic_ranks import (
    RANK_FAILURE_KINDS,
    healthy_ranks_run,
    labelled_ranks_run,
    rank_findings,
    score_ranks,
)


def bench_kinds(runs: int, settings: DiagnosisSettings) -> list[str]:
    lines = [
        f"{'kind':<16} {'runs':>4} {'flagged':>7} {'delay med':>9} {'delay max':>9} {'false':>5}  per variant / notes"
    ]
    for i, kind in enumerate(RANK_FAILURE_KINDS):
        delays, false, missed, variants = [], Counter(), [], Counter()
        by_variant: dict[str, list[int]] = {}
        for j in range(runs):
            seed = 7000 * (i + 1) + j
            run = labelled_ranks_run(kind, seed)
            result = score_ranks(run, settings)
            false.update(result.false)
            variants[run.variant] += 1
            if result.detected:
                delays.append(result.delay)
                by_variant.setdefault(run.variant, []).append(result.delay)
            else:
                missed.append(f"{run.variant}/x{run.size:.1f}/seed{seed}/{len(run.frame) // run.world}pts")
        med = f"{statistics.median(delays):.0f}" if delays else "-"
        mx = f"{max(delays):.0f}" if delays else "-"
        notes = [
            ", ".join(
                f"{v} {len(by_variant.get(v, []))}/{c} (delay med {statistics.median(by_variant[v]):.0f})"
                if by_variant.get(v)
                else f"{v} 0/{c}"
                for v, c in sorted(variants.items())
            )
        ]
        if false:
            notes.append("false: " + ", ".join(f"{k}:{v}" for k, v in sorted(false.items())))
        if missed:
            notes.append("missed: " + ", ".join(missed))
        lines.append(
            f"{kind:<16} {runs:>4} {len(delays):>7} {med:>9} {mx:>9} {sum(false.values()):>5}  {'; '.join(notes)}"
        )
    return lines


SWEEP = {
    "straggler": ("compute", (1.1, 1.2, 1.3, 1.4, 1.6, 2.0)),
    "rank_divergence": ("loss_jump", (2.0, 3.0, 4.0, 5.0, 6.0, 8.0)),
}


def bench_sweep(runs: int, settings: DiagnosisSettings) -> list[str]:
    """Detection rate against the size of the fault (straggler: slowdown x; divergence: cross-rank sigmas)."""
    lines = ["sensitivity (flagged/runs, delay median), fixed-size faults from the onset:"]
    for kind, (variant, sizes) in SWEEP.items():
        cells = []
        for size in sizes:
            delays = []
            for j in range(runs):
                run = labelled_ranks_run(kind, 20_000 + j, variant=variant, size=size)
                result = score_ranks(run, settings)
                if result.detected:
                    delays.append(result.delay)
            med = f"{statistics.median(delays):.0f}" if delays else "-"
            unit = "x" if kind == "straggler" else "sd"
            cells.append(f"{size:g}{unit} {len(delays)}/{runs} ({med})")
        lines.append(f"  {kind:<16} {variant:<10} " + "  ".join(cells))
    return lines


def bench_healthy(n: int, settings: DiagnosisSettings) -> list[str]:
    rank_alarms, other_alarms, info, lengths = Counter(), Counter(), Counter(), []
    for j in range(n):
        seed = 90_000 + j
        length = int(np.exp(np.random.default_rng(seed).uniform(np.log(300), np.log(20_000))))
        frame = healthy_ranks_run(seed, length)
        lengths.append(len(frame) // 8)
        for f in rank_findings(frame, settings):
            rank_alarms[f.kind] += 1
            print(f"  FALSE ALARM seed {seed} ({len(frame) // 8} steps): {f.kind} rank {f.rank}: {f.message}")
        for f in diagnose(frame, settings, status="finished"):
            if f.kind not in RANK_FAILURE_KINDS:
                (other_alarms if f.level >= 1 else info)[f.kind] += 1
                if f.level >= 1:
                    print(
                        f"  OTHER DETECTOR seed {seed} ({len(frame) // 8} steps): {f.kind} rank {f.rank}: {f.message}"
                    )
    return [
        f"healthy 8-rank runs: {n} (seeds 90000..{90_000 + n - 1}, {min(lengths):,}..{max(lengths):,} steps per rank, "
        f"median {int(statistics.median(lengths)):,})",
        f"  straggler / rank_divergence findings: {sum(rank_alarms.values())} {dict(rank_alarms) or ''}",
        f"  other detectors (per rank, full diagnose): warning/error {sum(other_alarms.values())} "
        f"{dict(other_alarms) or ''}; info {dict(info) or ''}",
    ]


def bench_speed(steps: int, settings: DiagnosisSettings) -> list[str]:
    frame = healthy_ranks_run(123, steps)
    times = []
    for _ in range(3):
        started = time.perf_counter()
        found = rank_findings(frame, settings)
        times.append(time.perf_counter() - started)
    return [
        f"straggler + rank_divergence on {len(frame):,} rows (8 ranks x {steps:,} steps): best {min(times):.2f} s "
        f"of 3 ({len(found)} findings)"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=24, help="injected runs per kind")
    parser.add_argument("--healthy", type=int, default=24, help="healthy runs")
    parser.add_argument("--sweep", type=int, default=10, help="runs per size in the sensitivity sweep")
    parser.add_argument("--steps", type=int, default=125_000, help="steps per rank for the timing (0 = skip)")
    args = parser.parse_args()
    settings = DiagnosisSettings()
    print(
        f"settings: rank_window={settings.rank_window}, rank_persist={settings.rank_persist}, "
        f"straggler_cost={settings.straggler_cost}, divergence_z={settings.divergence_z}, "
        f"divergence_rel={settings.divergence_rel}, baseline_window={settings.baseline_window}"
    )
    started = time.perf_counter()
    for line in bench_kinds(args.runs, settings):
        print(line)
    for line in bench_sweep(args.sweep, settings):
        print(line)
    for line in bench_healthy(args.healthy, settings):
        print(line)
    if args.steps:
        for line in bench_speed(args.steps, settings):
            print(line)
    print(f"(bench took {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
