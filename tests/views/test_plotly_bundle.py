"""Plotly's basic bundle: only the pinned file is taken, from npm's package, and set-up installs it."""

from __future__ import annotations

import hashlib
import io
import stat
import tarfile
from pathlib import Path

import pytest

from monitor_cb.views import plotly_bundle
from monitor_cb.views.plotly_bundle import (
    MEMBER,
    bundle_from_package,
    configured_path,
    default_path,
    fetch,
    load_bundle,
)

FAKE = b"/* plotly.js basic */ window.Plotly = {version: '4.1.1'};\n"


@pytest.fixture
def pinned_fake(monkeypatch: pytest.MonkeyPatch) -> bytes:
    """The module's pin pointed at :data:`FAKE` (the real file is 1.2 MB and is tested below when installed)."""
    monkeypatch.setattr(plotly_bundle, "SHA256", hashlib.sha256(FAKE).hexdigest())
    return FAKE


def _package(files: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    """An npm package archive (``package/...`` members) as ``npm pack`` writes one."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return out.getvalue()


def test_only_the_pinned_file_is_loaded(tmp_path: Path, pinned_fake: bytes) -> None:
    good, bad, big = tmp_path / "good.js", tmp_path / "bad.js", tmp_path / "big.js"
    good.write_bytes(pinned_fake)
    bad.write_bytes(pinned_fake + b"alert(1)")
    with open(big, "wb") as f:  # sparse: past the cap without writing it
        f.truncate(plotly_bundle.SIZE_CAP + 10)
    assert load_bundle(good) == pinned_fake
    assert load_bundle(bad) is None and load_bundle(big) is None
    assert load_bundle(tmp_path / "missing.js") is None and load_bundle(tmp_path) is None and load_bundle(None) is None


def test_the_environment_variable_picks_the_file_or_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(plotly_bundle.ENV_BUNDLE, raising=False)
    assert configured_path() == default_path() and default_path().name == plotly_bundle.FILE_NAME
    monkeypatch.setenv(plotly_bundle.ENV_BUNDLE, "/somewhere/plotly.js")
    assert configured_path() == Path("/somewhere/plotly.js")
    monkeypatch.setenv(plotly_bundle.ENV_BUNDLE, " Off ")
    assert configured_path() is None


def test_the_file_comes_out_of_the_package_only_when_it_is_the_pinned_one(pinned_fake: bytes) -> None:
    assert bundle_from_package(_package({MEMBER: pinned_fake, "package/README.md": b"hi"})) == pinned_fake
    with pytest.raises(ValueError, match="SHA-256"):
        bundle_from_package(_package({MEMBER: pinned_fake + b" "}))
    with pytest.raises(KeyError):
        bundle_from_package(_package({"package/other.js": pinned_fake}))
    with pytest.raises(ValueError, match="not a file"):
        bundle_from_package(_package({}, links={MEMBER: "/etc/passwd"}))


def _fake_npm(tmp_path: Path, package: bytes | None) -> str:
    """An ``npm`` on disk that answers ``npm pack NAME --pack-destination DIR`` with ``package`` (None: fails)."""
    (tmp_path / "package.tgz").write_bytes(package or b"")
    script = tmp_path / "npm"
    fail = "echo 'npm error 404 Not Found' >&2; exit 1" if package is None else ""
    script.write_text(
        "#!/bin/sh\n"
        f"{fail}\n"
        'while [ "$1" != "--pack-destination" ]; do shift; done\n'
        f'cp "{tmp_path / "package.tgz"}" "$2/{plotly_bundle.PACKAGE}-{plotly_bundle.VERSION}.tgz"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_fetch_writes_the_checked_file(tmp_path: Path, pinned_fake: bytes) -> None:
    dest = tmp_path / "share" / "monitor_cb" / "plotly.js"
    npm = _fake_npm(tmp_path, _package({MEMBER: pinned_fake}))
    assert fetch(dest, npm=npm) == dest and dest.read_bytes() == pinned_fake
    assert not list(dest.parent.glob("*.part"))


@pytest.mark.parametrize("package", [None, _package({MEMBER: b"tampered"})])
def test_a_failed_or_tampered_fetch_writes_nothing_and_says_why(
    tmp_path: Path, pinned_fake: bytes, package: bytes | None
) -> None:
    dest = tmp_path / "plotly.js"
    with pytest.raises(RuntimeError, match=r"404|SHA-256"):
        fetch(dest, npm=_fake_npm(tmp_path, package))
    assert not dest.exists()


def test_fetch_without_npm_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="npm not found"):
        fetch(tmp_path / "plotly.js", npm=str(tmp_path / "no-npm"))


def test_set_up_installed_the_real_bundle() -> None:
    """``scripts/setup.sh`` (the test command's first step) fetched the pinned bundle where the dashboard looks."""
    body = load_bundle(default_path())
    assert body is not None, f"no {plotly_bundle.FILE_NAME} at {default_path()}: run scripts/setup.sh"
    assert b"window.Plotly = Plotly;" in body and b"plotly.js (basic - minified) v4.1.1" in body
