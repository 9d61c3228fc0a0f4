"""A long PDF through corpusflow's parser and through plain docling (issue #36): peak
resident memory of each one's process tree, and pages/s, at 250, 500 and 1,000 pages.

Usage: PYTHONPATH=. python bench/long_pdf.py [--pages 250 500 1000] [--batch 100]
                                              [--dir /tmp/corpusflow-longpdf]

The PDFs are a generated maintenance manual (``tests.helpers.pdfdraw.manual_pdf``): running header and page
number, a chapter heading every 10 pages, section headings, paragraphs of wrapped
10 pt text and a ruled table on every 4th page, ~600 words a page. They are written
once into ``--dir`` and reused by later runs.

Each leg parses one file in a fresh process, after that process's start-up (imports,
converter construction), which is not timed:

- ``corpusflow``: ``ParserPool`` with the default ParseSettings but ``nice`` 0 (the
  docling child runs at 0 too) and ``pdf_pipeline`` 'offline' (what 'auto' picks on a
  machine without docling's layout models); the time is ``pool.parse`` as the caller sees
  it (parse, JSON over the pipe, ``ParsedDocument`` rebuilt);
- ``docling``: a fresh Python child running the converter our PDF path wraps
  (``parsers.pdf.textlayer.native_converter``: docling's model-free NativePdfPipeline),
  ``convert`` then ``export_to_markdown``;
- ``corpusflow page_batch=N`` (with ``--batch N``, the largest file only): the same pool
  parsing in ranges of N pages.

Peak RSS is the largest sum over the child's whole process tree (``parsers.isolation.tree_rss``,
what the ``parse.memory_limit_mb`` cap counts), sampled every 0.1 s; "at start" is the
same sum once the child is ready. Words are the Markdown's whitespace-separated words.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MIB = 2**20
_INTERVAL_S = 0.1


class _Peak:
    """The largest value ``read`` gives while running, sampled every 0.1 s in a thread."""

    def __init__(self, read: Callable[[], int]) -> None:
        self.read, self.peak, self.samples = read, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.read())
            self.samples += 1
            self._stop.wait(_INTERVAL_S)

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def corpusflow_leg(pdf: Path, page_batch: int = 0) -> dict[str, Any]:
    from common.settings import ParseSettings
    from parsers import ParserPool

    settings = ParseSettings(nice=0, pdf_pipeline="offline", page_batch=page_batch)
    with ParserPool(settings) as pool:
        pool.start(1)
        worker = pool._idle.queue[0]
        assert worker is not None
        worker.wait_ready(180)  # start-up not timed
        time.sleep(0.5)
        at_start = worker.rss_bytes()
        with _Peak(worker.rss_bytes) as peak:
            start = time.monotonic()
            doc = pool.parse(pdf)
            wall = time.monotonic() - start
    return {
        "status": doc.status,
        "parser": doc.parser,
        "pages": doc.page_count,
        "wall_s": wall,
        "words": len(doc.markdown.split()),
        "md_mib": len(doc.markdown.encode()) / MIB,
        "start_mib": at_start / MIB,
        "peak_mib": peak.peak / MIB,
        "samples": peak.samples,
    }


_DOCLING_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from parsers.pdf.textlayer import native_converter
conv = native_converter()
print("ready", flush=True)
sys.stdin.readline()
start = time.monotonic()
result = conv.convert(sys.argv[1], raises_on_error=False)
md = result.document.export_to_markdown()
wall = time.monotonic() - start
print(json.dumps({"status": result.status.value, "pages": len(result.pages), "wall_s": wall,
                  "words": len(md.split()), "md_mib": len(md.encode()) / 2**20}), flush=True)
"""


def docling_leg(pdf: Path) -> dict[str, Any]:
    from parsers.isolation import tree_rss

    proc = subprocess.Popen(
        [sys.executable, "-c", _DOCLING_CHILD, str(pdf), str(REPO)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("docling child did not start")
    time.sleep(0.5)
    at_start = tree_rss(proc.pid)
    with _Peak(lambda: tree_rss(proc.pid)) as peak:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out = json.loads(proc.stdout.readline())
    proc.wait(timeout=60)
    return {
        **out,
        "start_mib": at_start / MIB,
        "peak_mib": peak.peak / MIB,
        "samples": peak.samples,
    }


def _row(name: str, n: int, r: dict[str, Any]) -> str:
    return (
        f"| {n:,} | {name} | {r['start_mib']:.0f} | {r['peak_mib']:.0f} | "
        f"{r['peak_mib'] - r['start_mib']:.0f} | {r['wall_s']:.1f} | {n / r['wall_s']:.1f} | "
        f"{r['words']:,} | {r['md_mib']:.1f} |"
    )


def main() -> None:
    from tests.helpers.pdfdraw import manual_pdf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[250, 500, 1000])
    ap.add_argument("--batch", type=int, default=0, help="also page_batch=N on the largest")
    ap.add_argument("--dir", default="/tmp/corpusflow-longpdf")
    ap.add_argument("--only", choices=["corpusflow", "docling"], default=None)
    args = ap.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for n in args.pages:
        files[n] = folder / f"manual-{n}.pdf"
        if not files[n].exists():
            start = time.monotonic()
            manual_pdf(files[n], n)
            print(f"wrote {files[n]} in {time.monotonic() - start:.0f} s", file=sys.stderr)
    with open("/proc/loadavg") as f:
        print(f"load average before: {f.read().strip()}")
    print(f"python {sys.version.split()[0]}")
    print(
        "| pages | parser | RSS at start MiB | peak RSS MiB | peak - start | wall s | "
        "pages/s | words | Markdown MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    legs: list[tuple[str, Callable[[Path], dict[str, Any]]]] = [
        ("corpusflow", corpusflow_leg),
        ("docling", docling_leg),
    ]
    for n, pdf in files.items():
        for name, leg in legs:
            if args.only and name != args.only:
                continue
            result = leg(pdf)
            print(_row(name, n, result), flush=True)
            print(json.dumps({"leg": name, "n": n, **result}), file=sys.stderr)
    if args.batch:
        n = max(files)
        result = corpusflow_leg(files[n], args.batch)
        print(_row(f"corpusflow page_batch={args.batch}", n, result), flush=True)
        print(json.dumps({"leg": "batch", "n": n, **result}), file=sys.stderr)
    with open("/proc/loadavg") as f:
        print(f"load average after: {f.read().strip()}")


if __name__ == "__main__":
    main()
