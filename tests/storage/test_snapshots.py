"""One snapshot per query: a reader never sees two revisions, or two tables, in one answer.

A reader process (tests/helpers/reader.py) searches in dense, keyword and hybrid mode
while this process refreshes one document five times, swaps the collection to another
model with a reindex, and refreshes once more on the new table. Every answer must hold
the chunks of one revision of that document, with the parent sections of that same
revision, read from one table at one version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from common.settings import Settings, load_settings
from corpusflow.engine import RefreshEngine
from storage import Store

REPO = Path(__file__).resolve().parents[2]
SEARCHES = 300


def _rev(n: int) -> str:
    """rev.md at revision ``n``: every section (and so every chunk and parent) says R<n>."""
    return (
        f"# Shift operations R{n}\n\n"
        f"## Night shift rotation R{n}\n\n"
        f"The night shift rotation R{n} starts at 22:00. The handover checklist R{n} is read "
        f"aloud by both shift leads before the rotation changes.\n\n"
        f"## Handover log R{n}\n\n"
        f"At the end of the shift the outgoing lead signs the handover log R{n}; the incoming "
        f"lead countersigns it within ten minutes.\n\n"
        f"## Spare parts R{n}\n\n"
        f"The spare parts cabinet R{n} is counted every Friday; the inventory count R{n} goes "
        f"to the maintenance planner.\n"
    )


def _settings(db: Path, model: str | None = None) -> Settings:
    return load_settings(
        None, {"storage": {"db": str(db)}, "embed": {"model": model}, "run": {"progress": False}}
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _wait_for(path: Path, n: int, reader: subprocess.Popen[bytes], timeout: float) -> None:
    """Until the reader has answered ``n`` searches (it flushes as it goes)."""
    deadline = time.monotonic() + timeout
    while len(_lines(path)) < n:
        assert reader.poll() is None, "the reader died"
        assert time.monotonic() < deadline, f"the reader made fewer than {n} searches"
        time.sleep(0.2)


# The reader searches for as long as the writes go on (the checks below need it to see
# several revisions and both tables), and at least SEARCHES times: about 45 s on a
# 2-core machine with two other jobs; the timeout's margin is for one loaded far more.
@pytest.mark.timeout(2400)
@pytest.mark.slow
def test_no_answer_mixes_revisions_or_tables(tmp_path: Path) -> None:
    folder, db = tmp_path / "docs", tmp_path / "db"
    folder.mkdir()
    (folder / "rev.md").write_text(_rev(0), encoding="utf-8")
    (folder / "other.md").write_text(
        "# Canteen\n\nThe canteen opens at seven and serves breakfast until ten.\n",
        encoding="utf-8",
    )
    RefreshEngine(str(folder), _settings(db, "minilm")).refresh()  # swapped to use-m3 below
    out, stop = tmp_path / "reads.jsonl", tmp_path / "stop"
    reader = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.helpers.reader", "--db", str(db), "--out", str(out)),
            *("--stop", str(stop), "--min", str(SEARCHES)),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        _wait_for(out, 30, reader, timeout=300)
        for n in range(1, 6):
            (folder / "rev.md").write_text(_rev(n), encoding="utf-8")
            assert RefreshEngine(str(folder), _settings(db)).refresh().changed == 1
        swap = RefreshEngine(
            str(folder), _settings(db, "use-m3"), activate=True, kind="reindex"
        ).refresh()
        assert swap.activated
        (folder / "rev.md").write_text(_rev(6), encoding="utf-8")
        assert RefreshEngine(str(folder), _settings(db)).refresh().changed == 1
        _wait_for(out, len(_lines(out)) + 30, reader, timeout=300)  # reads of the last revision
        stop.touch()
        assert reader.wait(timeout=900) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
    reads = _lines(out)
    assert len(reads) >= SEARCHES
    errors = [r["error"] for r in reads if "error" in r]
    assert not errors, errors[:3]
    mixed = [r for r in reads if len(r["revisions"]) > 1]
    assert not mixed, mixed[:3]
    # The parents of a revision's chunks are that revision's sections.
    parents = [r for r in reads if not set(r["parent_revisions"]) <= set(r["revisions"])]
    assert not parents, parents[:3]
    assert not [r for r in reads if r["no_parent"]]
    assert not [r for r in reads if len(r["tables"]) > 1 or len(r["versions"]) > 1]
    # The check saw what it guards against: several revisions, both tables, every mode.
    seen = {m for r in reads for m in r["revisions"]}
    assert len(seen) >= 3 and "6" in seen, seen
    tables = {t for r in reads for t in r["tables"]}
    assert len(tables) == 2
    assert {r["mode"] for r in reads} == {"dense", "keyword", "hybrid"}
    assert Store(str(db)).pointer.active().chunk_table == swap.chunk_table
