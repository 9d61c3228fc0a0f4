"""Where the flow process's memory goes as documents are committed.

Usage: python bench/flow_memory.py [--docs 500] [--marks 60,360] [--keep DIR] [--trace FRAMES]

Generates ``--docs`` mixed documents (bench/gen_corpus.py) and runs the refresh flow
in this process (the CLI's flow: Prefect, one task run per document, the ephemeral
API). When the ledger holds each of ``--marks`` documents it records this process's
RSS and a census of the live Python objects (count and ``sys.getsizeof`` per type,
after a full collection). Between the first and last mark it prints the RSS growth
per document and the types whose objects grew most. RSS that grows much faster than
the objects is memory freed but kept by the allocator, not a reference held; each mark
also prints glibc's own figures (``mallinfo2``: held from the system, in use, free inside)
and the Lance session caches, and ``--trace`` adds tracemalloc (Python allocations,
strings included) between the second and the last mark.

Compare allocators with the environment: ``MALLOC_ARENA_MAX=2`` (fewer glibc arenas)
shows whether the growth is spread over per-thread arenas.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import gc
import os
import shutil
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
MIB = 2**20


def _census() -> tuple[collections.Counter[str], collections.Counter[str]]:
    gc.collect()
    count: collections.Counter[str] = collections.Counter()
    size: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
        count[kind] += 1
        size[kind] += sys.getsizeof(obj)
    return count, size


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _malloc() -> str:
    """glibc's own view: bytes it has from the system, in use, and free inside it."""
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return "malloc n/a"
    fn.restype = _MallInfo2
    m = fn()
    held = (m.arena + m.hblkhd) / MIB
    return f"malloc holds {held:.0f} MiB, in use {(m.uordblks + m.hblkhd) / MIB:.0f}, free {m.fordblks / MIB:.0f}"


def _indexed(db: Path) -> int:
    import lancedb

    try:
        conn = lancedb.connect(str(db))
        names = [n for n in conn.list_tables().tables if "__documents__" in n]
        return int(conn.open_table(names[0]).count_rows()) if names else 0
    except Exception:  # the table is being created
        return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=500)
    ap.add_argument("--marks", default="60,360")
    ap.add_argument("--keep", default="", help="work directory to keep (corpus is reused)")
    ap.add_argument(
        "--trace",
        type=int,
        default=0,
        help="trace Python allocations from the first mark on "
        "with this many frames (slow), and print where those made after the second mark grew",
    )
    args = ap.parse_args()
    marks = [int(m) for m in args.marks.split(",")]
    if len(marks) < 2 or marks[-1] > args.docs:
        raise SystemExit("--marks needs two or more counts, the last at most --docs")

    from corpusflow.runtime import configure_environment, start_prefect_api

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="cf-flowmem-"))
    corpus, db = work / "corpus", work / "db"
    os.environ["PREFECT_HOME"] = str(work / "prefect")
    configure_environment()
    import psutil
    import pyarrow as pa
    from gen_corpus import generate

    if not corpus.exists():
        generate(corpus, args.docs)
    shutil.rmtree(db, ignore_errors=True)
    shutil.rmtree(work / "prefect", ignore_errors=True)

    from corpusflow.settings import load_settings
    from flows.refresh import refresh_flow
    from storage.tables import Tables

    api = start_prefect_api()  # as the CLI does: the server dies with this process, even killed

    settings = load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False}})
    seen: dict[int, tuple[int, Any]] = {}

    snapshots: list[Any] = []

    def watch() -> None:
        for mark in marks:
            while _indexed(db) < mark:
                time.sleep(2)
            if args.trace:
                # Python allocations (strings included, which the census cannot see).
                if not tracemalloc.is_tracing():
                    tracemalloc.start(args.trace)
                snapshots.append(tracemalloc.take_snapshot())
            census = _census()
            seen[mark] = (psutil.Process().memory_info().rss, census)
            lance = sum(t.session.size_bytes for t in gc.get_objects() if isinstance(t, Tables))
            print(
                f"at {mark} documents: RSS {seen[mark][0] / MIB:.0f} MiB, "
                f"Lance caches {lance / MIB:.0f} MiB, Arrow pool {pa.total_allocated_bytes() / MIB:.0f} "
                f"MiB, Python objects {sum(census[1].values()) / MIB:.0f} MiB, {_malloc()}",
                flush=True,
            )

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with api.serving():
        refresh_flow(str(corpus), settings.model_dump_json())
    watcher.join(timeout=60)
    first, last = marks[0], marks[-1]
    if last not in seen:
        raise SystemExit("the run ended before the last mark")
    n = last - first
    (rss0, (count0, size0)), (rss1, (count1, size1)) = seen[first], seen[last]
    objects = sum(size1.values()) - sum(size0.values())
    print(
        f"{first} -> {last} documents: RSS {(rss1 - rss0) / n / 1024:.0f} KiB a document, "
        f"live Python objects {objects / n / 1024:.1f} KiB a document"
    )
    rows = sorted(((size1[k] - size0[k], count1[k] - count0[k], k) for k in size1), reverse=True)
    for grown, added, kind in rows[:15]:
        print(f"  {grown / n / 1024:8.2f} KiB {added / n:7.1f} objects a document  {kind}")
    if len(snapshots) >= 2:
        print("Python allocations between the marks, by where they were made (per document):")
        traced = last - marks[1]
        for stat in snapshots[-1].compare_to(snapshots[1], "traceback")[:8]:
            size, blocks = stat.size_diff / traced / 1024, stat.count_diff / traced
            print(f"  {size:8.2f} KiB {blocks:7.1f} blocks")
            for line in stat.traceback.format()[-2 * args.trace :]:
                print("      " + line)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
