"""Corpus-scale behaviour, measured as a user runs it.

Usage:
  python bench/scale.py ingest [--docs 10000] [--workers 1] [--keep DIR]
  python bench/scale.py plan [--rows 1000000] [--new 0]

ingest: generates ``--docs`` mixed documents (bench/gen_corpus.py: 60% PDF, 20% DOCX,
  10% HTML, 10% Markdown) and runs ``corpusflow ingest`` on them as a fresh process,
  sampling every second the RSS of its whole process tree (CLI, parser children,
  Prefect API server, watchdog) and, from this process, how many documents the ledger
  holds. Reports peak tree RSS, RSS at 30% and 90% of the run (each the median of the
  samples over 5% of the run around that point), and documents/s in the
  first and last quarter of the documents. Targets (#15): peak <= 3 GiB, RSS at 90%
  within 15% of RSS at 30%, last-quarter rate >= 0.8x the first.

plan: writes a synthetic ledger of ``--rows`` indexed documents and lists the same
  documents, unchanged, from a synthetic source (no files: the listing is generated,
  so only the planner is measured), then plans in a fresh process. Reports wall time
  and peak RSS of that process. Target: 1,000,000 rows within 60 s and 1.5 GiB.
  ``--new N`` lists N more files the ledger lacks (PDF, DOCX, HTML, Markdown): the plan
  then has N documents of work, and the estimate of their cost (corpusflow.estimate) is
  timed too (``estimate_s``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
GIB = 2**30


def _tree_rss(pid: int) -> int:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def _indexed(db: Path) -> int:
    """Documents the ledger records as indexed (or failed: done either way)."""
    import lancedb

    try:
        conn = lancedb.connect(str(db))
        names = [n for n in conn.list_tables().tables if "__documents__" in n]
        if not names:
            return 0
        return int(conn.open_table(names[0]).count_rows("status != 'deleted'"))
    except Exception:  # the table is being created
        return 0


def ingest(args: argparse.Namespace) -> dict[str, Any]:
    from gen_corpus import generate

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cf-scale-"))
    corpus, db = work / "corpus", work / "db"
    if not corpus.exists():
        t = time.perf_counter()
        generate(corpus, args.docs)
        print(f"generated {args.docs} documents in {time.perf_counter() - t:.0f} s", flush=True)
    shutil.rmtree(db, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(work / "prefect")
    env["CORPUSFLOW_PARSE__WORKERS"] = str(args.workers)
    exe = Path(sys.executable).parent / "corpusflow"
    start = time.time()
    proc = subprocess.Popen(
        [str(exe), "ingest", str(corpus), "--db", str(db), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    samples: list[tuple[float, int]] = []  # (seconds, tree RSS)
    progress: list[tuple[float, int]] = []  # (seconds, documents done)
    stop = threading.Event()

    def sample() -> None:
        last_count = 0.0
        while not stop.is_set():
            now = time.time() - start
            samples.append((now, _tree_rss(proc.pid)))
            if now - last_count >= 5:
                progress.append((now, _indexed(db)))
                last_count = now
            stop.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    wall = time.time() - start
    stop.set()
    sampler.join()
    progress.append((wall, _indexed(db)))
    report = json.loads(out) if proc.returncode == 0 else {"error": proc.returncode}

    def rss_at(frac: float) -> int:
        """The median tree RSS over 5% of the run centred on ``frac``: one sample swings
        by ~0.15 GiB with an embedding batch's buffers, the median of ~50 does not."""
        lo, hi = (frac - 0.025) * wall, (frac + 0.025) * wall
        window = sorted(r for t, r in samples if lo <= t <= hi)
        if not window:  # a run too short for a window: the nearest sample
            return min(samples, key=lambda s: abs(s[0] - frac * wall))[1]
        return window[len(window) // 2]

    def time_at(docs: float) -> float:
        return next((t for t, n in progress if n >= docs), wall)

    n = args.docs
    t25, t75, t100 = time_at(0.25 * n), time_at(0.75 * n), time_at(n)
    first = 0.25 * n / t25 if t25 else 0.0
    last = 0.25 * n / (t100 - t75) if t100 > t75 else 0.0
    peak = max(s for _, s in samples)
    at30, at90 = rss_at(0.3), rss_at(0.9)
    result = {
        "docs": n,
        "wall_s": round(wall, 1),
        "new": report.get("new"),
        "failed": report.get("failed"),
        "chunks": report.get("chunks_written"),
        "peak_tree_rss_gib": round(peak / GIB, 2),
        "rss_30pct_gib": round(at30 / GIB, 2),
        "rss_90pct_gib": round(at90 / GIB, 2),
        "rss_90_vs_30": round(at90 / at30, 3) if at30 else None,
        "docs_per_s_first_quarter": round(first, 2),
        "docs_per_s_last_quarter": round(last, 2),
        "last_vs_first": round(last / first, 3) if first else None,
    }
    (work / "scale_samples.json").write_text(json.dumps({"rss": samples, "done": progress}))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


class SyntheticSource:
    """``rows`` documents listed as exactly what the ledger recorded (nothing changed),
    and ``new`` more that the ledger does not have (mixed formats, for the estimate)."""

    root = "synthetic://"

    def __init__(self, rows: int, new: int = 0) -> None:
        self.rows, self.new = rows, new

    def list(self) -> Any:
        from sources import SourceFile

        for i in range(self.rows):
            yield SourceFile(f"d{i // 1000:04d}/doc{i:07d}.md", 1000 + i % 977, 1.7e9 + i, "")
        exts = (".pdf", ".pdf", ".pdf", ".docx", ".html", ".md")
        for i in range(self.new):
            ext = exts[i % len(exts)]
            yield SourceFile(f"new/{i // 1000:04d}/doc{i:07d}{ext}", 50_000 + i % 9973, 1.8e9, "")

    def content_hash(self, f: Any) -> str:  # never called when nothing changed
        raise AssertionError(f"hashed {f.rel_path}: the plan read a file it did not need")


def _plan_child(db: str, rows: int, new: int = 0) -> None:
    """In a fresh process: plan the synthetic listing against the synthetic ledger."""
    from common.settings import load_settings
    from corpusflow.fingerprints import Fingerprints
    from corpusflow.model_choice import choose_model
    from corpusflow.plan import plan_changes
    from storage import Store

    settings = load_settings(None, {"storage": {"db": db}})
    store = Store.from_settings(settings.storage)
    fps = Fingerprints.of(settings, choose_model(settings, store))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    plan = plan_changes(SyntheticSource(rows, new), store, settings, fps)  # type: ignore[arg-type]
    wall = time.perf_counter() - t
    # The plan's cost (corpusflow.estimate), as every refresh and `corpusflow plan` make it.
    from corpusflow.estimate import Rates, estimate_plan

    spec = choose_model(settings, store)
    t = time.perf_counter()
    estimate = estimate_plan(
        plan, settings, Rates.load(store), spec.fingerprint, spec.name, fps.max_tokens
    )
    estimate_s = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "rows": rows,
                "listed": plan.listed,
                "unchanged": plan.unchanged,
                "work": len(plan.work),
                "deleted": len(plan.deleted),
                "plan_s": round(wall, 1),
                "estimate_s": round(estimate_s, 2),
                "estimated_chunks": estimate.to_dict()["chunks"],
                "peak_rss_gib": round(peak * 1024 / GIB, 2),
                "rss_before_plan_gib": round(before * 1024 / GIB, 2),
            }
        )
    )


