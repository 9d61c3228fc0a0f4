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


def _mappings() -> collections.Counter[str]:
    """Resident bytes by kind of mapping: the brk heap, anonymous mappings (other glibc
    arenas, Rust and Arrow allocations, thread stacks) and each mapped file."""
    rss: collections.Counter[str] = collections.Counter()
    kind = ""
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split()
                if "-" in head[0] and len(head) >= 5:  # a mapping's header line
                    path = head[5] if len(head) >= 6 else ""
                    kind = "[anon]" if not path else path if path.startswith("[") else "file"
                elif head[0] == "Rss:":
                    rss[kind] += int(head[1]) * 1024
    except OSError:
        pass
    return rss


def _pymalloc() -> str:
    """Python's small-object allocator (its own mmap'd arenas, outside glibc): strings
    and other objects the census cannot see live there."""
    import re

    with tempfile.TemporaryFile("w+") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read()
    m = re.search(r"Total\s*=\s*([\d,]+)", text)
    arenas = re.search(r"# arenas allocated current\s*=\s*([\d,]+)", text)
    total = int(m.group(1).replace(",", "")) if m else 0
    n = int(arenas.group(1).replace(",", "")) if arenas else 0
    return f"pymalloc {total / MIB:.0f} MiB in {n} arenas"


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

    from common.settings import load_settings
    from flows.refresh import refresh_flow
    from storage.tables import Tables

    api = start_prefect_api()  # as the CLI does: the server dies with this process, even killed

    settings = load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False}})
    seen: dict[int, tuple[int, Any]] = {}

    snapshots: list[Any] = []
    maps: dict[int, collections.Counter[str]] = {}
    rss_log: list[tuple[float, int]] = []  # (time, RSS) twice a second
    done = threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not done.is_set():
            rss_log.append((time.monotonic(), me.memory_info().rss))
            done.wait(0.5)

    def low(window: float = 30.0) -> int:
        """The least RSS over the last ``window`` seconds: one sample swings by an
        embedding batch's buffers, the low point does not."""
        cut = time.monotonic() - window
        return min(r for t, r in rss_log if t >= cut)

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
            seen[mark] = (low(), census)
            maps[mark] = _mappings()
            names = collections.Counter(
                (t / "comm").read_text().strip() for t in Path("/proc/self/task").iterdir()
            )
            print(f"  threads by name at {mark}: {dict(names.most_common())}", flush=True)
            lance = sum(t.session.size_bytes for t in gc.get_objects() if isinstance(t, Tables))
            print(
                f"at {mark} documents: RSS {psutil.Process().memory_info().rss / MIB:.0f} MiB "
                f"(least over 30 s: {seen[mark][0] / MIB:.0f}), "
                f"Lance caches {lance / MIB:.0f} MiB, Arrow pool {pa.total_allocated_bytes() / MIB:.0f} "
                f"MiB, Python objects {sum(census[1].values()) / MIB:.0f} MiB, {_malloc()}, {_pymalloc()}, "
                f"{threading.active_count()} Python threads of {psutil.Process().num_threads()}",
                flush=True,
            )

    threading.Thread(target=sample, daemon=True).start()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with api.serving():
        refresh_flow(str(corpus), settings.model_dump_json())
    watcher.join(timeout=60)
    done.set()
    first, last = marks[0], marks[-1]
    if last not in seen:
        raise SystemExit("the run ended before the last mark")
    n = last - first
    (rss0, (count0, size0)), (rss1, (count1, size1)) = seen[first], seen[last]
    objects = sum(size1.values()) - sum(size0.values())
    print(
        f"{first} -> {last} documents: RSS (least over 30 s) {(rss1 - rss0) / n / 1024:.0f} KiB "
        "a document, "
        f"live Python objects {objects / n / 1024:.1f} KiB a document"
    )
    grew = {k: (maps[last][k] - maps[first][k]) / MIB for k in maps[last] | maps[first]}
    print(
        "  resident by mapping, grown: "
        + ", ".join(f"{k} {v:+.0f} MiB" for k, v in sorted(grew.items(), key=lambda kv: -kv[1]))
        + f" (at {last}: "
        + ", ".join(f"{k} {v / MIB:.0f}" for k, v in maps[last].most_common())
        + " MiB)"
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
