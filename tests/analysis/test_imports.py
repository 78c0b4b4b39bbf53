"""The analysis layer needs no plotly (the Streamlit and MindSpore boundaries: tests/test_imports.py)."""

from __future__ import annotations

import subprocess
import sys


def test_analysis_does_not_need_plotly():
    code = (
        "import sys, monitor_cb.analysis.smoothing, monitor_cb.analysis.downsample, monitor_cb.analysis.series\n"
        "print('plotly' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
