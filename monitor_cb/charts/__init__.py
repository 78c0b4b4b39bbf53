"""Plotly figure builders for the dashboard; they return ``go.Figure`` and never call Streamlit."""
