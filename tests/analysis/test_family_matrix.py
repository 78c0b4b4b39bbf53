"""FamilyMatrix: bucket maxima keep a spike, the ratio is against each row's own baseline, refresh reads new rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor_cb.analysis.family_matrix import FamilyMatrix, MatrixOptions, top_movers


def _frame(steps: int, params: int, spike: tuple[int, int, float] | None = None, every: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    step = np.arange(1, steps + 1)
    data = {"step": step, "loss": 2.0 + rng.normal(0, 0.01, steps)}
    for p in range(params):
        scale = 10.0 ** (p % 4 - 2)  # rows on very different scales
        values = scale * np.exp(rng.normal(0, 0.05, steps))
        if spike and spike[0] == p:
            values[spike[1]] *= spike[2]
        values[step % every != 0] = np.nan
        data[f"local_norm/model.layers.{p}.w"] = values
    return pd.DataFrame(data)


def _matrix(frame: pd.DataFrame, params: int, buckets: int = 50) -> FamilyMatrix:
    members = [f"model.layers.{p}.w" for p in range(params)]
    return FamilyMatrix(members, [f"local_norm/{m}" for m in members], MatrixOptions(buckets=buckets))


def test_spike_survives_bucketing_and_is_scale_free():
    frame = _frame(10_000, 6, spike=(3, 7_000, 30.0))
    matrix = _matrix(frame, 6)
    matrix.update(frame)
    data = matrix.data()
    assert data.ratio.shape[0] == 6 and data.ratio.shape[1] <= 50
    row = data.ratio[3]
    k = int(np.nanargmax(row))
    assert data.start[k] <= 7_001 <= data.end[k]
    assert row[k] == pytest.approx(np.log10(30.0), abs=0.25)
    others = np.delete(data.ratio, 3, axis=0)
    assert np.nanmax(np.abs(others)) < 0.5  # healthy rows stay near 0 whatever their scale
    (first, *_rest) = top_movers(data, limit=3)
    assert first.member == "model.layers.3.w" and first.factor == pytest.approx(30.0, rel=0.6)


def test_refresh_reads_only_new_rows_and_matches_one_read():
    frame = _frame(4_000, 3, spike=(1, 3_500, 20.0), every=10)
    whole = _matrix(frame, 3)
    whole.update(frame)
    parts = _matrix(frame, 3)
    assert parts.update(frame.iloc[:1_234]) == 1_234
    assert parts.update(frame.iloc[:1_234]) == 0
    assert parts.update(frame) == 4_000 - 1_234
    a, b = whole.data(), parts.data()
    np.testing.assert_array_equal(a.start, b.start)
    np.testing.assert_allclose(a.ratio, b.ratio, rtol=1e-9, atol=1e-12, equal_nan=True)


def test_memory_bounded_by_buckets():
    frame = _frame(20_000, 2)
    matrix = _matrix(frame, 2, buckets=64)
    matrix.update(frame)
    assert matrix.hi.shape == (2, 64) and matrix.data().start.size <= 64
    assert matrix.data().start[0] == 1 and matrix.data().end[-1] == 20_000


def test_logged_nan_is_marked_and_unlogged_gaps_are_not():
    frame = _frame(1_000, 2, every=5)
    frame.loc[600, "local_norm/model.layers.0.w"] = np.nan  # a row where nothing was logged ...
    logged = {c: frame[c].notna().to_numpy() for c in frame.columns if c.startswith("local_norm/")}
    logged["local_norm/model.layers.1.w"] = logged["local_norm/model.layers.1.w"].copy()
    frame.loc[799, "local_norm/model.layers.1.w"] = np.inf
    frame.loc[804, "local_norm/model.layers.1.w"] = np.nan
    logged["local_norm/model.layers.1.w"][804] = True  # ... and one where NaN was
    matrix = _matrix(frame, 2)
    matrix.update(frame, logged)
    data = matrix.data()
    assert not data.nonfinite[0].any()
    assert data.nonfinite[1].sum() >= 1
    assert top_movers(data)[0].member == "model.layers.1.w"


def test_rewritten_frame_is_read_again():
    frame = _frame(500, 2)
    matrix = _matrix(frame, 2)
    matrix.update(frame)
    shorter = frame.iloc[:300]
    assert matrix.update(shorter) == 300
    assert matrix.data().end[-1] == 300


def test_text_and_missing_columns_are_not_fatal():
    frame = _frame(200, 2).astype({"local_norm/model.layers.0.w": object})
    frame.loc[10, "local_norm/model.layers.0.w"] = "oops"
    matrix = FamilyMatrix(["model.layers.0.w", "gone"], ["local_norm/model.layers.0.w", "local_norm/gone"])
    matrix.update(frame)
    data = matrix.data()
    assert np.isnan(data.ratio[1]).all() and np.isfinite(data.ratio[0]).any()


def test_bad_options():
    with pytest.raises(ValueError, match="buckets"):
        MatrixOptions(buckets=1)
    with pytest.raises(ValueError, match="baseline_buckets"):
        MatrixOptions(baseline_buckets=0)


def test_first_medians_match_numpy_median_row_by_row():
    """The run-start baseline in one pass over the matrix equals ``np.median`` of each row's first finite cells."""
    from monitor_cb.analysis.family_matrix import _first_medians

    rng = np.random.default_rng(3)
    level = rng.normal(0, 1, (40, 30))
    level[rng.random(level.shape) < 0.3] = np.nan
    level[5] = np.nan  # a row that logged nothing
    level[6, :] = np.nan
    level[6, 29] = 2.5  # one finite cell, at the end
    got = _first_medians(level, 16)
    for row, value in zip(level, got, strict=True):
        finite = row[np.isfinite(row)][:16]
        if finite.size:
            assert value == pytest.approx(float(np.median(finite)), rel=1e-12, abs=1e-12)
        else:
            assert np.isnan(value)


