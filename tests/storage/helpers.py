"""Reading a bucket back independently of the code under test (boto3), to compare with local files."""

from __future__ import annotations

import json
from pathlib import Path

from monitor_cb.storage.chunks import parse_chunk_name
from tests.objectstore import list_keys


def chunk_spans(objects: dict[str, bytes], chunk_dir: str) -> list[tuple[int, int]]:
    """The byte ranges of the chunk objects under ``chunk_dir`` (a key prefix), in key order."""
    spans = []
    for key in sorted(objects):
        if key.startswith(chunk_dir + "/"):
            span = parse_chunk_name(key.rsplit("/", 1)[1])
            assert span is not None, f"foreign object {key}"
            spans.append(span)
    return spans


def assembled(objects: dict[str, bytes], chunk_dir: str) -> bytes:
    """The file the chunks make, asserting they tile it exactly: no gap, no overlap, sizes as named."""
    out = b""
    for key in sorted(objects):
        if not key.startswith(chunk_dir + "/"):
            continue
        start, end = parse_chunk_name(key.rsplit("/", 1)[1]) or (-1, -1)
        data = objects[key]
        assert start == len(out), f"{key}: starts at {start}, expected {len(out)} (gap or overlap)"
        assert len(data) == end - start, f"{key}: {len(data)} bytes, name says {end - start}"
        assert data.endswith(b"\n"), f"{key}: not a closed chunk of complete lines"
        out += data
    return out


def bucket_matches_local(endpoint: str, bucket: str, prefix: str, local_run: Path) -> None:
    """Every local metrics file is in the bucket byte for byte, and every metadata file as it is now."""
    objects = list_keys(endpoint, bucket, prefix)
    for path in sorted(local_run.glob("*.jsonl")):
        assert assembled(objects, f"{prefix}/{path.name}.chunks") == path.read_bytes(), path.name
    for meta in sorted(local_run.glob("*.meta.json")):
        assert json.loads(objects[f"{prefix}/{meta.name}"]) == json.loads(meta.read_bytes()), meta.name
