"""An uploaded metrics file, checked and parsed in memory (never written to disk).

Accepted: the collector's JSONL (``"NaN"``/``"Infinity"`` strings) and the origin article's plain
``json.dumps`` lines (bare ``NaN``/``Infinity`` tokens, time as ``ts``). Refused with a message that
says why: too large, empty, binary (NUL bytes, a compressed archive, not UTF-8), or text whose lines
are not JSON objects. A few bad lines among good ones are skipped and counted, as for files on disk
(a line with a bad step, or a text value under a numeric key: see ``docs/FORMAT.md``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

ENV_MAX_MB = "MONITOR_UPLOAD_MAX_MB"
# A 1M-step run of the collector is about 220-250 MB. Parsing it takes about 1.6x the file's size
# on top of the file itself (bench/bench_upload.py: 218 MB -> 338 MB extra peak). Streamlit's
# uploader writes a limit above 500 MB as "1GB".
DEFAULT_MAX_MB = 400
# Magic numbers of formats people drop by mistake: gzip, zip, zstd, bzip2, xz, parquet, tfevents are caught by NUL.
_MAGIC = {
    b"\x1f\x8b": "a gzip archive",
    b"PK\x03\x04": "a zip archive",
    b"\x28\xb5\x2f\xfd": "a zstd archive",
    b"BZh": "a bzip2 archive",
    b"\xfd7zXZ": "an xz archive",
    b"PAR1": "a Parquet file",
}
_MIN_GOOD_FRACTION = 0.5


class UploadError(ValueError):
    """The upload was refused; the message says why and what to do."""


@dataclass(frozen=True)
class ParsedUpload:
    """A parsed upload: the run frame, its "was logged" masks, and what was skipped."""

    name: str
    frame: pd.DataFrame
    logged: dict[str, np.ndarray] = field(default_factory=dict)
    records: int = 0
    bad_lines: int = 0  # lines with a problem: skipped, or partly read (see partial_lines)
    partial_lines: int = 0  # of bad_lines: kept with a bad value dropped


def max_upload_bytes(env: dict[str, str] | None = None) -> int:
    """The size cap: ``$MONITOR_UPLOAD_MAX_MB`` megabytes, default :data:`DEFAULT_MAX_MB`."""
    value = (env if env is not None else os.environ).get(ENV_MAX_MB)
    try:
        mb = float(value) if value else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return int(max(mb, 0.001) * 1024 * 1024)


def check_size(size: int, cap: int) -> None:
    """Refuse an upload larger than ``cap`` bytes before reading it."""
    if size > cap:
        raise UploadError(
            f"The file is {size / 2**20:,.1f} MB; uploads are limited to {cap / 2**20:,.3g} MB. "
            f"Put the run under the log root instead, or raise {ENV_MAX_MB} and server.maxUploadSize."
        )


def sniff(data: bytes) -> None:
    """Refuse what is clearly not a JSONL text file (raises :class:`UploadError`)."""
    if not data or data.isspace():  # not data.strip(): that would copy a 250 MB upload once more
        raise UploadError("The file is empty.")
    for magic, what in _MAGIC.items():
        if data.startswith(magic):
            raise UploadError(f"This is {what}, not a JSONL text file. Unpack it and upload the .jsonl file.")
    head = data[: 1 << 16]
    if b"\x00" in head:
        raise UploadError("This is a binary file (it holds NUL bytes), not a JSONL text file.")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # a multi-byte character cut at the end of the sample is fine
            raise UploadError("This file is not UTF-8 text; a metrics file is JSON lines in UTF-8.") from None


def parse_upload(name: str, data: bytes, cap: int | None = None) -> ParsedUpload:
    """Check and parse an uploaded metrics file entirely in memory.

    Raises:
        UploadError: too large, not text, or not JSON lines (the message is meant for the user).
    """
    from monitor_cb.ingest.parse import ChunkParser
    from monitor_cb.ingest.table import RankTable

    check_size(len(data), max_upload_bytes() if cap is None else cap)
    sniff(data)
    if not data.endswith(b"\n"):
        data += b"\n"  # a complete upload: its last line is complete too
    batch, bad = ChunkParser().parse(data, 0)
    table = RankTable()
    table.append(batch)
    _, frame, masks = table.frame_and_masks()
    records = len(batch)
    if records == 0:
        reason = f" (first problem: {bad[0].reason})" if bad else ""
        raise UploadError(f"No JSON object lines found in {name!r}{reason}. Upload a metrics .jsonl file.")
    skipped = sum(1 for item in bad if not item.partial)  # lines left out (not those missing one value)
    if records < _MIN_GOOD_FRACTION * (records + skipped):
        raise UploadError(
            f"{skipped:,} of {records + skipped:,} lines of {name!r} could not be read "
            f"(first: {bad[0].reason}); this does not look like a metrics file."
        )
    if len(frame) == 0:
        raise UploadError(f"{name!r} holds JSON lines but none with a training step.")
    logged = {k: np.asarray(v, bool) for k, v in masks.items()}
    return ParsedUpload(name, frame, logged, records, len(bad), len(bad) - skipped)
