"""Streamlit's own floor for ``bench/bench_tensorboard.py``: one Plotly line of 1,000 points and nothing else.

What any Streamlit app pays to show one chart (server, bundles, websocket, Plotly's module, the draw): the
project's floor minus this is what its own page adds. The chart sits where the benchmark looks for the
Live page's loss chart (container key ``chart_loss_lr``, a trace named ``loss``). ``--logdir`` is ignored.
"""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.set_page_config(layout="wide")
steps = np.arange(1, 1001)
with st.container(key="chart_loss_lr"):
    st.plotly_chart(go.Figure(go.Scatter(x=steps, y=2.0 / np.sqrt(steps), name="loss")), key="floor_chart")
