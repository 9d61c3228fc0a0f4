"""Word recall of corpusflow's stored Markdown against LibreOffice's own text export.

Usage:
    python bench/words_recall.py DIR [--refs REFDIR] [--json OUT.json] [--ext rtf --ext doc ...]
    python bench/words_recall.py --compare BEFORE.json AFTER.json

For every RTF, DOC, DOCX, ODT, XLS, XLSX, PPT and PPTX file directly in DIR: LibreOffice
(``soffice``) exports the reference text (Writer: UTF-8 text; Calc: CSV of every sheet with the
cells as shown; Impress: PDF, read with ``pdftotext``: the slides as shown, master and layout
shapes and SmartArt included, speaker notes not); for plain text kinds (txt, Markdown, RST,
Org, CSV, YAML; ``--ext`` names them) the reference is the file's own text, for HTML the text
of its elements outside script and style (Python's html.parser); and
corpusflow parses the file (``ParserPool``: the same isolation as an ingest). Recall is the
share of the reference's words (the shared definition in ../shared/tools/parse_metrics.py:
case-folded word tokens, as a bag) that the stored Markdown holds; a failed file counts 0 and
shows its category. For PDF the reference is poppler's ``pdftotext`` (the text layer). References are cached in REFDIR (default DIR/.lo-refs) so a second run
only parses. ``--compare`` prints per-format means and the files that changed between runs.
``distinct`` beside ``recall`` is the share of the reference's distinct words found: text
shown on every slide (a master's footer) counts once there, as corpusflow stores it once.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WRITER = {".rtf", ".doc", ".docx", ".odt"}
CALC = {".xls", ".xlsx"}
IMPRESS = {".ppt", ".pptx"}
# Read as they are: the reference is the file's own words (markup characters are not words).
PLAIN = {".txt", ".md", ".markdown", ".rst", ".org", ".csv", ".tsv", ".yaml", ".yml"}
HTML = {".html", ".htm", ".xhtml"}
# Calc CSV export: comma, double quote, UTF-8, first line 1, cells "as shown" (formatted),
# every sheet to its own file (the last token, -1; LibreOffice >= 7.2).
CSV_FILTER = "csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,true,false,false,-1"
WORD = re.compile(r"[\w\u4e00-\u9fff]+", re.UNICODE)  # as ../shared/tools/parse_metrics.py


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in WORD.findall(text))


def _html_text(path: Path) -> str:
    from html.parser import HTMLParser

    class _Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.parts: list[str] = []
            self.skip = 0

        def handle_starttag(self, tag: str, attrs: object) -> None:
            self.skip += tag in ("script", "style")

        def handle_endtag(self, tag: str) -> None:
            if tag in ("script", "style") and self.skip:
                self.skip -= 1

        def handle_data(self, data: str) -> None:
            if not self.skip:
                self.parts.append(data)

    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return " ".join(parser.parts)


def reference(path: Path, refs: Path) -> str | None:
    """LibreOffice's text of ``path`` (cached), or None when LibreOffice cannot read it;
    plain text kinds as they are, HTML its elements' text."""
    if path.suffix.lower() in PLAIN:
        return path.read_text(encoding="utf-8", errors="replace")
    if path.suffix.lower() in HTML:
        return _html_text(path)
    if path.suffix.lower() == ".pdf":
        # poppler's text layer: what a reader can select (a scanned page has none).
        done = subprocess.run(
            ["pdftotext", "-enc", "UTF-8", str(path), "-"],
            capture_output=True,
            timeout=120,
            check=False,
        )
        return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None
    cached = refs / f"{path.name}.txt"
    if cached.exists():
        text = cached.read_text(encoding="utf-8")
        return text if text != "\0" else None
    suffix = path.suffix.lower()
    with tempfile.TemporaryDirectory() as tmp:
        target = "txt:Text (encoded):UTF8" if suffix in WRITER else CSV_FILTER
        if suffix in IMPRESS:
            target = "pdf"
        cmd = ["soffice", f"-env:UserInstallation=file://{tmp}/profile", "--headless"]
        cmd += ["--convert-to", target, "--outdir", f"{tmp}/out", str(path)]
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(cmd, capture_output=True, timeout=120, check=False)
        outs = sorted(Path(tmp, "out").glob("*")) if Path(tmp, "out").exists() else []
        if suffix in IMPRESS:
            for pdf in outs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf)], timeout=120)
            outs = sorted(Path(tmp, "out").glob("*.txt"))
        text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in outs)
    refs.mkdir(parents=True, exist_ok=True)
    cached.write_text(text if outs else "\0", encoding="utf-8")
    return text if outs else None


