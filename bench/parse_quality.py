"""Parse quality per file and per format against ../shared/corpus/docling ground truth.

Usage: python bench/parse_quality.py [--corpus DIR] [--format pptx ...] [--markdown]
Metrics are the shared definitions in ../shared/tools/parse_metrics.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus" / "docling"))
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument(
        "--format",
        action="append",
        default=[],
        help="only this corpus folder (pdf, pptx, ...); repeatable",
    )
    args = ap.parse_args()
    corpus = Path(args.corpus)
    sys.path.insert(0, str(corpus.parents[1] / "tools"))
    from parse_metrics import heading_recall, table_cell_recall, text_f1

    from common.errors import DocumentError
    from common.settings import ParseSettings
    from parsers import ParserPool

    rows = []
    with ParserPool(ParseSettings()) as pool:
        folders = sorted(p for p in corpus.iterdir() if p.is_dir())
        for folder in [f for f in folders if not args.format or f.name in args.format]:
            gt_dir = folder / "groundtruth"
            for path in sorted(folder.iterdir()):
                if not path.is_file() or path.name == "README.md":
                    continue
                gt = next(
                    (
                        g
                        for g in (gt_dir / f"{path.name}.md", gt_dir / f"{path.stem}.md")
                        if g.exists()
                    ),
                    None,
                )
                start = time.perf_counter()
                try:
                    doc = pool.parse(path)
                except DocumentError as exc:
                    rows.append(
                        (folder.name, path.name, f"[{exc.category.value}]", None, None, None, 0.0)
                    )
                    continue
                elapsed = time.perf_counter() - start
                if gt is None:
                    rows.append((folder.name, path.name, doc.parser, None, None, None, elapsed))
                    continue
                ref = gt.read_text()
                rows.append(
                    (
                        folder.name,
                        path.name,
                        doc.parser,
                        text_f1(doc.markdown, ref),
                        heading_recall(doc.markdown, ref),
                        table_cell_recall(doc.markdown, ref),
                        elapsed,
                    )
                )

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    print("| format | file | parser | text F1 | heading recall | table-cell recall | s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r[0]} | {r[1]} | {r[2]} | {fmt(r[3])} | {fmt(r[4])} | {fmt(r[5])} | {r[6]:.2f} |"
        )
    print()
    print("| format | files scored | mean text F1 | mean heading recall | mean table-cell recall |")
    print("|---|---|---|---|---|")
    for folder in sorted({r[0] for r in rows}):
        scored = [r for r in rows if r[0] == folder and r[3] is not None]
        if not scored:
            continue

        def mean(i: int, scored: list = scored) -> str:
            vals = [r[i] for r in scored if r[i] is not None]
            return f"{statistics.mean(vals):.3f} (n={len(vals)})" if vals else "-"

        print(f"| {folder} | {len(scored)} | {mean(3)} | {mean(4)} | {mean(5)} |")


if __name__ == "__main__":
    main()
