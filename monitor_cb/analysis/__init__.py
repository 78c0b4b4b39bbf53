"""Pure analysis of run frames: smoothing, downsampling, series helpers (numpy/pandas only).

Nothing here imports Streamlit, plotly or MindSpore, so pages, charts and tests share it.
"""
