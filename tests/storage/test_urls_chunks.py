"""URL parsing, options, redaction and the chunk names: pure functions, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor_cb.storage.chunks import chunk_dir_name, chunk_name, contiguous_end, metrics_name_of, parse_chunk_name
from monitor_cb.storage.urls import (
    RemoteURL,
    clean_url,
    is_url,
    parse_url,
    redact_credentials,
    state_dir,
    storage_options,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("s3://bucket/prefix", True),
        ("obs://bucket", True),
        ("memory://x/y", True),
        ("file:///tmp/logs", False),
        ("logs/exp001", False),
        ("/abs/path", False),
        ("C:/windows", False),
    ],
)
def test_is_url(value: str, expected: bool) -> None:
    assert is_url(value) is expected


def test_parse_url_splits_credentials_off_and_keeps_them_for_the_bucket() -> None:
    remote, creds = parse_url("s3://AKID1234:pa%2Fss-word-9@bucket-a/runs/exp1/")
    assert remote == RemoteURL("s3", "bucket-a/runs/exp1")
    assert creds == {"key": "AKID1234", "secret": "pa/ss-word-9"}
    assert str(remote) == "s3://bucket-a/runs/exp1"
    # A later open of the same bucket without credentials in the URL finds them.
    assert parse_url("s3://bucket-a/other")[1] == creds
    assert clean_url("s3://AKID1234:pa%2Fss-word-9@bucket-a/runs") == "s3://bucket-a/runs"
    assert "pa/ss-word-9" not in redact_credentials("failed: pa/ss-word-9 at s3://AKID1234:x@bucket-a/k")


def test_obs_is_s3_through_its_endpoint() -> None:
    assert parse_url("obs://bucket/p")[0] == RemoteURL("s3", "bucket/p")


@pytest.mark.parametrize("bad", ["s3://", "s3:///prefix", "s3://bucket/../x", "s3://bucket/p?versionId=1", "notaurl"])
def test_parse_url_rejects_bad_urls(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_url(bad)


def test_bad_url_message_does_not_echo_the_secret() -> None:
    with pytest.raises(ValueError) as info:
        parse_url("s3://key:TOPSECRETVALUE@bucket/p?x=1")
    assert "TOPSECRETVALUE" not in str(info.value)


def test_storage_options_endpoint_precedence() -> None:
    remote = RemoteURL("s3", "b/p")
    env = {"AWS_ENDPOINT_URL": "http://aws-env", "MONITOR_STORAGE_OPTIONS": '{"anon": false}'}
    assert storage_options(remote, env=env) == {"anon": False, "endpoint_url": "http://aws-env"}
    env["MONITOR_ENDPOINT_URL"] = "http://ours"
    assert storage_options(remote, env=env)["endpoint_url"] == "http://ours"
    assert storage_options(remote, endpoint_url="http://arg", env=env)["endpoint_url"] == "http://arg"
    # Other protocols take only the JSON options.
    assert "endpoint_url" not in storage_options(RemoteURL("gcs", "b"), env=env)


def test_storage_options_bad_json_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="MONITOR_STORAGE_OPTIONS"):
        storage_options(RemoteURL("s3", "b"), env={"MONITOR_STORAGE_OPTIONS": "{nope"})


def test_redact_masks_env_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-value-123")
    assert redact_credentials("argv: --secret env-secret-value-123") == "argv: --secret ***"


def test_state_dir_is_local_for_a_url(tmp_path: Path) -> None:
    env = {"MONITOR_STATE_DIR": str(tmp_path)}
    assert state_dir("logs/x", env) == Path("logs/x")
    remote = state_dir("s3://bucket/prefix", env)
    assert remote.parent == tmp_path / "remote"
    assert remote.name.startswith("s3_bucket_prefix-")
    assert state_dir("s3://bucket/other", env) != remote


def test_chunk_names_sort_by_offset_and_round_trip() -> None:
    names = [chunk_name(s, e) for s, e in [(0, 10), (10, 200), (200, 10_000_000_000)]]
    assert names == sorted(names)
    assert [parse_chunk_name(n) for n in names] == [(0, 10), (10, 200), (200, 10_000_000_000)]
    assert parse_chunk_name("0000000000000005-0000000000000005.jsonl") is None  # empty range
    assert parse_chunk_name("notes.txt") is None
    with pytest.raises(ValueError):
        chunk_name(5, 5)
    assert chunk_dir_name("metrics.rank3.jsonl") == "metrics.rank3.jsonl.chunks"
    assert metrics_name_of("metrics.rank3.jsonl.chunks") == "metrics.rank3.jsonl"
    assert metrics_name_of("other.chunks") is None


def test_contiguous_end_stops_at_a_gap_and_allows_overlaps() -> None:
    assert contiguous_end([]) == 0
    assert contiguous_end([(0, 10), (10, 20), (30, 40)]) == 20
    assert contiguous_end([(0, 10), (5, 25), (10, 20)]) == 25
    assert contiguous_end([(5, 10)]) == 0


def test_userinfo_after_any_scheme_is_masked_and_a_long_word_is_scanned_once() -> None:
    text = "https://bob:pw@x.example.com/y s3://k:s@b/x 1https://u:p@h no://@ plain@mail"
    assert redact_credentials(text) == "https://***@x.example.com/y s3://***@b/x 1https://***@h no://***@ plain@mail"
    # A shared root's config text of 100 kB of letters took 22 s: the scheme was tried from every letter, each
    # try scanning the rest of the word. Judged against text of the same size broken into words (linear for any
    # pattern), each the best of 5, so the machine's speed and load cancel: quadratic was over 1,000x.
    import timeit

    word, words = "y" * 200_000, "y " * 100_000
    ratio = min(timeit.repeat(lambda: redact_credentials(word), number=1, repeat=5)) / min(
        timeit.repeat(lambda: redact_credentials(words), number=1, repeat=5)
    )
    assert ratio < 20
