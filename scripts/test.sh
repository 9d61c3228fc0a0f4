#!/usr/bin/env bash
# Install with dev tools, then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh dev
# Optional: a real llama.cpp server for the contextual-retrieval test (compiles llama.cpp,
# ~5 min once, then pip's wheel cache). Without it that one test is skipped, loudly.
if ! scripts/install.sh "dev,llmtest"; then
  echo "WARNING: llama-cpp-python could not be installed; the real-LLM-server test will be skipped" >&2
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
