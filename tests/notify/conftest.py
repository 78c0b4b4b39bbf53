"""Local receivers on 127.0.0.1 only: an HTTP server and an SMTP server, each on port 0, in threads."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy; fail at the deadline (never a bare sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


@dataclass
class Request:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes
    time: float

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


@dataclass
class HttpReceiver:
    """Records POSTs. ``statuses`` is consumed one per request (then ``default_status``);
    ``hang`` makes it never answer (until teardown); ``delay`` answers after that many seconds (a slow
    receiver that still accepts); ``answer`` is the JSON body sent back."""

    server: ThreadingHTTPServer
    requests: list[Request] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    default_status: int = 200
    answer: dict[str, Any] = field(default_factory=dict)
    hang: bool = False
    delay: float = 0.0
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def bodies(self) -> list[Any]:
        with self.lock:
            return [r.json for r in self.requests]


def _make_handler(receiver_ref: list[HttpReceiver]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            rec = receiver_ref[0]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            parts = urlsplit(self.path)
            request = Request(parts.path, parse_qs(parts.query), dict(self.headers), raw, time.monotonic())
            with rec.lock:
                rec.requests.append(request)
                status = rec.statuses.pop(0) if rec.statuses else rec.default_status
            if rec.hang:
                rec.release.wait(60)  # released at teardown; the client must give up by its timeout
                return
            if rec.delay:
                rec.release.wait(rec.delay)  # the receiver's own slowness, cut short at teardown
            body = json.dumps(rec.answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def http_receiver() -> Iterator[Callable[..., HttpReceiver]]:
    """A factory: ``http_receiver(statuses=[500, 200], answer={"errcode": 0}, hang=False, port=0)``."""
    made: list[HttpReceiver] = []

    def make(port: int = 0, **kwargs: Any) -> HttpReceiver:
        ref: list[HttpReceiver] = []
        server = ThreadingHTTPServer(("127.0.0.1", port), _make_handler(ref))
        server.daemon_threads = True
        receiver = HttpReceiver(server, **kwargs)
        ref.append(receiver)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        receiver.release.set()
        receiver.server.shutdown()
        receiver.server.server_close()


# --- SMTP ----------------------------------------------------------------------------------


@dataclass
class SmtpReceiver:
    host: str
    port: int
    messages: list[dict[str, Any]]
    logins: list[tuple[str, str]]


@pytest.fixture
def smtp_receiver(tmp_path: Path) -> Iterator[Callable[..., SmtpReceiver]]:
    """A factory for an aiosmtpd server on 127.0.0.1; ``tls=True`` offers STARTTLS and requires login."""
    controller_mod = pytest.importorskip("aiosmtpd.controller")
    from aiosmtpd.smtp import AuthResult

    started: list[Any] = []

    class Handler:
        def __init__(self, receiver: SmtpReceiver) -> None:
            self.receiver = receiver

        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            self.receiver.messages.append(
                {"from": envelope.mail_from, "to": list(envelope.rcpt_tos), "data": envelope.content}
            )
            return "250 OK"

    class PortZeroController(controller_mod.Controller):
        def _trigger_server(self) -> None:
            self.port = self.server.sockets[0].getsockname()[1]  # the port the OS chose
            super()._trigger_server()

    def make(tls: bool = False) -> SmtpReceiver:
        receiver = SmtpReceiver("127.0.0.1", 0, [], [])
        kwargs: dict[str, Any] = {}
        if tls:
            import ssl

            cert, key = _self_signed(tmp_path)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert, key)

            def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
                login = data.login.decode()
                password = data.password.decode()
                receiver.logins.append((login, password))
                return AuthResult(success=password == "s3cret-pass", handled=False)

            kwargs = {
                "tls_context": context,
                "require_starttls": True,
                "authenticator": authenticator,
                "auth_require_tls": True,
            }
            receiver.cafile = str(cert)  # type: ignore[attr-defined]
        controller = PortZeroController(Handler(receiver), hostname="127.0.0.1", port=0, **kwargs)
        controller.start()
        receiver.port = controller.port
        started.append(controller)
        return receiver

    yield make
    for controller in started:
        controller.stop()


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
            "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    return cert, key


@pytest.fixture(autouse=True)
def own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The watcher keeps its state in the user's state folder: a temporary one here (subprocesses inherit it)."""
    folder = tmp_path / "own-state"
    monkeypatch.setenv("MONITOR_STATE_DIR", str(folder))
    return folder
