"""A reader process for the read-during-write test (tests/storage/test_snapshots.py).

    python -m tests.helpers.reader --db DIR --out FILE --stop FILE [--min 2000]

Searches the active table in dense, keyword and hybrid mode in turn, through the
Python API as a RAG service would (one long-lived ``Searcher.for_active`` that follows
the pointer, and every 25th query a fresh one), until the file ``--stop`` exists and
at least ``--min`` searches were made. For every answer it records what a mixed
snapshot would show: the revision markers (``R<n>``) of the chunks of ``rev.md``
among the hits and those of their parent sections, the chunk tables and table
versions the hits were read at, or the error. One JSON line per search in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

MARK = re.compile(r"\bR(\d+)\b")
QUERIES = (
    "night shift rotation handover checklist",
    "who signs the handover log at the end of the shift",
    "spare parts cabinet inventory count",
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--min", type=int, default=2000)
    args = ap.parse_args()
    from common.settings import load_settings
    from corpusflow.api import Filters, Searcher
    from corpusflow.runtime import configure_environment

    configure_environment()
    settings = load_settings(None, {"storage": {"db": args.db}})
    every = Filters(all_groups=True)
    modes = ("dense", "keyword", "hybrid")
    stop = Path(args.stop)
    searcher = Searcher.for_active(settings)
    n = 0
    with open(args.out, "w", encoding="utf-8") as out:
        while n < args.min or not stop.exists():
            mode = modes[n % 3]
            query = QUERIES[n % len(QUERIES)]
            record: dict[str, object] = {"n": n, "mode": mode, "t": time.time()}
            try:
                if n % 25 == 0:
                    searcher = Searcher.for_active(settings)
                hits = searcher.search(query, k=8, mode=mode, filters=every)  # type: ignore[arg-type]
                rev = [h for h in hits if h["path"] == "rev.md"]
                record.update(
                    hits=len(hits),
                    revisions=sorted({m for h in rev for m in MARK.findall(h["text"])}),
                    parent_revisions=sorted(
                        {m for h in rev for m in MARK.findall(h["parent_text"])}
                    ),
                    no_parent=sum(1 for h in hits if not h["parent_text"]),
                    tables=sorted({h["chunk_table"] for h in hits}),
                    versions=sorted({(h["table_version"], h["parent_version"]) for h in hits}),
                )
            except Exception as exc:
                record["error"] = f"{type(exc).__name__}: {exc}"
            out.write(json.dumps(record) + "\n")
            out.flush()
            n += 1


if __name__ == "__main__":
    main()
