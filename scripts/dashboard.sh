#!/usr/bin/env bash
# One command: set everything up, then open the dashboard on ./logs (or LOGDIR).
# With no runs there, the page offers the demo training and a sample of runs.
# Extra arguments go to streamlit (e.g. --server.port 8600).
set -euo pipefail
cd "$(dirname "$0")/.."
SKIP_BROWSER=1 bash scripts/setup.sh
exec .venv/bin/streamlit run dashboard.py "$@" -- --logdir "${LOGDIR:-logs}"
