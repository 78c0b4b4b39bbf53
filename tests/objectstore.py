"""A real S3 API server for the tests: moto's standalone server on 127.0.0.1, and a TCP proxy to cut.

``moto_server`` (session) starts ``ThreadedMotoServer`` on a free port; ``s3_env`` points the SDK at
it with throw-away credentials (the user's ``~/.aws`` never read) and gives each test its own
bucket. ``TcpProxy`` forwards a local port to the server; ``cut()`` resets every connection and
refuses new ones (a lost network), ``restore()`` lets traffic through again.
Import the fixtures into a ``conftest.py``: ``from tests.objectstore import moto_server, s3_env``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Recognisable values: tests assert they never appear in files, logs or pages.
SECRET = "sEcReT-do-not-show-0123456789abcdef"
KEY_ID = "AKIDTESTKEYIDVALUE42"
_buckets = itertools.count(1)


@dataclass(frozen=True)
class S3Env:
    """The endpoint and bucket a test uses."""

    endpoint: str
    bucket: str

    def url(self, *parts: str) -> str:
        return "s3://" + "/".join([self.bucket, *parts])


def s3_environment(endpoint: str, home: Path) -> dict[str, str]:
    """Environment variables for a process talking to the test server (and to nothing else)."""
    return {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "MONITOR_ENDPOINT_URL": endpoint,
        "MONITOR_STATE_DIR": str(home / "state"),
    }


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a moto S3 server running for the whole session."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_env(moto_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> S3Env:
    """A fresh bucket on the test server, and this process's environment pointed at it."""
    for name, value in s3_environment(moto_server, tmp_path).items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "MONITOR_STORAGE_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    bucket = f"test-{os.getpid()}-{next(_buckets)}"
    make_bucket(moto_server, bucket)
    return S3Env(moto_server, bucket)


def make_bucket(endpoint: str, bucket: str) -> None:
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=bucket)


def list_keys(endpoint: str, bucket: str, prefix: str = "") -> dict[str, bytes]:
    """Every object under ``prefix`` with its bytes (through boto3, independent of the code under test)."""
    import boto3

    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET, region_name="us-east-1"
    )
    out: dict[str, bytes] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            out[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return out


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to a target; ``cut()`` drops every connection until ``restore()``.

    ``delay_s`` holds each reply back that long (a network round trip, as to a real bucket; benchmarks).
    """

    def __init__(self, target: str, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        host, _, port = target.rpartition("//")[2].partition(":")
        self.target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True, name="tcp-proxy").start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        self._open.clear()
        with self._lock:
            for sock in list(self._sockets):
                _close(sock)
            self._sockets.clear()

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._open.is_set():
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            self.connections += 1
            with self._lock:
                self._sockets.update((client, upstream))
            for a, b, delay in ((client, upstream, 0.0), (upstream, client, self.delay_s)):
                threading.Thread(target=self._pump, args=(a, b, delay), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, delay: float = 0.0) -> None:
        try:
            while self._open.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if delay:
                    time.sleep(delay)  # emulated latency (benchmarks only), not a wait in a test
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)
            with self._lock:
                self._sockets.discard(source)
                self._sockets.discard(sink)


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    _close(sock)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05, message: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy; fail with ``message`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)
