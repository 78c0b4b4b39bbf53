"""Turn complete lines into a :class:`Batch`, choosing the parser by chunk size.

Small polls (the live case, a few lines) go through orjson line by line; large
chunks (a first load) through polars under a schema learned from a sample of lines.
The two paths give the same result; where polars declines, smaller and smaller pieces
are retried and the last doubtful ones are read line by line.

A key is numeric once any line of the file holds a number under it (and always for the
format's numeric keys, ``loss``, ``lr``, ``eval_*``, ...): a text value under it is then a
bad value, skipped and counted, and the column stays numeric. A key that turns numeric
after its text was handed out sets :attr:`ChunkParser.reread`: the caller reads the file
again from the start with what the parser has learned.
"""

from __future__ import annotations

import itertools
from typing import Any

from monitor_cb.ingest.batch import (
    FLOAT,
    MIXED,
    NUMERIC_KINDS,
    TEXT,
    Batch,
    adopt_legacy_time,
    concat_batches,
    records_to_batch,
    value_kind,
)
from monitor_cb.ingest.bulk import decode_bulk
from monitor_cb.ingest.lines import DEFAULT_LINE_CAP, BadLine, decode_lines
from monitor_cb.record import is_numeric_key

BULK_MIN_BYTES = 256 * 1024  # below this, polars' fixed cost exceeds orjson per line
SPLIT_WAYS = 16  # a chunk polars declines is retried in this many pieces...
SPLIT_MIN_BYTES = 64 * 1024  # ...until pieces are this small: then line by line
_SAMPLE_POINTS = 64
_SAMPLE_LINES = 16
# A point's lines stop after this many bytes (one line at least): 16 lines of a run with 5,000
# metrics are 1.6 MB, and learning the kinds costs a Python step per value sampled.
_SAMPLE_POINT_BYTES = 16 * 1024
_PLAIN_NUMBERS = frozenset((int, float))  # not bool: type(True) is bool


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
        self.reread = False  # a key turned numeric after its text values were handed out
        self._texts_out: set[str] = set()  # keys with text values in batches handed out

    def restart(self) -> None:
        """Forget what was handed out (the caller reads the file again), keep the kinds learned."""
        self.reread = False
        self._texts_out.clear()

    def parse(self, data: bytes, base_offset: int) -> tuple[Batch, list[BadLine]]:
        """Decode ``data`` (complete lines) read at file offset ``base_offset``."""
        batch, bad = self._parse(data, base_offset)
        if any(self.kinds.get(key) in NUMERIC_KINDS for key in batch.texts):
            # A key turned numeric in a later piece of this chunk: read it again knowing that.
            batch, bad = self._parse(data, base_offset)
        self._texts_out.update(batch.texts)
        return batch, bad

    def parse_file(self, path: str, mapped: Any, size: int) -> Batch | None:
        """A whole file of complete lines (mapped, ``size`` bytes) read by polars
        itself; None when the fast path is not sure (the caller then reads it the usual way)."""
        from monitor_cb.ingest.bulk import decode_bulk_file

        self._learn(decode_lines(_sample(mapped), 0, self.line_cap)[0])
        decoded = decode_bulk_file(path, mapped, size, self.kinds, self.line_cap)
        if decoded is None:
            return None
        batch, kinds = decoded
        for key, kind in kinds.items():
            if self.kinds.get(key) != kind:
                self._set_kind(key, kind)
        if any(self.kinds.get(key) in NUMERIC_KINDS for key in batch.texts):
            return None
        self.bulk_chunks += 1
        self._texts_out.update(batch.texts)
        return adopt_legacy_time(batch)

    def _parse(self, data: bytes, base_offset: int) -> tuple[Batch, list[BadLine]]:
        if len(data) < self.bulk_min_bytes:
            return self._careful(data, base_offset)
        self._learn(decode_lines(_sample(data), 0, self.line_cap)[0])
        batches: list[Batch] = []
        bad: list[BadLine] = []
        self._bulk_or_split(data, base_offset, batches, bad)
        if len(batches) > 1:
            bad.sort(key=lambda item: item.offset)
        return adopt_legacy_time(concat_batches(batches)), bad

    def _bulk_or_split(self, data: bytes, offset: int, batches: list[Batch], bad: list[BadLine]) -> None:
        """polars on the whole; where it declines, on pieces, down to small ones read line by line.

        One torn line (a crash, then a resume) thus costs a few polars calls on shrinking
        pieces, not a line-by-line pass over a million lines.
        """
        decoded = decode_bulk(data, self.kinds, self.line_cap)
        if decoded is not None:
            batch, kinds = decoded
            for key, kind in kinds.items():
                if self.kinds.get(key) != kind:
                    self._set_kind(key, kind)
            self.bulk_chunks += 1
            batches.append(batch)
            return
        cuts = sorted(
            {0, len(data), *(data.find(b"\n", len(data) * i // SPLIT_WAYS) + 1 for i in range(1, SPLIT_WAYS))}
        )
        if len(data) <= max(SPLIT_MIN_BYTES, self.bulk_min_bytes) or len(cuts) <= 2:  # small, or one long line
            batch, more_bad = self._careful(data, offset, adopt=False)
            batches.append(batch)
            bad.extend(more_bad)
            return
        for start, end in itertools.pairwise(cuts):
            self._bulk_or_split(data[start:end], offset + start, batches, bad)

    def _careful(self, data: bytes, offset: int, adopt: bool = True) -> tuple[Batch, list[BadLine]]:
        offsets: list[int] = []
        records, bad = decode_lines(data, offset, self.line_cap, offsets)
        self._learn(records)
        problems: list[tuple[int, str, bool]] = []
        batch = records_to_batch(records, self._numeric, problems)
        if problems:
            bad = _merge_bad(bad, problems, offsets)
        return (adopt_legacy_time(batch) if adopt else batch), bad

    def _numeric(self, key: str) -> bool:
        return self.kinds.get(key) in NUMERIC_KINDS

    def _learn(self, records: list[dict[str, Any]]) -> None:
        kinds = self.kinds
        for record in records:
            for key, value in record.items():
                # Most values are plain numbers: decided here, without a call per value.
                kind = FLOAT if type(value) in _PLAIN_NUMBERS else value_kind(value)
                if kind is not None and kinds.get(key) != kind:
                    self._set_kind(key, kind)

    def _set_kind(self, key: str, kind: str) -> None:
        """Record that ``key`` held a value of ``kind``: numbers win over text, for good."""
        known = self.kinds.get(key)
        if known is None:
            # The format's numeric keys (loss, lr, ...) are numbers even when text comes first.
            new = FLOAT if kind == TEXT and is_numeric_key(key) else kind
        elif known in (kind, MIXED) or kind == TEXT:
            return  # text under a numeric key is a bad value, not a change of kind
        elif known == TEXT:
            new = kind
            if key in self._texts_out:
                self.reread = True  # text of this key is already out, as a column: read the file again
        else:
            new = MIXED  # numbers and booleans
        self.kinds[key] = new


def _merge_bad(bad: list[BadLine], problems: list[tuple[int, str, bool]], offsets: list[int]) -> list[BadLine]:
    """Bad lines plus lines with a bad step or value: one entry per line, in file order."""
    seen: dict[int, BadLine] = {}
    for index, reason, partial in problems:
        offset = offsets[index]
        if offset not in seen:
            seen[offset] = BadLine(offset, reason, partial)
    merged = bad + list(seen.values())
    merged.sort(key=lambda item: item.offset)
    return merged


def _sample(data: bytes) -> bytes:
    """A few lines from evenly spaced places, plus the first and last ones: enough to learn the keys.

    Each line is taken once (the places of a short file overlap) and each place gives at most
    :data:`_SAMPLE_POINT_BYTES` (whole lines, one at least), so the sample never outgrows the data
    and a wide run's sample is a few lines, not a thousand.
    """
    size = len(data)
    pieces: list[bytes] = []
    taken = 0  # the sample so far covers data[:taken] where it touched it; no line is taken twice
    for i in range(_SAMPLE_POINTS + 1):
        start = 0 if i == 0 else data.find(b"\n", size * i // (_SAMPLE_POINTS + 1)) + 1
        if start <= 0 and i:
            continue
        start = max(start, taken)
        end = start
        for _ in range(_SAMPLE_LINES):
            nxt = data.find(b"\n", end)
            if nxt < 0:
                break
            end = nxt + 1
            if end - start >= _SAMPLE_POINT_BYTES:
                break
        if end > start:
            pieces.append(data[start:end])
            taken = end
    tail_start = max(data.rfind(b"\n", 0, max(size - 4096, 0)) + 1, taken)
    pieces.append(data[tail_start:])
    return b"".join(pieces)
