"""The wheel: built from the sources, installed into a fresh venv outside the checkout, ``monitor-cb dashboard`` serves.

Proves that the installed package alone runs the dashboard: the venv has only the wheel (no
checkout on ``sys.path``, no ``PYTHONPATH``, started from a directory without ``.streamlit/``);
the third-party dependencies come from the suite's own environment through a path file (adding
them as a plain path runs none of that environment's ``.pth`` files, so its editable install of
this project stays out). Checked: ``monitor_cb`` imports from the venv, the server answers its
health check on 127.0.0.1, and a real Chromium renders the live page with the run's chart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor_cb.train.writer import MetricsWriter
from tests.browser.harness import browser_missing, chart_state, chromium_page, free_port, poll

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "dashboard.py", "pages", "monitor_cb")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MONITOR_", "VIRTUAL_ENV"))}
    env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (an in-tree build would leave build/ in the checkout)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    dist = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
        cwd=base,
        check=True,
        timeout=300,
        capture_output=True,
    )
    (built,) = dist.glob("monitor_cb-*.whl")
    return built


def test_the_wheel_holds_every_subpackage_and_the_app(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {p.parent.relative_to(REPO).as_posix() for p in (REPO / "monitor_cb").rglob("__init__.py")}
    packages -= {"monitor_cb/testing"}  # the tests' harness stays out of the wheel
    missing = sorted(p for p in packages if f"{p}/__init__.py" not in names)
    assert not missing, f"add them to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert "monitor_cb/app/dashboard.py" in names and "monitor_cb/app/pages/live_page.py" in names
    assert "monitor_cb/py.typed" in names
    assert not any(n.startswith(("tests/", "bench/", "pages/", "monitor_cb/testing/")) for n in names)


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the checkout with only the wheel installed."""
    home = tmp_path_factory.mktemp("venv")
    env = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    python = env / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        env=_clean_env(),
    ).stdout.strip()
    deps = sysconfig.get_paths()["purelib"]  # this suite's environment: streamlit, pandas, plotly, ...
    Path(purelib, "_suite_dependencies.pth").write_text(deps + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    return env


def test_the_installed_package_is_the_one_imported(venv: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import monitor_cb, monitor_cb.cli; print(monitor_cb.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_clean_env(),
    ).stdout.strip()
    assert Path(out).is_relative_to(venv), out
    assert not Path(out).is_relative_to(REPO)


@pytest.fixture
def served(venv: Path, tmp_path: Path) -> Iterator[str]:
    """``monitor-cb dashboard --logdir LOGS --port P`` started from a directory without .streamlit/."""
    logs = tmp_path / "logs"
    with MetricsWriter(logs / "exp-wheel", extra_meta={"total_steps": 200}) as writer:
        for step in range(1, 201):
            writer.log(step=step, loss=2.0 / (1 + step / 50), lr=1e-3, grad_norm=1.0, throughput=100.0)
    port = free_port()
    log = tmp_path / "server.log"
    command = [str(venv / "bin" / "monitor-cb"), "dashboard", "--logdir", str(logs), "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=tmp_path, env=_clean_env(), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        poll(lambda: _healthy(url) or proc.poll() is not None, timeout=60, interval=0.1, what="the server")
        assert proc.poll() is None, log.read_text()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "Traceback" not in text, text


def _healthy(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
            return response.status == 200 and response.read() == b"ok"
    except OSError:
        return False


@pytest.mark.browser
def test_monitor_cb_dashboard_serves_the_live_page(served: str) -> None:
    missing = browser_missing()
    if missing:
        pytest.skip(missing)
    with chromium_page() as page:
        page.goto(f"{served}/?run=exp-wheel", wait_until="domcontentloaded")
        drawn = poll(lambda: chart_state(page, "chart_loss_lr", "loss"), timeout=60, what="the loss chart")
        assert drawn["maxX"] == 200 and drawn["n"] > 0
        page.get_by_text("exp-wheel", exact=False).first.wait_for()
        assert page.get_by_text("Traceback").count() == 0
