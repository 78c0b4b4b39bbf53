"""What the cache's proof costs: opening a 1M-row cache file with and without checking its rows.

Usage: ``.venv/bin/python bench/bench_cacheproof.py [--steps 1000000] [--rounds 5]``

A 1M-step run (bench_scale's generator: ten columns) is read once so its cache file is written;
then, in interleaved rounds, a fresh :class:`~monitor_cb.ingest.source.MetricsSource` opens it
(what a new server does for the first chart: header, rows, the JSONL after the cached offset) and
the same open with both checks of :mod:`monitor_cb.ingest.cacheproof` switched off (the baseline);
the two checks are also timed on their own: the rows against the header with their CRC-32
(``rows_problem``), and the rows against the JSONL's first, last and sampled lines
(``source_problem``). Prints the medians and the ratio of the checked open to the baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_scale import write_rank  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from monitor_cb.ingest.cacheproof import rows_problem, source_blocks, source_problem
    from monitor_cb.ingest.colcache import ColumnarCache, Place, _read_header
    from monitor_cb.ingest.source import MetricsSource

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "run" / "metrics.jsonl"
        write_rank(path, 0, args.steps, time.time() - 86_400)
        place = [Place(root / ".monitor" / "cache", root)]
        first = MetricsSource(path, root=root, cache=ColumnarCache(place, root))
        first.poll()
        cache_file = first.cache.path_for(path)
        assert cache_file is not None and cache_file.exists(), first.cache.last_error
        opens, bare, rows, source = [], [], [], []
        for _ in range(args.rounds):
            for checked, times in ((True, opens), (False, bare)):
                with _checks(checked):
                    t = time.perf_counter()
                    again = MetricsSource(path, root=root, cache=ColumnarCache(place, root))
                    again.poll()
                    times.append(time.perf_counter() - t)
                assert again.cache_hit, again.cache.last_error

            cached = again.cache.open(path, 0)
            assert cached is not None
            header, table = _read_header(cached.fd)
            t = time.perf_counter()
            assert rows_problem(table, header) is None
            rows.append(time.perf_counter() - t)
            t = time.perf_counter()
            blocks = source_blocks(again.tail, header.fingerprint)
            assert blocks is not None and source_problem(cached.state(), blocks, set()) is None
            source.append(time.perf_counter() - t)
        size = cache_file.stat().st_size
        o, b, r, s = (statistics.median(x) for x in (opens, bare, rows, source))
        print(f"{args.steps:,} rows, cache file {size / 1e6:.0f} MB, {args.rounds} rounds (medians)")
        print(f"  open from the cache, checked:        {o * 1e3:7.1f} ms")
        print(f"  open from the cache, checks off:     {b * 1e3:7.1f} ms  (baseline)")
        print(f"    rows against header + CRC-32:      {r * 1e3:7.1f} ms")
        print(f"    rows against the JSONL's lines:    {s * 1e3:7.1f} ms")
        print(f"  checked / baseline: {o / b:.2f}x (+{(o - b) * 1e3:.0f} ms on a first chart from the cache)")


@contextlib.contextmanager
def _checks(on: bool) -> Iterator[None]:
    """Both proofs as they are, or switched off (the baseline: the cache trusted as before)."""
    from monitor_cb.ingest import cacheproof, source

    if on:
        yield
        return
    saved = cacheproof.rows_problem, source.MetricsSource._cache_disagrees
    cacheproof.rows_problem = lambda table, header: None  # type: ignore[assignment]
    source.MetricsSource._cache_disagrees = lambda self, cached, table: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        cacheproof.rows_problem, source.MetricsSource._cache_disagrees = saved


if __name__ == "__main__":
    main()
