"""Small helpers to write metrics files byte by byte, as a writer (or a crash) would."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson

from monitor_cb.record import encode_record


def line(record: dict[str, Any]) -> bytes:
    """One line as the collector writes it (strict JSON, "NaN" strings)."""
    return orjson.dumps(encode_record(record)) + b"\n"


def legacy_line(record: dict[str, Any]) -> bytes:
    """One line as plain ``json.dumps`` writes it (bare NaN tokens, spaces)."""
    return (json.dumps(record) + "\n").encode()


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def records(first: int, last: int, **extra: Any) -> bytes:
    """Lines for steps first..last (inclusive) with a loss that tells them apart."""
    return b"".join(line({"step": s, "t": 1000.0 + s, "loss": 1.0 / s, **extra}) for s in range(first, last + 1))


def drain(tail: Any) -> tuple[list[bytes], int]:
    """Poll a FileTail once: (complete lines read, resets seen)."""
    out: list[bytes] = []
    resets = 0
    for item in tail.poll():
        if getattr(item, "reset", False):
            resets += 1
        data = getattr(item, "data", b"")
        out.extend(data.splitlines())
    return out, resets


def replace_file(path: Path, data: bytes) -> None:
    """Atomically put a new file at ``path`` (temp file + rename), as log rotation does."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)
