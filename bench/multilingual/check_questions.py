"""Check a question set against what the product indexes.

Usage (from the repository root, with the project's venv):
    python bench/multilingual/check_questions.py [bench/questions/multilingual.jsonl]
        [--corpus bench/multilingual/corpus] [--cache /tmp/mlq-cache]

For every document a question names, computes what ``corpusflow parse FILE`` prints and
the chunks ``corpusflow chunks FILE`` makes (same calls, in one process; cached by the
file's sha256) and checks that each question's ``contains`` occurs, whitespace-normalised
and case-insensitively (as ``corpusflow.evaluate.rank_of`` compares), in the parsed
Markdown AND in one chunk's text or parent text (else no retrieval could ever score it). Also checks the
fields, the allowed values and that all questions of one document share a split, and
that the split follows the rule in SOURCES.md. Prints counts per lang / kind / split and
exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
KINDS = {"literal", "paraphrase", "table", "section", "cross-lingual"}
LANGS = {"en", "zh", "ja", "ko"}
FIELDS = {"question", "path", "contains", "lang", "doc_lang", "kind", "split"}


def split_of(path: str) -> str:
    """The split rule: sha256 of the corpus-relative path, first byte < 90 -> dev (~35%)."""
    return "dev" if hashlib.sha256(path.encode("utf-8")).digest()[0] < 90 else "heldout"


def norm(text: str) -> str:
    return " ".join(text.split()).lower()


class Indexer:
    """What ``corpusflow parse FILE`` prints and what ``corpusflow chunks FILE --json``
    emits, computed in this process with the same calls as those commands (the parser
    runs inline, as ``corpusflow parse --inline``; one import and one tokenizer for all
    files), cached by the file's content hash."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self._state: tuple[Any, ...] | None = None

    def _setup(self) -> tuple[Any, ...]:
        if self._state is None:
            from common.settings import load_settings
            from corpusflow.fingerprints import Fingerprints
            from corpusflow.parse_chunk import make_contextualizer
            from corpusflow.runtime import configure_environment
            from embedding import load_embedder, resolve_model
            from storage import Store

            configure_environment()
            settings = load_settings()
            spec = resolve_model(settings.embed)
            fps = Fingerprints.of(settings, spec)
            ctx = make_contextualizer(settings, Store.from_settings(settings.storage))
            tokenizer = load_embedder(settings.embed, spec).tokenizer()
            self._state = (settings, fps, ctx, tokenizer)
        return self._state

    def _compute(self, file: Path) -> tuple[str, list[dict[str, Any]]]:
        from corpusflow.parse_chunk import chunk_parsed
        from corpusflow.plan import WorkItem
        from parsers import parse_file
        from sources import LocalSource, SourceFile
        from storage.records import PlanReason

        settings, fps, ctx, tokenizer = self._setup()
        parsed = parse_file(file, settings.parse)
        st = file.stat()
        item = WorkItem(
            SourceFile(file.name, st.st_size, st.st_mtime, str(file)), "", PlanReason.NEW
        )
        item.sha256 = LocalSource.content_hash(item.file)
        result = chunk_parsed(item, parsed, tokenizer, settings, fps, ctx)
        parents = {p.parent_id: p.text for p in result.parents}
        rows = [
            {"text": c.text, "parent_text": parents[c.parent_id], "position": c.position}
            for c in result.children
        ]
        return parsed.markdown.rstrip() + "\n", rows

    def get(self, file: Path) -> tuple[str, list[dict[str, Any]]]:
        """(parsed Markdown, chunks with text and parent_text) of one file."""
        key = hashlib.sha256(file.read_bytes()).hexdigest()[:16]
        md, js = self.cache / f"{key}.md", self.cache / f"{key}.json"
        if not (md.exists() and js.exists()):
            text, rows = self._compute(file)
            md.write_text(text, encoding="utf-8")
            js.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
        return md.read_text(encoding="utf-8"), json.loads(js.read_text(encoding="utf-8"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "questions", nargs="?", default=str(ROOT / "bench/questions/multilingual.jsonl")
    )
    ap.add_argument("--corpus", default=str(ROOT / "bench/multilingual/corpus"))
    ap.add_argument("--cache", default="/tmp/mlq-cache")
    ap.add_argument(
        "--docs-only", action="store_true", help="parse every corpus file, no questions"
    )
    args = ap.parse_args()
    corpus, cache = Path(args.corpus), Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    indexer = Indexer(cache)
    if args.docs_only:
        for f in sorted(corpus.iterdir()):
            md, rows = indexer.get(f)
            print(f"{f.name}\t{len(md)} chars\t{len(rows)} chunks", flush=True)
        return 0
    problems: list[str] = []
    counts: Counter[tuple[str, str]] = Counter()
    splits: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    lines = Path(args.questions).read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        q = json.loads(line)
        where = f"line {n} ({q.get('question', '')[:30]})"
        if set(q) != FIELDS:
            problems.append(f"{where}: fields {sorted(set(q) ^ FIELDS)}")
            continue
        if q["kind"] not in KINDS or q["lang"] not in LANGS or q["doc_lang"] not in LANGS:
            problems.append(f"{where}: kind/lang/doc_lang {q['kind']}/{q['lang']}/{q['doc_lang']}")
        if (q["question"], q["path"]) in seen:
            problems.append(f"{where}: duplicate question")
        seen.add((q["question"], q["path"]))
        if q["split"] != split_of(q["path"]):
            problems.append(f"{where}: split {q['split']} but the rule says {split_of(q['path'])}")
        if splits.setdefault(q["path"], q["split"]) != q["split"]:
            problems.append(f"{where}: {q['path']} has questions in two splits")
        if not (2 if q["kind"] == "table" else 4) <= len(q["contains"]) <= 80:
            problems.append(f"{where}: contains has {len(q['contains'])} characters")
        file = corpus / q["path"]
        if not file.is_file():
            problems.append(f"{where}: no such document {q['path']}")
            continue
        md, rows = indexer.get(file)
        snippet = norm(q["contains"])
        if snippet not in norm(md):
            problems.append(f"{where}: contains {q['contains']!r} not in the parsed text")
        elif not any(snippet in norm(r["text"]) or snippet in norm(r["parent_text"]) for r in rows):
            problems.append(f"{where}: contains {q['contains']!r} in no chunk nor parent")
        for key in ("lang", "kind", "split"):
            counts[(key, q[key])] += 1
        counts[("lang/doc_lang", f"{q['lang']}/{q['doc_lang']}")] += 1
        counts[("split/lang", f"{q['split']}/{q['lang']}")] += 1
    total = sum(v for (k, _), v in counts.items() if k == "lang")
    print(f"{total} questions over {len(splits)} documents")
    for key in ("lang", "kind", "split", "lang/doc_lang", "split/lang"):
        row = ", ".join(f"{v}={c}" for (k, v), c in sorted(counts.items()) if k == key)
        print(f"  {key}: {row}")
    non_en = sum(c for (k, v), c in counts.items() if k == "lang" and v != "en")
    print(f"  not English: {non_en}/{total} = {non_en / max(total, 1):.0%}")
    for p in problems:
        print("PROBLEM", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
