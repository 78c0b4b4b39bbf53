"""Suite-wide setup.

MindSpore's generated protobuf modules need the pure-Python protobuf backend; importing it picks
that backend only when protobuf is not loaded yet. Streamlit (AppTests) and tensorboardX load
protobuf first, so the whole suite uses the pure-Python backend, as a MindSpore process does.
"""

import os
import sys
from collections.abc import Iterator

import pytest

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

# Fixtures for the object-storage tests (a moto S3 server on 127.0.0.1): moto_server, s3_env.
pytest_plugins = ["tests.objectstore"]


@pytest.fixture(autouse=True, scope="module")
def _browser_per_module() -> Iterator[None]:
    """A test module's pages share one Chromium (``tests.browser.harness.chromium_page``), stopped when the
    module ends: Playwright's sync API leaves its event loop set on the thread while it runs, and a later
    module's ``asyncio.run()`` then fails ("cannot be called from a running event loop")."""
    yield
    harness = sys.modules.get("tests.browser.harness")
    if harness is not None:
        harness.stop_browser()
