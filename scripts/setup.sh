#!/usr/bin/env bash
# Set up everything the product and its tests need, idempotently:
# a virtual environment in .venv with the pinned requirements, this package
# installed in editable mode, and Debian's Chromium and rsync for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  .venv/bin/python -m pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
# Debian packages the tests use: chromium (browser tests), rsync (a run copied as `rsync -a` copies it).
# SKIP_BROWSER=1 (the dashboard command) installs neither: the dashboard needs neither.
missing=()
if [ "${SKIP_BROWSER:-0}" != "1" ]; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v rsync >/dev/null 2>&1 || missing+=(rsync)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's ${missing[*]} for the tests..." >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "note: ${missing[*]} not found; the tests that need them will be skipped (apt-get install ${missing[*]})" >&2
  fi
fi
# Plotly's basic bundle (1.2 MB, MIT; pinned and checked by its SHA-256), which draws the pages' line charts
# about a second sooner than Streamlit's full Plotly (monitor_cb/views/plotly_bundle.py), fetched with npm.
# The dashboard works without it (st.plotly_chart); the tests (SKIP_BROWSER unset) need it, as they need pip's.
if ! .venv/bin/python -m monitor_cb.views.plotly_bundle --check 2>/dev/null; then
  if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's npm to fetch Plotly's basic bundle..." >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
  if ! .venv/bin/python -m monitor_cb.views.plotly_bundle; then
    if [ "${SKIP_BROWSER:-0}" != "1" ]; then
      exit 1
    fi
    echo "note: the dashboard draws its charts with Streamlit's Plotly (slower to open)" >&2
  fi
fi
