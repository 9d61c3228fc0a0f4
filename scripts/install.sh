#!/usr/bin/env bash
# Create .venv at the repository root and install corpusflow with pinned dependencies.
# Usage: scripts/install.sh [extras]   e.g. scripts/install.sh dev
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# llama.cpp (the llmtest extra) is compiled for any x86-64, not this CPU: a native build
# (GGML_NATIVE, the default) crashed with a general protection fault in libggml-cpu on a VM
# that reports AMX, and pip's wheel cache would hand that build to every later install.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
# System packages (LibreOffice headless for legacy Office files), where possible.
scripts/system_deps.sh
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
spec="."
if [ -n "${1:-}" ]; then spec=".[$1]"; fi
# constraints.txt pins the whole resolved set; torch 2.13.0 resolves to the CPU
# build where a local wheel directory provides one.
# (The filter drops pip's notices about this machine's empty local index folders.)
{ .venv/bin/python -m pip install --disable-pip-version-check -q -c constraints.txt -e "$spec" 2>&1; } \
  | { grep -v "^WARNING: Location 'file://" || true; }