def _movers_row_by_row(data, since_step=None):
    """The plain per-row reading of top movers, the reference the one-pass version must agree with."""
    cols = np.ones(data.start.size, bool) if since_step is None else data.end >= since_step
    found = []
    for i, member in enumerate(data.members):
        bad = np.flatnonzero(data.nonfinite[i] & cols)
        if bad.size:
            found.append((member, np.inf, int(data.start[bad[0]])))
            continue
        r = np.where(cols & data.judged[i] & np.isfinite(data.ratio[i]), np.abs(data.ratio[i]), -1.0)
        k = int(np.argmax(r))
        if r[k] > 0:
            found.append((member, float(data.ratio[i, k]), int(data.start[k])))
    found.sort(key=lambda m: (-abs(m[1]), m[2], m[0]))
    return found


@pytest.mark.parametrize("since_step", [None, 500])
def test_top_movers_agree_with_a_row_by_row_reading(since_step):
    from monitor_cb.analysis.family_matrix import HeatmapData

    rng = np.random.default_rng(5)
    p, n = 60, 40
    ratio = rng.normal(0, 0.5, (p, n))
    ratio[rng.random((p, n)) < 0.1] = np.nan
    ratio[7] = np.nan  # a row with nothing to judge
    nonfinite = rng.random((p, n)) < 0.01
    judged = rng.random((p, n)) < 0.9
    start = np.arange(n) * 25 + 1
    data = HeatmapData(tuple(f"p.{i}" for i in range(p)), start, start + 24, ratio, ratio * 2, nonfinite, judged)
    got = [(m.member, m.ratio, m.step) for m in top_movers(data, limit=p, since_step=since_step)]
    assert got == _movers_row_by_row(data, since_step)


def test_refresh_recomputes_only_the_changed_buckets_baselines():
    """A refresh of a few rows computes the trailing medians of the changed bucket only (the others'
    windows lie before them); the cells equal those of a matrix that computed every median anew."""
    frame = _frame(3_000, 5, spike=(2, 2_500, 30.0))
    frame.loc[frame.index[700:900], "local_norm/model.layers.3.w"] = np.nan  # a gap: empty cells inside the windows
    live, fresh = _matrix(frame, 5, buckets=40), _matrix(frame, 5, buckets=40)
    live.update(frame.iloc[:1_000])
    live.data()
    for end in (1_010, 1_020, 1_500, 2_400, 2_410, 3_000):  # 1,500 rows: past 40 buckets of 32, merged to 64
        part = frame.iloc[:end]
        live.update(part)
        got = live.data()
        fresh.update(part)
        fresh._trail = None  # no earlier medians: every one computed
        want = fresh.data()
        assert fresh.medians_computed == want.ratio.size
        np.testing.assert_allclose(got.ratio, want.ratio, rtol=1e-12, atol=1e-12, equal_nan=True)
        assert np.array_equal(got.judged, want.judged) and np.array_equal(got.end, want.end)
        if end in (1_010, 1_020, 2_410):  # ten rows, inside one bucket
            assert live.medians_computed <= 2 * 5  # at most two buckets of five parameters
        if end == 1_500:
            assert live.medians_computed == got.ratio.size  # the buckets merged: all anew
    resumed = frame.iloc[1_200:1_210].copy()  # a resumed segment logs steps 1,201-1,210 again, 50x higher
    resumed["local_norm/model.layers.4.w"] *= 50.0
    frame = pd.concat([frame, resumed], ignore_index=True)
    live.update(frame)
    got = live.data()
    fresh.update(frame)
    fresh._trail = None
    want = fresh.data()
    np.testing.assert_allclose(got.ratio, want.ratio, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert 2 * 5 < live.medians_computed < got.ratio.size  # from the resumed bucket on
    assert top_movers(got)[0].member == "model.layers.4.w"


def test_a_signed_family_is_judged_by_magnitude():
    """Values below zero (a logit, a signed statistic) are judged by their magnitude, as their mirror image is."""
    frame = _frame(2_000, 4, spike=(1, 1_500, 30.0))
    mirrored = frame.copy()
    family = [c for c in frame.columns if c.startswith("local_norm/")]
    mirrored[family] = -mirrored[family]
    mixed = frame.copy()
    mixed.loc[mixed.index[::2], family[3]] *= -1.0  # a sign that flips: magnitudes still steady
    cells = {}
    for name, f in (("plain", frame), ("mirrored", mirrored), ("mixed", mixed)):
        matrix = _matrix(f, 4)
        matrix.update(f)
        cells[name] = matrix.data()
    np.testing.assert_allclose(cells["mirrored"].ratio, cells["plain"].ratio, rtol=1e-9, atol=1e-9, equal_nan=True)
    assert top_movers(cells["mirrored"])[0].member == "model.layers.1.w"
    assert np.isfinite(cells["mixed"].ratio[3]).all()  # judged, not a gap
    assert top_movers(cells["mixed"])[0].member == "model.layers.1.w"
