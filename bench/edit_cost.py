"""Cost of a one-paragraph edit to a long document, through the CLI as a user runs it.

Usage: python bench/edit_cost.py [--sections 64] [--paragraphs 5] [--llm-url URL]

1. ``corpusflow ingest --json`` of a generated manual (sections x paragraphs chunks,
   chunk.max_tokens 64) from a fresh shell;
2. one paragraph rewritten, ``corpusflow ingest --json`` again.
Prints, for both runs: wall time of the CLI, the embed+write stage and its parts (loading
the model in the fresh process; embedding-cache reads and encoding), texts
embedded and embedding-cache hits, chunk ids kept; and the ratio of the edit's
embedding time to the first ingest's (target <= 5%). With ``--llm-url`` (an OpenAI-compatible endpoint, e.g. a
llama.cpp server) contexts are written by the LLM and requests are counted through a
loopback proxy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.long_manual import long_manual  # noqa: E402
from tests.helpers.servers import CountingProxy  # noqa: E402

CLI = Path(sys.executable).parent / "corpusflow"


def ingest(src: Path, db: Path, env: dict[str, str]) -> tuple[dict[str, Any], float]:
    start = time.perf_counter()
    out = subprocess.run(
        [str(CLI), "ingest", str(src), "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    wall = time.perf_counter() - start
    return json.loads(out.stdout[out.stdout.index("{") :]), wall


def chunk_ids(db: Path) -> set[str]:
    from storage import Store

    store = Store(str(db))
    active = store.pointer.active()
    assert active is not None
    return set(store.read_columns(active.chunk_table, ["chunk_id"]).column("chunk_id").to_pylist())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", type=int, default=64)
    ap.add_argument("--paragraphs", type=int, default=5)
    ap.add_argument("--llm-url", default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="edit-cost-"))
    src, db = work / "src", work / "db"
    src.mkdir()
    env = {**os.environ, "CORPUSFLOW_CHUNK__MAX_TOKENS": "64", "CORPUSFLOW_RUN__PROGRESS": "false"}
    proxy = None
    if args.llm_url:
        proxy = CountingProxy(args.llm_url)
        env |= {
            "CORPUSFLOW_CHUNK__CONTEXTUAL": "llm",
            "CORPUSFLOW_LLM__BASE_URL": proxy.url,
            "CORPUSFLOW_LLM__MAX_CONCURRENCY": "1",
            "CORPUSFLOW_LLM__CONTEXT_MAX_TOKENS": "32",
        }
    manual = src / "manual.md"
    manual.write_text(long_manual(args.sections, args.paragraphs))
    first, first_wall = ingest(src, db, env)
    ids_before = chunk_ids(db)
    asked_first = proxy.count if proxy else None
    manual.write_text(long_manual(args.sections, args.paragraphs, edited=(args.sections // 2, 1)))
    second, second_wall = ingest(src, db, env)
    ids_after = chunk_ids(db)
    asked_second = proxy.count - asked_first if proxy and asked_first is not None else None
    rows = []
    for name, rep, wall, asked in (
        ("first ingest", first, first_wall, asked_first),
        ("one paragraph edited", second, second_wall, asked_second),
    ):
        rows.append(
            {
                "run": name,
                "cli_wall_s": round(wall, 1),
                "embed_write_s": rep["stage_s"].get("embed_write", 0.0),
                "embed_s": rep["stage_s"].get("embed", 0.0),
                "load_model_s": rep["stage_s"].get("load_model", 0.0),
                "chunks_written": rep["chunks_written"],
                "embedded": rep["embedded"],
                "embed_cache_hits": rep["embed_cache_hits"],
                "llm_requests": asked,
                "stages_s": rep["stage_s"],
            }
        )
    for row in rows:
        print(json.dumps(row))
    ratio = rows[1]["embed_s"] / max(rows[0]["embed_s"], 1e-9)
    write_ratio = rows[1]["embed_write_s"] / max(rows[0]["embed_write_s"], 1e-9)
    print(
        json.dumps(
            {
                "chunks": len(ids_before),
                "chunk_ids_kept": len(ids_before & ids_after),
                "chunk_ids_new": len(ids_after - ids_before),
                "embed_ratio": round(ratio, 4),
                "embed_write_ratio": round(write_ratio, 4),
                "wall_ratio": round(rows[1]["cli_wall_s"] / rows[0]["cli_wall_s"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
