"""False warnings and labelled events on other frameworks' TensorBoard runs (issue 31 item 6).

Writes N healthy runs of each framework recipe (``monitor_cb.testing.framework_runs``: HF Trainer,
Lightning, YOLOv5, ML-Agents; each seed varies speed, noise and curves), their resumed copies (a
second event file after a pause), an HF run with a long logged evaluation, and the labelled
overfitting Lightning runs; reads each with the real reader and diagnoses it as a finished run.
Prints, per format, how many healthy runs raised a warning or error (target: at most 1 in 50) and
which kinds, and how many labelled events were found. Optional: ``--real DIR ...`` diagnoses every
run under each directory (event files fetched from public repositories) and prints its roles and
findings, for calibration by eye.

    .venv/bin/python bench/bench_framework_diagnosis.py [--runs 50] [--real /tmp/tb_calib/x ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from monitor_cb.analysis.roles import automatic
from monitor_cb.diagnosis import diagnose
from monitor_cb.ingest import RunStore
from monitor_cb.testing.framework_runs import (
    FrameworkRun,
    hf_trainer,
    lightning,
    ml_agents,
    resumed,
    write_run,
    yolov5,
)


def _diagnosed(root: Path) -> list[tuple[str, list]]:
    store = RunStore(root, rescan_interval_s=0, cache=False)
    out = []
    for info in store.list_runs():
        data = store.read(info.id)
        found = diagnose(data.frame, status="finished", logged=data.masks, last_write=info.last_write)
        out.append((info.id, found))
    return out


def _alerts(found: list) -> list:
    return [f for f in found if f.severity in ("warning", "error")]


def healthy(name: str, make: Callable[[int], FrameworkRun], runs: int) -> None:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(runs):  # a root each: a framework's layout is up to 3 folders deep already
            write_run(Path(tmp) / f"s{seed:03d}", make(seed))
            results += [(f"s{seed:03d}/{rid}", found) for rid, found in _diagnosed(Path(tmp) / f"s{seed:03d}")]
    warned = [(rid, _alerts(f)) for rid, f in results if _alerts(f)]
    kinds = Counter(a.kind for _, alerts in warned for a in alerts)
    print(f"{name:<28} {len(results):>3} healthy runs, {len(warned):>2} with a warning/error {dict(kinds)}")
    for rid, alerts in warned[:3]:
        print(f"    {rid}: {alerts[0].kind} at {alerts[0].step}: {alerts[0].message[:160]}")


def labelled(name: str, make: Callable[[int], FrameworkRun], runs: int) -> None:
    found = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(runs):
            run = make(seed)
            write_run(Path(tmp) / f"s{seed:03d}", run)
            for _, findings in _diagnosed(Path(tmp) / f"s{seed:03d}"):
                hits = [f for f in _alerts(findings) if f.kind == run.label and f.step >= (run.onset_step or 0)]
                found += bool(hits)
    print(f"{name:<28} {found}/{runs} labelled events found")


def real(directory: Path) -> None:
    for rid, findings in _diagnosed(directory):
        store = RunStore(directory, rescan_interval_s=0, cache=False)
        frame = store.read(rid).frame
        roles = automatic([c for c in frame.columns if c not in ("step", "t", "rank", "seg")])
        print(f"{directory.name}/{rid}: {len(frame)} rows; roles: {' | '.join(roles.lines()) or 'none'}")
        for f in findings:
            print(f"    {f.severity:<7} {f.kind:<16} step {f.step}: {f.message[:200]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--real", nargs="*", default=[], type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    n = args.runs
    healthy("hf_trainer", lambda s: hf_trainer(seed=s), n)
    healthy("hf_trainer long eval", lambda s: hf_trainer(seed=s, eval_runtime_s=3255.0), n)
    healthy("lightning", lambda s: lightning(seed=s), n)
    healthy("yolov5", lambda s: yolov5(seed=s), n)
    healthy("ml_agents", lambda s: ml_agents(seed=s), n)
    healthy("lightning resumed", lambda s: resumed(lightning(seed=s)), n)
    healthy("ml_agents resumed", lambda s: resumed(ml_agents(seed=s)), n)
    labelled("lightning overfitting", lambda s: lightning(seed=s, overfit_from=5 + s % 4), max(10, n // 5))
    for directory in args.real:
        real(directory)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
