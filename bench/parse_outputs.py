"""A digest of every parse output of a corpus, to compare two trees (a refactor must not
change them).

Usage: PYTHONPATH=TREE python bench/parse_outputs.py [--corpus DIR ...] > digests.tsv
then diff two runs' files. One line per file: path, format, parser, status, page count,
warnings count, SHA-256 of the Markdown and of the metadata; or the error category.
Parses in this process (parse_file), default ParseSettings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--corpus",
        action="append",
        default=[],
        help="folder to parse (repeatable); default ../shared/corpus/docling and samples/",
    )
    args = ap.parse_args()
    from common.errors import DocumentError
    from parsers import parse_file

    roots = [Path(c) for c in args.corpus] or [
        REPO.parent / "shared" / "corpus" / "docling",
        REPO / "samples",
    ]
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if "groundtruth" in path.parts or path.name == "README.md":
                continue
            rel = path.relative_to(root.parent)
            try:
                doc = parse_file(path)
            except DocumentError as exc:
                print(f"{rel}\terror\t{exc.category.value}", flush=True)
                continue
            md = hashlib.sha256(doc.markdown.encode()).hexdigest()[:16]
            meta = json.dumps(doc.metadata, sort_keys=True, default=str).encode()
            print(
                f"{rel}\t{doc.format}\t{doc.parser}\t{doc.status}\t{doc.page_count}\t"
                f"{len(doc.warnings)}\t{md}\t{hashlib.sha256(meta).hexdigest()[:16]}",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