def plan(args: argparse.Namespace) -> dict[str, Any]:
    import pyarrow as pa

    from common.settings import load_settings
    from corpusflow.fingerprints import Fingerprints
    from corpusflow.model_choice import choose_model
    from sources import SourceFile
    from storage import Store
    from storage.schema import LEDGER_SCHEMA

    work = Path(tempfile.mkdtemp(prefix="cf-plan-"))
    db = str(work / "db")
    settings = load_settings(None, {"storage": {"db": db}})
    store = Store.from_settings(settings.storage)
    spec = choose_model(settings, store)
    fps = Fingerprints.of(settings, spec)
    t = time.perf_counter()
    table = None
    step = 100_000
    for start in range(0, args.rows, step):
        ids = range(start, min(start + step, args.rows))
        files = [
            SourceFile(f"d{i // 1000:04d}/doc{i:07d}.md", 1000 + i % 977, 1.7e9 + i, "")
            for i in ids
        ]
        n = len(files)
        cols = {
            "doc_id": [f.doc_id for f in files],
            "path": [f.rel_path for f in files],
            "content_sha256": [f"{i:064x}" for i in ids],
            "size": [f.size for f in files],
            "mtime": [f.mtime for f in files],
            "etag": [None] * n,
            "status": ["indexed"] * n,
            "error_category": [None] * n,
            "error_message": [None] * n,
            "attempts": [0] * n,
            "format": ["md"] * n,
            "title": [f"Document {i}" for i in ids],
            "page_count": [1] * n,
            "parser": ["docling"] * n,
            "parser_fingerprint": [fps.parsers.of("md")] * n,
            "chunker_fingerprint": [fps.chunker] * n,
            "model_fingerprint": [fps.model] * n,
            "chunk_count": [3] * n,
            "metadata_json": ["{}"] * n,
            "hold_json": [None] * n,
            "updated_at": [None] * n,
        }
        data = pa.table(cols, schema=LEDGER_SCHEMA)
        if table is None:
            table = store.db.create_table(store.ledger.name(fps.table_suffix), data)
        else:
            table.add(data)
    print(f"wrote a {args.rows}-row ledger in {time.perf_counter() - t:.0f} s", flush=True)
    out = subprocess.run(
        [sys.executable, __file__, "_plan_child", db, str(args.rows), str(args.new)],
        capture_output=True,
        text=True,
        check=True,
    )
    shutil.rmtree(work, ignore_errors=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_plan_child":
        from corpusflow.runtime import configure_environment

        configure_environment()
        _plan_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
        return
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("ingest")
    a.add_argument("--docs", type=int, default=10_000)
    a.add_argument("--workers", type=int, default=1)
    a.add_argument("--keep", default="", help="work directory to keep (corpus is reused)")
    b = sub.add_parser("plan")
    b.add_argument("--rows", type=int, default=1_000_000)
    b.add_argument("--new", type=int, default=0, help="files listed that the ledger lacks")
    args = ap.parse_args()
    from corpusflow.runtime import configure_environment

    configure_environment()
    result = ingest(args) if args.what == "ingest" else plan(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
