"""What a refresh costs the Prefect server, per document and per nightly run.

Usage: python bench/prefect_cost.py [--docs 200] [--changed 20]

Runs ``corpusflow ingest`` from fresh processes against one Prefect home (the
ephemeral API on SQLite, as the CLI uses it) on generated Markdown documents:
a first ingest of ``--docs`` documents, a refresh with nothing to do, and a refresh
with ``--changed`` edited documents. After each, it counts what the server stored
(flow runs, task runs, task-run states, events, logs, artifacts) and the database
size, and reports them per processed document. HTTP calls are counted from the
server's side through its events and state rows: every task run is created once and
moves Pending -> Running -> Completed/Failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TABLES = ("flow_run", "task_run", "task_run_state", "events", "log", "artifact")


def _counts(home: Path) -> dict[str, int]:
    db = home / "prefect.db"
    out = {}
    with sqlite3.connect(db) as conn:
        names = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
        for table in TABLES:
            out[table] = (
                int(conn.execute(f"select count(*) from {table}").fetchone()[0])
                if table in names
                else 0
            )
    size = sum(p.stat().st_size for p in home.glob("prefect.db*"))
    out["db_bytes"] = size
    return out


def _write(corpus: Path, n: int, revision: int, start: int = 0) -> None:
    for i in range(start, start + n):
        path = corpus / f"d{i // 100:03d}" / f"note{i:06d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"# Note {i}\n\n## Inspection\n\nRevision {revision}: turbine T-{i:05d} blade "
            f"inspection found nothing unusual.\n\n## Follow-up\n\nNext visit in {i % 12 + 1} "
            "months.\n"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--changed", type=int, default=20)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cf-prefect-cost-"))
    corpus, db, home = work / "corpus", work / "db", work / "prefect"
    _write(corpus, args.docs, 0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(home)
    exe = Path(sys.executable).parent / "corpusflow"
    rows: list[dict[str, Any]] = []
    before = dict.fromkeys((*TABLES, "db_bytes"), 0)
    for name, prepare, processed in (
        ("first ingest", lambda: None, args.docs),
        ("nothing changed", lambda: None, 0),
        ("some changed", lambda: _write(corpus, args.changed, 1), args.changed),
    ):
        prepare()
        t = time.perf_counter()
        proc = subprocess.run(
            [str(exe), "ingest", str(corpus), "--db", str(db), "--json"],
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise SystemExit(proc.stderr)
        report = json.loads(proc.stdout)
        after = _counts(home) if (home / "prefect.db").exists() else before
        delta = {k: after[k] - before[k] for k in after}
        row: dict[str, Any] = {"run": name, "processed": processed, "wall_s": round(wall, 1)}
        row.update(delta)
        row["chunks"] = report["chunks_written"]
        if processed:
            row["task_runs_per_doc"] = round(delta["task_run"] / processed, 2)
            row["states_per_doc"] = round(delta["task_run_state"] / processed, 2)
            row["events_per_doc"] = round(delta["events"] / processed, 2)
            row["db_bytes_per_doc"] = round(delta["db_bytes"] / processed)
        rows.append(row)
        before = after
    cols = list(rows[0].keys() | rows[-1].keys())
    order = ["run", "processed", "wall_s", "chunks", *TABLES, "db_bytes"]
    cols = order + [c for c in cols if c not in order]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    print(json.dumps(rows, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