def measure(folder: Path, refs: Path, exts: set[str]) -> list[dict[str, object]]:
    from common.errors import DocumentError
    from common.settings import ParseSettings
    from parsers import ParserPool

    rows: list[dict[str, object]] = []
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower().lstrip(".") in exts
    )
    with ParserPool(ParseSettings()) as pool:
        for path in files:
            ref = reference(path, refs)
            ref_words = words(ref or "")
            if not ref_words:
                continue  # LibreOffice reads no words either: nothing to measure against
            row: dict[str, object] = {"file": path.name, "kind": path.suffix.lower()[1:]}
            try:
                out = pool.parse(path).markdown
                row["status"] = "indexed"
            except DocumentError as exc:
                out = ""
                row["status"] = exc.category.value
                row["error"] = str(exc)[:200]
            common = sum((words(out) & ref_words).values())
            row["ref_words"] = sum(ref_words.values())
            row["recall"] = round(common / sum(ref_words.values()), 4)
            row["distinct"] = round(len(set(words(out)) & set(ref_words)) / len(ref_words), 4)
            rows.append(row)
            print(f"{row['recall']:.3f} {row['status']:<10} {path.name}", flush=True)
    return rows


def summary(
    rows: list[dict[str, object]], key: str = "recall"
) -> dict[str, tuple[int, float, int]]:
    """Per kind: files, mean recall (``key``: recall or distinct), files not indexed."""
    kinds: dict[str, list[dict[str, object]]] = {}
    for row in rows:
        kinds.setdefault(str(row["kind"]), []).append(row)
    return {
        kind: (
            len(rs),
            statistics.mean(float(str(r.get(key, r["recall"]))) for r in rs),
            sum(r["status"] != "indexed" for r in rs),
        )
        for kind, rs in sorted(kinds.items())
    }


def print_summary(rows: list[dict[str, object]]) -> None:
    print("kind  files  mean recall  distinct  not indexed")
    distinct = summary(rows, "distinct")
    for kind, (n, mean, failed) in summary(rows).items():
        print(f"{kind:<5} {n:>5}  {mean:>11.3f}  {distinct[kind][1]:>8.3f}  {failed:>11}")


def compare(before: Path, after: Path) -> None:
    a = {str(r["file"]): r for r in json.loads(before.read_text())}
    b = {str(r["file"]): r for r in json.loads(after.read_text())}
    common = sorted(set(a) & set(b))
    sa, sb = summary([a[f] for f in common]), summary([b[f] for f in common])
    da = summary([a[f] for f in common], "distinct")
    db = summary([b[f] for f in common], "distinct")
    print("kind  files  before  after   distinct before  after   not indexed before -> after")
    for kind in sa:
        n, ma, fa = sa[kind]
        _, mb, fb = sb[kind]
        print(
            f"{kind:<5} {n:>5}  {ma:.3f}   {mb:.3f}   {da[kind][1]:>15.3f}  {db[kind][1]:.3f}"
            f"   {fa} -> {fb}"
        )
    print("\nchanged files (recall before -> after):")
    for f in common:
        ra, rb = float(str(a[f]["recall"])), float(str(b[f]["recall"]))
        if abs(ra - rb) >= 0.005 or a[f]["status"] != b[f]["status"]:
            print(f"  {ra:.3f} -> {rb:.3f}  {a[f]['status']} -> {b[f]['status']}  {f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--refs", help="reference cache (default FOLDER/.lo-refs)")
    ap.add_argument("--json", help="write per-file rows here")
    ap.add_argument(
        "--ext",
        action="append",
        default=[],
        help="rtf, doc, docx, odt, xls, xlsx, ppt, pptx; txt, md, html, ...",
    )
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        compare(Path(args.compare[0]), Path(args.compare[1]))
        return
    if not args.folder:
        ap.error("FOLDER is required")
    folder = Path(args.folder)
    exts = set(args.ext) or {"rtf", "doc", "docx", "xls", "xlsx"}
    rows = measure(folder, Path(args.refs) if args.refs else folder / ".lo-refs", exts)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    print_summary(rows)


if __name__ == "__main__":
    main()
