#!/usr/bin/env bash
# One command: set everything up, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# One worker per core, a test file per worker (its module fixtures built once).
exec .venv/bin/python -m pytest -n auto --dist loadfile "$@"
