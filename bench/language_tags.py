"""Accuracy of chunk language tags on a labelled sample.

Usage: python bench/language_tags.py [--labels bench/multilingual/lang_labels.jsonl] [--show]

Each label line is {"path", "text", "lang"}: a chunk as ``corpusflow chunks`` wrote it
and the language a reader of its document would search it in (a table or a number-only
chunk: its document's). Paths are relative to bench/multilingual/corpus, or absolute
(the shared corpus). Every labelled document is parsed and chunked as the product does
(bundled MiniLM tokenizer, default chunk settings); each label is matched to the chunk
with the same text and its ``lang`` compared. Prints accuracy overall, for table chunks
(``row, column = value`` triplets), for short chunks and per labelled language.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "multilingual"))  # check_questions: the split rule
ROOT = REPO / "bench" / "multilingual" / "corpus"


def _split(path: str) -> str:
    """The question set's split rule, per document (check_questions.split_of); the shared
    corpus's tables, where the tag rules were first looked at, count as dev."""
    if Path(path).is_absolute():
        return "dev"
    from check_questions import split_of

    return split_of(path)


def _norm(text: str) -> str:
    return " ".join(text.split())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--labels", default=str(REPO / "bench" / "multilingual" / "lang_labels.jsonl"))
    ap.add_argument("--show", action="store_true", help="print every wrong tag")
    args = ap.parse_args()
    from chunking.language import MIN_LETTERS, _is_table
    from chunking.structure import chunk_document
    from common.settings import ChunkSettings, EmbedSettings
    from embedding import load_embedder
    from parsers import parse_file

    labels = [json.loads(x) for x in Path(args.labels).read_text(encoding="utf-8").splitlines()]
    tokenizer = load_embedder(EmbedSettings()).tokenizer()
    tags: dict[str, dict[str, str]] = {}
    for path in sorted({label["path"] for label in labels}):
        file = Path(path) if Path(path).is_absolute() else ROOT / path
        if not file.is_file():
            continue
        chunks = chunk_document(parse_file(file), path, tokenizer, 256, ChunkSettings()).children
        tags[path] = {_norm(c.text): c.lang for c in chunks}
    groups: dict[str, Counter[str]] = {}
    unmatched = 0
    for label in labels:
        got = tags.get(label["path"], {}).get(_norm(label["text"]))
        if got is None:
            unmatched += 1
            continue
        ok = got == label["lang"]
        letters = sum(ch.isalpha() for ch in label["text"])
        split = _split(label["path"])
        kinds = ["all", split, f"{split} lang={label['lang']}"]
        kinds.append(f"{split} " + ("table" if _is_table(label["text"]) else "prose"))
        if letters < MIN_LETTERS:
            kinds.append(f"{split} short")
        for kind in kinds:
            groups.setdefault(kind, Counter())["ok" if ok else "wrong"] += 1
        if not ok and args.show:
            print(
                f"[{split}] {label['path']}: {label['lang']} tagged {got}: {label['text'][:80]!r}"
            )
    print(f"{len(labels)} labels, {len(labels) - unmatched} matched to a chunk")
    print("| chunks | n | accuracy |")
    print("|---|---|---|")
    for kind, c in sorted(groups.items(), key=lambda kv: (kv[0] != "all", kv[0].split()[0], kv[0])):
        n = c["ok"] + c["wrong"]
        print(f"| {kind} | {n} | {c['ok'] / n:.3f} |")


if __name__ == "__main__":
    main()
