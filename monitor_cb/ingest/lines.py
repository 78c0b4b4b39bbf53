"""Decode complete lines one by one with orjson: the robust path, and the fast one for small polls.

Every way a line can be wrong (bad JSON, NUL bytes, invalid UTF-8, too long, not an
object, nesting or numbers that bomb a parser) ends as a :class:`BadLine`, never as
an exception; the lines around it are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

DEFAULT_LINE_CAP = 1 << 20  # bytes; a metrics line is ~300 bytes, 1 MiB is surely garbage


@dataclass(frozen=True)
class BadLine:
    """A skipped line: where it starts in the file and why it was skipped.

    ``partial``: the line was read and only a value on it was skipped (text under a numeric key).
    """

    offset: int
    reason: str
    partial: bool = False


def _lenient_loads(line: bytes) -> Any:
    """stdlib json accepts the bare NaN / Infinity tokens plain ``json.dumps`` writes."""
    return json.loads(line.decode("utf-8"))


def decode_line(line: bytes, line_cap: int = DEFAULT_LINE_CAP) -> dict[str, Any] | str:
    """One line (without its newline) as a dict, or the reason it is bad."""
    if len(line) > line_cap:
        return f"line longer than {line_cap} bytes"
    if b"\x00" in line:
        return "NUL byte"
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            record = _lenient_loads(line)
        except UnicodeDecodeError:
            return "invalid UTF-8"
        except (ValueError, RecursionError):
            return f"invalid JSON: {str(exc)[:80]}"
    if not isinstance(record, dict):
        return f"not a JSON object ({type(record).__name__})"
    return record


def decode_lines(
    data: bytes, base_offset: int, line_cap: int = DEFAULT_LINE_CAP, offsets: list[int] | None = None
) -> tuple[list[dict[str, Any]], list[BadLine]]:
    """Decode ``data`` (complete lines, each ending in ``\\n``) starting at file offset ``base_offset``.

    ``offsets``, when given, receives the file offset of each returned record's line.
    """
    records: list[dict[str, Any]] = []
    bad: list[BadLine] = []
    offset = base_offset
    for line in data.split(b"\n")[:-1]:
        start = offset
        offset += len(line) + 1
        if not line.strip():
            continue
        result = decode_line(line, line_cap)
        if isinstance(result, str):
            bad.append(BadLine(start, result))
        else:
            records.append(result)
            if offsets is not None:
                offsets.append(start)
    return records, bad
