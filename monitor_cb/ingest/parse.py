"""Turn complete lines into a :class:`Batch`, choosing the parser by chunk size.

Small polls (the live case, a few lines) go through orjson line by line; large
chunks (a first load) through polars under a schema learned from a sample of lines.
The two paths give the same result; the slow one also decides every doubtful chunk.
"""

from __future__ import annotations

from typing import Any

from monitor_cb.ingest.batch import MIXED, Batch, adopt_legacy_time, records_to_batch, value_kind
from monitor_cb.ingest.bulk import decode_bulk
from monitor_cb.ingest.lines import DEFAULT_LINE_CAP, BadLine, decode_lines

BULK_MIN_BYTES = 256 * 1024  # below this, polars' fixed cost exceeds orjson per line
_SAMPLE_POINTS = 64
_SAMPLE_LINES = 16


class ChunkParser:
    """Parser state for one file: the kind of each key seen so far.

    Args:
        line_cap: lines longer than this many bytes are skipped as bad.
        bulk_min_bytes: chunks at least this large try the polars path first.
    """

    def __init__(self, line_cap: int = DEFAULT_LINE_CAP, bulk_min_bytes: int = BULK_MIN_BYTES) -> None:
        self.line_cap = line_cap
        self.bulk_min_bytes = bulk_min_bytes
        self.kinds: dict[str, str] = {}
        self.bulk_chunks = 0  # how many chunks the fast path decoded (for tests and benchmarks)

    def parse(self, data: bytes, base_offset: int) -> tuple[Batch, list[BadLine]]:
        """Decode ``data`` (complete lines) read at file offset ``base_offset``."""
        if len(data) >= self.bulk_min_bytes:
            self._learn(decode_lines(_sample(data), 0, self.line_cap)[0])
            decoded = decode_bulk(data, self.kinds, self.line_cap)
            if decoded is not None:
                batch, kinds = decoded
                self.kinds.update(kinds)
                self.bulk_chunks += 1
                return adopt_legacy_time(batch), []
        records, bad = decode_lines(data, base_offset, self.line_cap)
        self._learn(records)
        return adopt_legacy_time(records_to_batch(records)), bad

    def _learn(self, records: list[dict[str, Any]]) -> None:
        kinds = self.kinds
        for record in records:
            for key, value in record.items():
                kind = value_kind(value)
                if kind is None:
                    continue
                known = kinds.get(key)
                if known is None:
                    kinds[key] = kind
                elif known != kind:
                    kinds[key] = MIXED


def _sample(data: bytes) -> bytes:
    """A few lines from evenly spaced places, plus the first and last ones: enough to learn the keys."""
    size = len(data)
    pieces: list[bytes] = []
    for i in range(_SAMPLE_POINTS + 1):
        start = 0 if i == 0 else data.find(b"\n", size * i // (_SAMPLE_POINTS + 1)) + 1
        if start <= 0 and i:
            continue
        end = start
        for _ in range(_SAMPLE_LINES):
            nxt = data.find(b"\n", end)
            if nxt < 0:
                break
            end = nxt + 1
        pieces.append(data[start:end])
    tail_start = data.rfind(b"\n", 0, max(size - 4096, 0)) + 1
    pieces.append(data[tail_start:])
    return b"".join(pieces)
