import numpy as np

from monitor_cb.diagnosis import DiagnosisSettings, detect_plateau, detect_stalled
from monitor_cb.diagnosis.progress import fmt_duration, stall_threshold
from tests.diagnosis.helpers import decaying_loss, frame, noisy

S = DiagnosisSettings()


def test_stalled_running_run():
    f = frame(100, loss=1.0)  # one record every 0.5 s
    last = float(f["t"].iloc[-1])
    assert stall_threshold(f["t"].to_numpy(), S) == S.stall_min_seconds
    assert detect_stalled(f, S, status="running", now=last + 60) == []
    (found,) = detect_stalled(f, S, status="running", now=last + 300)
    assert (found.kind, found.severity, found.step) == ("stalled", "warning", 100)
    assert "5 min 0 s" in found.message and "every 0.5 s" in found.message
    (late,) = detect_stalled(f, S, status="running", now=last + 5 * 120 + 1)
    assert late.severity == "error"


def test_stalled_uses_last_write_and_only_live_statuses():
    f = frame(100, loss=1.0)
    last = float(f["t"].iloc[-1])
    assert detect_stalled(f, S, status="running", now=last + 300, last_write=last + 250) == []
    for status in ("finished", "failed", "stopped", "crashed", None):
        assert detect_stalled(f, S, status=status, now=last + 1e6) == []
    assert detect_stalled(f, S, status="stalled", now=last + 1)  # the store already judged it stalled
    assert detect_stalled(frame(0), S, status="running", now=1e10) == []
    assert detect_stalled(frame(5).drop(columns=["t"]), S, status="running", now=1e10) == []


def test_slow_loggers_get_a_longer_threshold():
    f = frame(100, loss=1.0)
    f["t"] = 1.76e9 + np.arange(100) * 60.0  # a record a minute
    assert stall_threshold(f["t"].to_numpy(), S) == S.stall_factor * 60.0


def test_plateau_is_info_and_spans_the_flat_stretch_near_the_start_level():
    loss = noisy(1000, 3.0, 0.03, seed=5)  # stuck at its start level for 500 points, then it learns
    loss[500:] = decaying_loss(500, seed=6) * 0.3
    found = detect_plateau(frame(1000, loss=loss), S)
    assert [f.severity for f in found] == ["info"]
    assert found[0].step == 1 and 450 <= found[0].end_step <= 525
    assert not found[0].details["ongoing"] and "near the level it started from" in found[0].message


def test_a_flat_tail_after_the_descent_is_convergence_not_a_plateau():
    loss = decaying_loss(1000)
    loss[300:] = loss[300] * noisy(700, 1.0, 0.03, seed=5)
    assert detect_plateau(frame(1000, loss=loss), S) == []
    smooth = 0.75 + 1.25 * np.exp(-np.arange(6000) / 900)  # 2 -> 0.75, its last 2,000 points under 1% per 200
    assert detect_plateau(frame(6000, loss=smooth), S) == []


def test_falling_loss_short_runs_and_constant_loss():
    assert detect_plateau(frame(1000, loss=np.geomspace(10, 1, 1000)), S) == []
    assert detect_plateau(frame(100, loss=noisy(100)), S) == []  # shorter than plateau_points
    # a loss that never changes at all: no training signal (a warning) besides the flat stretch (info)
    dead, flat = detect_plateau(frame(1000, loss=2.0), S)
    assert (dead.severity, dead.details["variant"]) == ("warning", "no_signal")
    assert (flat.severity, flat.step, flat.end_step) == ("info", 1, 1000)


def test_fmt_duration():
    assert fmt_duration(0.25) == "0.25 s"
    assert fmt_duration(95) == "1 min 35 s"
    assert fmt_duration(7300) == "2 h 1 min"
    assert fmt_duration(float("nan")) == "?"


def test_a_past_gap_between_records_is_a_stall():
    # a log with one record every ~40 min and a 7.6 h hole: the job was down, then went on
    f = frame(200, loss=noisy(200))
    gaps = np.full(199, 2400.0)
    gaps[119] = 27_335.0
    f["t"] = 1.6e9 + np.concatenate(([0.0], np.cumsum(gaps)))
    (found,) = detect_stalled(f, S, status="finished")
    assert (found.kind, found.severity, found.step) == ("stalled", "warning", 121)
    assert "7 h 35 min" in found.message and "stall_gap_seconds" in found.why


def test_periodic_eval_pauses_are_not_stalls():
    f = frame(3000, loss=noisy(3000))
    gaps = np.full(2999, 14.0)
    gaps[49::50] = 185.0  # an evaluation every 50 records: 13x the usual interval, but seen before
    gaps[1499] = 300.0  # and one longer pause, still under stall_gap_seconds
    f["t"] = 1.6e9 + np.concatenate(([0.0], np.cumsum(gaps)))
    assert detect_stalled(f, S, status="finished") == []


def _clock_jump_run(root, jump_s: float, at_step: int = 2000):
    """A real run (MetricsWriter, explicit times, 0.5 s a step) whose clock moves by ``jump_s`` after ``at_step``."""
    from monitor_cb.train.writer import MetricsWriter

    with MetricsWriter(root / "jump", fsync_interval=0) as writer:
        for step in range(1, 4001):
            t = 1.76e9 + 0.5 * step + (jump_s if step > at_step else 0.0)
            writer.log_at(t, step=step, loss=2.0 / (1 + 0.01 * step), lr=1e-3)


def test_a_clock_set_back_an_hour_is_no_stall(tmp_path, capsys):
    """As found (#34 item 12): a clock set back one hour at step 2,000 made ``diagnose`` warn "stalled ...
    between step 4,000 and step 1", ordering records by time; steps decide what came before."""
    from monitor_cb.cli import main
    from monitor_cb.ingest import RunStore

    _clock_jump_run(tmp_path, -3600.0)
    main(["diagnose", "jump", "--logdir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "stalled" not in out and "0 warnings" in out, out
    f = RunStore(tmp_path).read("jump").frame
    assert detect_stalled(f, S, status="finished") == []
    last = 1.76e9 + 0.5 * 4000 - 3600  # the last step's time, an hour before the highest time in the run
    assert detect_stalled(f, S, status="running", now=last + 60) == []  # the last record is step 4,000's
    (silent,) = detect_stalled(f, S, status="running", now=last + 400)
    assert silent.step == 4000 and silent.details["last_write"] == last


def test_a_clock_set_forward_an_hour_still_reads_as_an_hour_without_records(tmp_path):
    """The same run with the clock moved forward: indistinguishable from an hour's pause, so still reported."""
    from monitor_cb.ingest import RunStore

    _clock_jump_run(tmp_path, 3600.0)
    (found,) = detect_stalled(RunStore(tmp_path).read("jump").frame, S, status="finished")
    assert found.step == 2001 and "between step 2,000 and step 2,001" in found.message
