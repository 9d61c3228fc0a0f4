"""PDF structure quality on the development PDFs vs PDFs the rules were not developed on.

The model-free PDF path's heading and table rules were tuned on the shared PDFs
(``../shared/corpus/docling/pdf``: the development set). Figures on files it
never saw say whether they generalise. Give the held-out folder on the command
line: PDFs with ground-truth Markdown in ``FOLDER/groundtruth/`` (``NAME.md`` or
``NAME.pdf.md``); files without ground truth are skipped.

Usage: python bench/pdf_heldout.py HELDOUT_DIR [--dev DIR] [--headings rules|layout|both]
                                     [--engine corpusflow|docling-native|text-layer] [--no-code]

``--headings`` picks how headings are found (``parsers.pdf.headings``): the font
and outline rules alone, the rapid-layout model's title boxes alone, or both
(the product default). Metrics are the shared definitions in
``../shared/tools/parse_metrics.py``; each file is parsed in this process.

``--dev ''`` scores the held-out folder alone. Besides text F1 and heading recall it
prints, per file and per set, the headings emitted and heading precision: ground-truth
headings found / headings emitted, pooled over the files whose ground truth has headings
(recall alone hides a flood of false headings).

``--engine`` scores something other than corpusflow's PDF parser on the same files,
to read corpusflow's figures against: ``docling-native`` is plain docling with its
model-free NativePdfPipeline (what runs offline without corpusflow's rules);
``text-layer`` is every character pdfium finds on each page, in pdfium's order (all the
words any text-layer parser could output, running heads and page numbers included:
its word recall bounds what a converter can recall without OCR, and its precision
shows how much of the printed page the ground truth leaves out).

``--unnumbered`` compares headings without a leading section number on either side ("2 1
analisi" and "analisi" both read "analisi"): pandoc's ``--number-sections``, LaTeX and
Typora's numbering CSS print numbers that the source Markdown does not hold, so the shared
metric's exact match counts a correctly found heading as both missed and false. It is a
second reading beside the shared metric's, never instead of it.

``--no-code`` scores against the ground truth without its fenced code blocks and HTML
comments: the shared metric counts every line starting with '#' as a heading, a shell or
Python comment in a listing too.

Every engine's Markdown is exported as the product stores it
(``parsers.registry.stored_markdown``: underscores as written; an escaped ``snake\\_case``
is two words to the metric, as it would be to search).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared"


def _scored(folder: Path) -> list[tuple[Path, Path]]:
    out = []
    for pdf in sorted(folder.glob("*.pdf")):
        for gt in (
            folder / "groundtruth" / f"{pdf.stem}.md",
            folder / "groundtruth" / f"{pdf.name}.md",
        ):
            if gt.exists():
                out.append((pdf, gt))
                break
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("heldout", help="folder of held-out PDFs with groundtruth/")
    ap.add_argument("--dev", default=str(SHARED / "corpus" / "docling" / "pdf"))
    ap.add_argument("--headings", choices=["rules", "layout", "both"], default=None)
    ap.add_argument(
        "--engine", choices=["corpusflow", "docling-native", "text-layer"], default="corpusflow"
    )
    ap.add_argument(
        "--no-code",
        action="store_true",
        help="score against the ground truth without fenced code and HTML comments (the"
        " shared metric counts a '#' comment in a listing as a heading)",
    )
    ap.add_argument(
        "--unnumbered",
        action="store_true",
        help="match headings without a leading section number on either side",
    )
    args = ap.parse_args()
    if args.headings is not None and args.engine != "corpusflow":
        ap.error("--headings applies to --engine corpusflow only")
    sys.path.insert(0, str(SHARED / "tools"))
    from parse_metrics import headings as shared_headings
    from parse_metrics import table_cell_recall, text_f1, words

    def headings(md: str) -> list[str]:
        heads = shared_headings(md)
        if args.unnumbered:  # "2 1 analisi" -> "analisi"; a heading that is only a number stays
            heads = [re.sub(r"^(?:\d+ )+(?=\D)", "", h) for h in heads]
        return heads

    def heading_recall(md: str, ref: str) -> float | None:
        """The shared metric's heading recall over ``headings`` above."""
        gt_heads = [h for h in headings(ref) if h]
        if not gt_heads:
            return None
        ours = set(headings(md))
        return sum(h in ours for h in gt_heads) / len(gt_heads)

    from common.settings import ParseSettings
    from parsers.pdf.offline import parse_offline
    from parsers.registry import stored_markdown

    settings = ParseSettings()
    kwargs = {} if args.headings is None else {"headings": args.headings}

    def convert(pdf: Path) -> str:
        if args.engine == "docling-native":
            from parsers.pdf.textlayer import native_converter

            return stored_markdown(native_converter().convert(pdf).document)
        if args.engine == "text-layer":
            import pypdfium2

            doc = pypdfium2.PdfDocument(pdf)
            try:
                return "\n\n".join(page.get_textpage().get_text_range() for page in doc)
            finally:
                doc.close()
        return stored_markdown(parse_offline(pdf, settings, **kwargs).doc)

    sets = {"dev": Path(args.dev), "held-out": Path(args.heldout)}
    if not args.dev:  # --dev '': score the given folder only
        del sets["dev"]
    rows: list[tuple[str, str, float | None, float | None, float | None, float, str, str]] = []
    # Per file with headings in its ground truth: (ground-truth headings found, headings emitted).
    found_emitted: dict[tuple[str, str], tuple[int, int]] = {}

    def heading_hits(md: str, ref: str) -> tuple[int, int] | None:
        """Heading precision's parts: ground-truth headings found in the output (the numerator
        of heading recall) and headings the output has; None when the ground truth has none."""
        gt_heads = [h for h in headings(ref) if h]
        if not gt_heads:
            return None
        ours = headings(md)
        return sum(h in set(ours) for h in gt_heads), len(ours)

    def precision_recall(md: str, ref: str) -> str:
        """Word precision / recall behind text F1: which side loses (extra words, or the
        ground truth's words not found)."""
        a, b = words(md), words(ref)
        common = sum((a & b).values())
        return f"{common / max(sum(a.values()), 1):.2f}/{common / max(sum(b.values()), 1):.2f}"

    for name, folder in sets.items():
        for pdf, gt in _scored(folder):
            start = time.perf_counter()
            try:
                md = convert(pdf)
            except Exception as exc:  # DocumentError, or the other engines' own errors
                print(f"{name} {pdf.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            ref = gt.read_text()
            if args.no_code:
                ref = re.sub(r"(?ms)^(```|~~~).*?^\1[^\n]*$", "", ref)
                ref = re.sub(r"(?s)<!--.*?-->", "", ref)
            hits = heading_hits(md, ref)
            if hits is not None:
                found_emitted[(name, pdf.name)] = hits
            rows.append(
                (
                    name,
                    pdf.name,
                    text_f1(md, ref),
                    heading_recall(md, ref),
                    table_cell_recall(md, ref),
                    time.perf_counter() - start,
                    # Headings found / in the ground truth: recall alone hides a flood.
                    f"{len(headings(md))}/{len(headings(ref))}",
                    precision_recall(md, ref),
                )
            )

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    print(
        f"engine: {args.engine}, headings: {args.headings or 'default'}"
        + (", headings matched without leading section numbers" if args.unnumbered else "")
    )
    print(
        "| set | file | text F1 | word P/R | heading recall | headings ours/gt"
        " | heading precision | table-cell recall | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")

    def precision(found: int, emitted: int) -> str:
        return f"{found / emitted:.2f}" if emitted else "-"

    for r in rows:
        hits = found_emitted.get((r[0], r[1]))
        print(
            f"| {r[0]} | {r[1]} | {fmt(r[2])} | {r[7]} | {fmt(r[3])} | {r[6]}"
            f" | {precision(*hits) if hits else '-'} | {fmt(r[4])} | {r[5]:.2f} |"
        )
    print()
    print(
        "| set | files | mean text F1 | mean heading recall | headings emitted"
        " | heading precision | mean table-cell recall |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in sets:
        mine = [r for r in rows if r[0] == name]

        def mean(i: int, mine: list = mine) -> str:
            vals = [r[i] for r in mine if r[i] is not None]
            return f"{statistics.mean(vals):.3f} (n={len(vals)})" if vals else "-"

        # Pooled over the files with headings in their ground truth: ground-truth headings
        # found / headings emitted (what extra headings cost a chunk's heading path).
        hits = [v for (s, _), v in found_emitted.items() if s == name]
        found, emitted = sum(h[0] for h in hits), sum(h[1] for h in hits)
        print(
            f"| {name} | {len(mine)} | {mean(2)} | {mean(3)} | {emitted} (n={len(hits)})"
            f" | {precision(found, emitted)} | {mean(4)} |"
        )


if __name__ == "__main__":
    main()
