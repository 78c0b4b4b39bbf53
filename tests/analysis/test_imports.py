"""The analysis and chart layers stay free of Streamlit and MindSpore (ARCHITECTURE.md)."""

from __future__ import annotations

import subprocess
import sys


def test_no_streamlit_or_mindspore_imported():
    code = (
        "import sys, monitor_cb.analysis.smoothing, monitor_cb.analysis.downsample, monitor_cb.analysis.series, "
        "monitor_cb.charts.figures, monitor_cb.samples\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('streamlit', 'mindspore', 'mindformers'))\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_analysis_does_not_need_plotly():
    code = (
        "import sys, monitor_cb.analysis.smoothing, monitor_cb.analysis.downsample, monitor_cb.analysis.series\n"
        "print('plotly' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
