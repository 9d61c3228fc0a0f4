#!/usr/bin/env bash
# Fixed costs seen from a fresh shell (issue #15): a refresh with nothing to do, a cold
# `corpusflow search` and a refresh with one changed document, three interleaved fresh
# processes each, wall and CPU (user+sys, the command and every process it waited for).
#
# Usage: bench/fixed_costs.sh DB [CORPUS] [BEFORE_CHECKOUT]
#   DB               a database already holding CORPUS (so the refresh has nothing to do)
#   CORPUS           default: samples/corpus
#   BEFORE_CHECKOUT  another checkout (e.g. `git worktree add /tmp/before <rev>`) run the
#                    same way through PYTHONPATH with this venv, interleaved with this one
# The one-changed-document runs use a copy of CORPUS and of DB (the originals are left as
# they are) and append a paragraph to its release_notes.md (or first .md file) each time.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
DB="$(realpath "$1")"; CORPUS="$(realpath "${2:-$REPO/samples/corpus}")"; BEFORE="${3:-}"
PY="$REPO/.venv/bin/python"
# From a neutral folder: `python -c` puts the working directory first on sys.path, which
# would shadow PYTHONPATH (the checkout being measured) with whatever tree we stand in.
cd "$(mktemp -d)"
run() {  # label checkout command...
  local label=$1 tree=$2; shift 2
  /usr/bin/time -f "$label %e s wall %U+%S s cpu" env PYTHONPATH="$tree" HF_HUB_OFFLINE=1 \
    "$PY" -c "import sys; from corpusflow.cli import main; sys.argv = ['corpusflow'] + sys.argv[1:]; main()" \
    "$@" 2>&1 >/dev/null | grep ' s wall'
}
COPY="$(mktemp -d)"
cp -r "$CORPUS" "$COPY/corpus"; cp -r "$DB" "$COPY/db"
EDIT="$COPY/corpus/release_notes.md"
[ -f "$EDIT" ] || EDIT="$(find "$COPY/corpus" -name '*.md' | sort | head -1)"
# Untimed: whatever the copy's first run has to catch up on (a database built from another
# path, say) is not a one-document change.
run "setup (untimed)" "$REPO" ingest "$COPY/corpus" --db "$COPY/db" --json >/dev/null
for i in 1 2 3; do
  for tree in "$REPO" ${BEFORE:+"$BEFORE"}; do
    tag=$([ "$tree" = "$REPO" ] && echo after || echo before)
    run "$tag no-op refresh" "$tree" ingest "$CORPUS" --db "$DB" --json
    run "$tag cold search  " "$tree" search "refund policy" --db "$DB" --json
    printf '\nEdit %s by %s: one more paragraph about this release.\n' "$i" "$tag" >> "$EDIT"
    run "$tag one changed  " "$tree" ingest "$COPY/corpus" --db "$COPY/db" --json
  done
  uptime
done
rm -rf "$COPY"
