"""What Prefect orchestration costs, and what a second parse worker buys.

Usage: python bench/orchestration_overhead.py [--docs 300] [--pdfs 40] [--reps 2]

A. Orchestration share, on many small documents (Markdown and HTML, where the
   per-document work is smallest and orchestration weighs most): the refresh
   flow (one task run per document, batch tasks, artifacts) against the same
   refresh engine with the in-process executor (same plan, parser pool, chunker,
   embedder, Lance writes and ledger), each on a fresh database, interleaved.
   share = (flow wall - plain wall) / flow wall. Target <= 10%.
B. Parse speedup with 2 workers vs 1 on generated multi-page PDFs: (1) the
   isolated ParserPool itself, warm, fed from threads as the flow feeds it; (2) the
   whole refresh flow with parse.workers=1 vs 2 and with a 2-worker Dask
   LocalCluster (parse stage and wall; includes starting the parser processes and
   chunking in the flow process). Target >= 1.6x with 2 workers.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def plain_pipeline(corpus: Path, settings: Any) -> int:
    """The same refresh engine without Prefect: corpusflow.engine.InProcessExecutor
    (the flow differs only in its executor: task runs per document and batch)."""
    from corpusflow.engine import RefreshEngine

    return RefreshEngine(str(corpus), settings).refresh().chunks_written


def pool_throughput(files: list[Path], workers: int) -> float:
    """Seconds for a warm ParserPool of ``workers`` children to parse ``files``."""
    from common.settings import ParseSettings
    from parsers import ParserPool

    with ParserPool(ParseSettings(workers=workers)) as pool:
        # start and warm every child (docling's import is not parse throughput)
        warm = [threading.Thread(target=pool.parse, args=(files[i],)) for i in range(workers)]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2 * workers) as threads:
            list(threads.map(pool.parse, files))
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--pdfs", type=int, default=40)
    ap.add_argument("--pages", type=int, default=10, help="pages per generated PDF")
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    from corpusflow.runtime import configure_environment

    configure_environment()
    from gen_corpus import document

    from common.settings import load_settings
    from flows.refresh import refresh_flow
    from tests.helpers.pdfgen import long_report

    work = Path(tempfile.mkdtemp(prefix="cf-orchestration-"))
    small = work / "small"
    small.mkdir()
    for i in range(args.docs):
        document(small / f"doc{i:05d}{'.md' if i % 2 else '.html'}", i)
    pdfs = work / "pdfs"
    pdfs.mkdir()
    pdf_files = [
        long_report(pdfs / f"doc{i:05d}.pdf", args.pages, f"unit {i}") for i in range(args.pdfs)
    ]

    def settings(db: str, **sections: dict[str, Any]) -> Any:
        base: dict[str, Any] = {"storage": {"db": str(work / db)}, "run": {"progress": False}}
        for k, v in sections.items():
            base[k] = {**base.get(k, {}), **v}
        return load_settings(None, base)

    # Warm-up: start the ephemeral Prefect API and load the model once, outside the timings.
    refresh_flow(str(small), settings("warm").model_dump_json())

    flow_s: list[float] = []
    plain_s: list[float] = []
    chunks: dict[str, int] = {}
    for rep in range(args.reps):
        s = settings(f"plain{rep}")
        t = time.perf_counter()
        chunks["plain"] = plain_pipeline(small, s)
        plain_s.append(time.perf_counter() - t)
        s = settings(f"flow{rep}")
        t = time.perf_counter()
        report = refresh_flow(str(small), s.model_dump_json())
        flow_s.append(time.perf_counter() - t)
        chunks["flow"] = report["chunks_written"]
        print(f"rep {rep}: plain {plain_s[-1]:.1f}s flow {flow_s[-1]:.1f}s", file=sys.stderr)
    assert chunks["plain"] == chunks["flow"], chunks
    flow, plain = statistics.median(flow_s), statistics.median(plain_s)

    pool_s = {w: pool_throughput(pdf_files, w) for w in (1, 2)}
    parse_rows = []
    for label, run, workers in (
        ("threads, parse.workers=1", {}, 1),
        ("threads, parse.workers=2", {}, 2),
        ("dask LocalCluster, 2 workers", {"task_runner": "dask", "dask_workers": 2}, 1),
    ):
        s = settings(
            f"pdf-{workers}-{run.get('task_runner', 'threads')}",
            parse={"workers": workers},
            storage={"write_batch_docs": args.pdfs},
            run=run,
        )
        t = time.perf_counter()
        report = refresh_flow(str(pdfs), s.model_dump_json())
        wall = time.perf_counter() - t
        parse_rows.append((label, report["stage_s"]["parse_chunk"], wall, report["parsed"]))
        print(f"{label}: parse {parse_rows[-1][1]:.1f}s wall {wall:.1f}s", file=sys.stderr)

    print(
        f"A. {args.docs} small documents (Markdown + HTML), median of {args.reps} interleaved runs"
    )
    print()
    print("| pipeline | wall s | chunks |")
    print("|---|---|---|")
    print(f"| plain loop (no Prefect) | {plain:.1f} | {chunks['plain']} |")
    print(f"| refresh flow | {flow:.1f} | {chunks['flow']} |")
    print(
        f"\norchestration share: {100 * (flow - plain) / flow:.1f}% of the flow's wall time "
        f"({1000 * (flow - plain) / args.docs:.0f} ms per document)"
    )
    print(f"\nB. {args.pdfs} generated PDFs of {args.pages} pages")
    print()
    print("| warm ParserPool | s | docs/s | speedup |")
    print("|---|---|---|---|")
    for w, secs in pool_s.items():
        print(f"| {w} worker(s) | {secs:.1f} | {args.pdfs / secs:.2f} | {pool_s[1] / secs:.2f}x |")
    print()
    print("| runner | parse s | docs/s | speedup | flow wall s |")
    print("|---|---|---|---|---|")
    base = parse_rows[0][1]
    for label, parse_s, wall, parsed in parse_rows:
        print(
            f"| {label} | {parse_s:.1f} | {parsed / parse_s:.2f} | {base / parse_s:.2f}x | {wall:.1f} |"
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
