"""Parse throughput of the offline PDF path: isolated ParserPool vs in-process.

Three ways to parse the same text-layer PDFs, in one run on one machine:

- ``docling``: plain docling, the same model-free converter our PDF path uses
  (``parsers.pdf.textlayer.native_converter``), called in this process, output
  exported to Markdown: what the library alone costs;
- ``inproc``: our full offline path (``parsers.parse_file``: pre-checks, text
  layer, structure, tables, OCR where needed) in this process;
- ``pool``: the same through ``ParserPool`` (spawned child, deadline, RSS
  sampling, JSON back over a pipe): what production runs.

Isolation cost = pool / inproc time; our total cost = pool / docling time. The
three modes are interleaved (each repetition runs every mode once over all
files, in a rotating order) so a busy machine slows them alike; a warm-up pass
of each is not counted (imports, converter construction, worker start-up).

Usage: python bench/parse_throughput.py [--files GLOB ...] [--reps N] [--workers 1]
Default files: ../shared/corpus/docling/pdf/*.pdf
"""

from __future__ import annotations

import argparse
import glob
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser()
    default = str(REPO.parent / "shared" / "corpus" / "docling" / "pdf" / "*.pdf")
    ap.add_argument("--files", nargs="+", default=[default], help="file globs")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions of each mode")
    args = ap.parse_args()

    from common.errors import DocumentError
    from common.settings import ParseSettings
    from parsers import ParserPool, parse_file
    from parsers.pdf.textlayer import native_converter

    files = sorted({Path(p) for pattern in args.files for p in glob.glob(pattern)})
    if not files:
        sys.exit(f"no files match {args.files}")
    settings = ParseSettings(workers=1)

    def plain_docling(path: Path) -> None:
        result = native_converter().convert(path, raises_on_error=False)
        result.document.export_to_markdown()

    def ours_inproc(path: Path) -> None:
        parse_file(path, settings)

    with ParserPool(settings) as pool:

        def ours_pool(path: Path) -> None:
            pool.parse(path)

        modes: dict[str, Callable[[Path], None]] = {
            "docling": plain_docling,
            "inproc": ours_inproc,
            "pool": ours_pool,
        }
        failures: dict[str, set[str]] = {m: set() for m in modes}

        def one_pass(name: str) -> float:
            start = time.perf_counter()
            for path in files:
                try:
                    modes[name](path)
                except DocumentError as exc:
                    failures[name].add(f"{path.name}: {exc}")
            return time.perf_counter() - start

        for name in modes:  # warm-up, not timed
            one_pass(name)
        times: dict[str, list[float]] = {m: [] for m in modes}
        order = list(modes)
        for rep in range(args.reps):
            rotated = order[rep % len(order) :] + order[: rep % len(order)]
            for name in rotated:
                times[name].append(one_pass(name))
                print(f"rep {rep + 1} {name:8s} {times[name][-1]:7.2f} s", file=sys.stderr)

    n = len(files)
    med = {m: statistics.median(t) for m, t in times.items()}
    print(f"files: {n} ({', '.join(p.name for p in files)})")
    print(f"repetitions: {args.reps} (interleaved, rotating order), median pass time")
    print("| mode | median s / pass | docs/s | min s | max s |")
    print("|---|---|---|---|---|")
    for m, t in times.items():
        print(f"| {m} | {med[m]:.2f} | {n / med[m]:.2f} | {min(t):.2f} | {max(t):.2f} |")
    iso = med["pool"] / med["inproc"] - 1
    print(f"isolation cost (pool vs inproc): {iso * 100:+.1f}% (target <= +15%)")
    print(f"ours isolated vs plain docling: {med['pool'] / med['docling']:.2f}x time")
    print(f"ours in-process vs plain docling: {med['inproc'] / med['docling']:.2f}x time")
    for m, errs in failures.items():
        for e in sorted(errs):
            print(f"failed ({m}): {e}")


if __name__ == "__main__":
    main()
