#!/usr/bin/env bash
# Install with dev tools, then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# With the optional real llama.cpp server for the contextual-retrieval test (compiles
# llama.cpp, ~5 min once; pip's wheel cache keeps the built wheel, keyed by the sdist, so
# later installs of the same version reuse it). Without it that one test is skipped, loudly.
# Built portable (GGML_NATIVE=OFF: AVX2 and FMA, no AVX-512 or AMX): a build for the build
# machine's own instructions died with SIGILL on a VM whose CPU flags list AMX it cannot run.
# One pip pass (~25 s of CPU) when it installs; pip builds every wheel before installing
# any, so when the build fails nothing is half-installed and the plain dev set follows.
if ! CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" scripts/install.sh "dev,llmtest"; then
  echo "WARNING: llama-cpp-python could not be installed; the real-LLM-server test will be skipped" >&2
  scripts/install.sh dev
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
# mypy (~85 s on one core, no cache on a fresh machine) runs beside the tests, which
# leave a core idle much of the time; its verdict counts as much as theirs.
mypy_log="$(mktemp)"
.venv/bin/mypy >"$mypy_log" 2>&1 &
mypy_pid=$!
trap 'kill "$mypy_pid" 2>/dev/null || true' INT TERM
tests=0
.venv/bin/python -m pytest "$@" || tests=$?
types=0
wait "$mypy_pid" || types=$?
echo "--- mypy (exit $types)"
cat "$mypy_log"
rm -f "$mypy_log"
if [ "$tests" -ne 0 ]; then exit "$tests"; fi
exit "$types"
