#!/usr/bin/env bash
# Install with dev tools, then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
