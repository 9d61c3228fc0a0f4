"""A long PDF through corpusflow's parser and through plain docling (issue #36): peak
resident memory of each one's process tree, and pages/s, at 250, 500 and 1,000 pages.

Usage: PYTHONPATH=. python bench/long_pdf.py [--pages 250 500 1000] [--batch 0 200]
                                              [--dir /tmp/corpusflow-longpdf]
                                              [--only corpusflow|docling|batch]
       PYTHONPATH=. python bench/long_pdf.py --compare [PDF ...] [--pages ...] [--batch N]
       (the PDFs before the options: --pages and --batch take every number after them)

The PDFs are a generated maintenance manual (``tests.helpers.pdfdraw.manual_pdf``): running header and page
number, a chapter heading every 10 pages, section headings, paragraphs of wrapped
10 pt text and a ruled table on every 4th page, ~600 words a page. They are written
once into ``--dir`` and reused by later runs.

Each leg parses one file in a fresh process, after that process's start-up (imports,
converter construction), which is not timed:

- ``corpusflow``: ``ParserPool`` with the default ParseSettings (so ``page_batch``'s
  default: PDFs longer than it are parsed in page ranges) but ``timeout_s`` 1800 (a
  whole 2,000-page parse takes longer than the default 300 s), ``nice`` 0 (the docling
  child runs at 0 too) and ``pdf_pipeline`` 'offline' (what 'auto' picks on a machine
  without docling's layout models); the time is ``pool.parse`` as the caller sees it
  (parse, JSON over the pipe, ``ParsedDocument`` rebuilt);
- ``docling``: a fresh Python child running the converter our PDF path wraps
  (``parsers.pdf.textlayer.native_converter``: docling's model-free NativePdfPipeline),
  ``convert`` then ``export_to_markdown``;
- ``corpusflow page_batch=N`` (with ``--batch N ...``, the largest file only; every file
  with ``--only batch``): the same pool with ``page_batch`` N (0: the whole document in
  one parse).

``--compare``: each PDF (the generated manuals and any named) parsed whole
(``page_batch`` 0) and with the default ``page_batch`` (or ``--batch N``): the headings
(text, level), the words (Markdown without heading marks) and the Markdown compared.

Peak RSS is the largest sum over the child's whole process tree (``parsers.isolation.tree_rss``,
what the ``parse.memory_limit_mb`` cap counts), sampled every 0.1 s; "at start" is the
same sum once the child is ready. The pool process's own RSS (where ranges are merged) is
sampled the same way. Words are the Markdown's whitespace-separated words.
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


def corpusflow_leg(pdf: Path, page_batch: int | None = None) -> dict[str, Any]:
    from common.settings import ParseSettings
    from parsers import ParserPool

    batch = {} if page_batch is None else {"page_batch": page_batch}
    # A whole 2,000-page parse takes longer than the default 300 s deadline here.
    settings = ParseSettings(nice=0, pdf_pipeline="offline", timeout_s=1800, **batch)
    with ParserPool(settings) as pool:
        pool.start(1)
        worker = pool._idle.queue[0]
        assert worker is not None
        worker.wait_ready(180)  # start-up not timed
        time.sleep(0.5)
        at_start = worker.rss_bytes()
        pool_start = _own_rss()
        with _Peak(worker.rss_bytes) as peak, _Peak(_own_rss) as pool_peak:
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
        "pool_start_mib": pool_start / MIB,
        "pool_peak_mib": pool_peak.peak / MIB,
    }


def _own_rss() -> int:
    """This process's resident memory (the pool's side: it merges the ranges)."""
    import os

    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


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
    pool = f"{r['pool_start_mib']:.0f} -> {r['pool_peak_mib']:.0f}" if "pool_peak_mib" in r else ""
    return (
        f"| {n:,} | {name} | {r['start_mib']:.0f} | {r['peak_mib']:.0f} | "
        f"{r['peak_mib'] - r['start_mib']:.0f} | {r['wall_s']:.1f} | {n / r['wall_s']:.1f} | "
        f"{r['words']:,} | {r['md_mib']:.1f} | {pool} |"
    )


def _structure(doc: Any) -> tuple[list[tuple[str, int]], list[str]]:
    """(text, level) of the headings and the words of the Markdown without heading marks."""
    import re

    from docling_core.types.doc import SectionHeaderItem

    texts = doc.to_docling().texts
    headings = [(t.text, t.level) for t in texts if isinstance(t, SectionHeaderItem)]
    return headings, re.sub(r"(?m)^#+ ", "", doc.markdown).split()


def compare(files: list[Path], page_batch: int | None) -> None:
    """Whole-document parse against the range parse, per file."""
    from common.settings import ParseSettings
    from parsers import ParserPool

    base: dict[str, Any] = {"nice": 0, "pdf_pipeline": "offline", "timeout_s": 3600}
    batch = {} if page_batch is None else {"page_batch": page_batch}
    ranged_settings = ParseSettings(**base, **batch)
    print(f"page_batch {ranged_settings.page_batch} against 0 (whole)")
    print(
        "| file | pages | ranges | headings whole / ranges | same texts | same levels | "
        "words whole / ranges | same words | same Markdown |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with (
        ParserPool(ParseSettings(**base, page_batch=0)) as whole,
        ParserPool(ranged_settings) as ranged,
    ):
        for pdf in files:
            a, b = whole.parse(pdf), ranged.parse(pdf)
            (ha, wa), (hb, wb) = _structure(a), _structure(b)
            n = -(-a.page_count // ranged_settings.page_batch) if ranged_settings.page_batch else 1
            print(
                f"| {pdf.name} | {a.page_count} | {n} | {len(ha)} / {len(hb)} | "
                f"{[t for t, _ in ha] == [t for t, _ in hb]} | {ha == hb} | "
                f"{len(wa):,} / {len(wb):,} | {wa == wb} | {a.markdown == b.markdown} |",
                flush=True,
            )


def main() -> None:
    from tests.helpers.pdfdraw import manual_pdf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, nargs="+", default=[250, 500, 1000])
    ap.add_argument(
        "--batch", type=int, nargs="*", default=[], help="also page_batch=N on the largest"
    )
    ap.add_argument("--dir", default="/tmp/corpusflow-longpdf")
    ap.add_argument(
        "--only",
        choices=["corpusflow", "docling", "batch"],
        default=None,
        help="one leg (batch: only the --batch legs, on every --pages file)",
    )
    ap.add_argument("--compare", action="store_true", help="whole against ranges, per file")
    ap.add_argument("extra", nargs="*", type=Path, help="more PDFs to --compare")
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
    if args.compare:
        compare([*files.values(), *args.extra], args.batch[0] if args.batch else None)
        with open("/proc/loadavg") as f:
            print(f"load average after: {f.read().strip()}")
        return
    print(
        "| pages | parser | RSS at start MiB | peak RSS MiB | peak - start | wall s | "
        "pages/s | words | Markdown MiB | pool process RSS MiB, start -> peak |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
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
    for batch in args.batch:
        for n in files if args.only == "batch" else [max(files)]:
            result = corpusflow_leg(files[n], batch)
            print(_row(f"corpusflow page_batch={batch}", n, result), flush=True)
            print(json.dumps({"leg": "batch", "batch": batch, "n": n, **result}), file=sys.stderr)
    with open("/proc/loadavg") as f:
        print(f"load average after: {f.read().strip()}")


if __name__ == "__main__":
    main()
