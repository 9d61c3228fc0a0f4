"""Retrieval quality by chunking strategy and search mode, dev vs held-out questions.

Usage: python bench/strategy_comparison.py [--out FILE] [--k 5] [--only LABEL ...]
       [--fts-tokenizer simple]

Builds one working corpus from ../shared/corpus/docling (ground truth excluded),
samples/corpus and samples/bilingual, ingests it once per chunking configuration (the
same collection, so each later configuration re-chunks from the parse cache), and
scores every search mode on the question sets in bench/questions/ (paths prefixed
with docling/, samples/ and bilingual/), separately for the ``dev`` questions (the
ones the pipeline was developed on) and the ``heldout`` ones (written afterwards,
never used to tune anything). Defaults are chosen on the held-out part. Then the
figures of the chosen default per language of the question and of its document.

Also chunk size (128 tokens against the model's 256), parent size (512 against 1024) and
the hybrid fusion constant (rrf_k 10 and 120 against 60) around the default.

Context variants: ``deterministic`` is title + heading path + the section's first
sentence (chunking.structure.deterministic_context); "title + headings" is the same
with the sentence left out (the bench patches the function; no setting selects it).
``--fts-tokenizer simple`` builds the full-text index with the whitespace/punctuation
tokenizer of earlier versions (the "before" of the CJK keyword search).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NO_SENTENCE = "title_headings"
CONFIGS: list[tuple[str, dict[str, object]]] = [
    (
        "fixed-size (256 tok, 32 overlap)",
        {"strategy": "fixed", "overlap_tokens": 32, "parents": False, "contextual": "none"},
    ),
    ("structure-aware", {"strategy": "structure", "parents": False, "contextual": "none"}),
    ("+ parent-child", {"strategy": "structure", "parents": True, "contextual": "none"}),
    (
        "+ prefix: title + headings + first sentence",
        {"strategy": "structure", "parents": True, "contextual": "deterministic"},
    ),
    (
        "+ prefix: title + headings",
        {"strategy": "structure", "parents": True, "contextual": NO_SENTENCE},
    ),
    (
        "default, chunks of 128 tokens",
        {
            "strategy": "structure",
            "parents": True,
            "contextual": "deterministic",
            "max_tokens": 128,
        },
    ),
    (
        "default, parents of 512 tokens",
        {
            "strategy": "structure",
            "parents": True,
            "contextual": "deterministic",
            "parent_max_tokens": 512,
        },
    ),
]
MODES = ["dense", "keyword", "hybrid"]
# Hybrid fusion variants (reciprocal rank fusion constant; 60 is the default), scored on
# every configuration as extra rows "hybrid rrf_k=N".
RRF_KS = [10, 120]
SPLITS = ["dev", "heldout"]


def _chunk_settings(chunk: dict[str, object]) -> dict[str, object]:
    if chunk.get("contextual") == NO_SENTENCE:
        return {**chunk, "contextual": "deterministic"}
    return chunk


def _patch_context(no_sentence: bool) -> None:
    import chunking.models as models
    import chunking.structure as structure

    original = getattr(structure, "_original_context", structure.deterministic_context)
    structure._original_context = original  # type: ignore[attr-defined]
    version = getattr(models, "_original_version", models.CHUNKER_VERSION)
    models._original_version = version  # type: ignore[attr-defined]
    # Another chunker version, so the documents are re-chunked with the patched context.
    models.CHUNKER_VERSION = f"{version}+{NO_SENTENCE}" if no_sentence else version
    if no_sentence:

        def heads_only(
            title: str, headings: tuple[str, ...], section_text: str, chunk_text: str = ""
        ) -> str:
            return str(original(title, headings, "", chunk_text))

        structure.deterministic_context = heads_only
    else:
        structure.deterministic_context = original


def _fmt(r: dict[str, Any]) -> str:
    return f"{r['hit_rate_at_1']:.3f} | {r['hit_rate_at_5']:.3f} | {r['mrr_at_10']:.3f}"


def _by_language(
    label: str, rows: list[tuple[str, str, dict[str, Any], int]], n_q: int, k: int, default: bool
) -> list[str]:
    from corpusflow.evaluate import per_group, summarize

    lines = [
        "",
        f"{label}{' (the default settings)' if default else ''}, all {n_q} questions, by "
        "question language / document language (HitRate@1 / HitRate@5 / MRR@10):",
        "",
        "| lang/doc_lang | n | " + " | ".join(MODES) + " |",
        "|---|---|" + "---|" * len(MODES),
    ]
    by_mode = {mode: r for lab, mode, r, _c in rows if lab == label}
    groups = {mode: per_group(r["per_question"], "lang/doc_lang", k) for mode, r in by_mode.items()}
    for value in sorted(groups["hybrid"]):
        n = groups["hybrid"][value]["questions"]
        cells = " | ".join(_fmt(groups[m][value]).replace(" | ", " / ") for m in MODES)
        lines.append(f"| {value} | {n} | {cells} |")
    zh_literal = {
        mode: summarize(
            [
                pq
                for pq in r["per_question"]
                if (pq.get("lang"), pq.get("doc_lang"), pq.get("kind")) == ("zh", "zh", "literal")
            ],
            k,
        )
        for mode, r in by_mode.items()
    }
    lines += [
        "",
        "Chinese literal questions over Chinese documents, HitRate@5: "
        + ", ".join(
            f"{m} {zh_literal[m]['hit_rate_at_5']:.3f} (n={zh_literal[m]['questions']})"
            for m in MODES
        ),
    ]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--out", help="also write the tables to this file")
    ap.add_argument("--only", nargs="*", help="run only configurations whose label ends so")
    ap.add_argument("--fts-tokenizer", help="base tokenizer of the FTS index (default: ours)")
    args = ap.parse_args()
    if args.fts_tokenizer:
        from storage import maintenance

        maintenance.FTS_SETTINGS["base_tokenizer"] = args.fts_tokenizer
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from corpusflow.runtime import configure_environment

    configure_environment()
    from common.settings import load_settings
    from corpusflow.api import Searcher
    from corpusflow.evaluate import Question, evaluate, load_questions
    from flows.refresh import refresh_flow

    work = Path(tempfile.mkdtemp(prefix="cf-strategies-"))
    corpus = work / "corpus"
    shutil.copytree(REPO.parent / "shared" / "corpus" / "docling", corpus / "docling")
    shutil.copytree(REPO / "samples" / "corpus", corpus / "samples")
    shutil.copytree(REPO / "samples" / "bilingual", corpus / "bilingual")
    questions: list[Question] = []
    for name in ("docling", "samples", "bilingual"):
        for q in load_questions(REPO / "bench" / "questions" / f"{name}.jsonl"):
            questions.append(Question(q.question, f"{name}/{q.path}", q.contains, q.extra))
    configs = [
        (label, chunk)
        for label, chunk in CONFIGS
        if not args.only or any(label.endswith(o) for o in args.only)
    ]
    rows: list[tuple[str, str, dict[str, Any], int]] = []
    for label, chunk in configs:
        _patch_context(chunk.get("contextual") == NO_SENTENCE)
        settings = load_settings(
            None,
            {
                "storage": {"db": str(work / "db")},
                "source": {"exclude": ["**/groundtruth/**", "**/README.md"]},
                "chunk": _chunk_settings(chunk),
                "run": {"progress": False},
            },
        )
        start = time.perf_counter()
        report = refresh_flow(str(corpus), settings.model_dump_json())
        ingest_s = time.perf_counter() - start
        searcher = Searcher.for_active(settings)
        for mode in MODES:

            def run(q: str, n: int, m: Any = mode, s: Searcher = searcher) -> list[dict[str, Any]]:
                return s.search(q, k=n, mode=m)

            result = evaluate(questions, run, k=args.k)
            rows.append((label, mode, result, int(report["chunks_written"])))
        for rrf_k in RRF_KS:

            def fused(q: str, n: int, rk: int = rrf_k, s: Searcher = searcher) -> list[Any]:
                return s.search(q, k=n, mode="hybrid", rrf_k=rk)

            result = evaluate(questions, fused, k=args.k)
            rows.append((label, f"hybrid rrf_k={rrf_k}", result, int(report["chunks_written"])))
            split = result["groups"]["split"]
            print(
                f"{label:45s} {mode:8s} {ingest_s:6.1f}s "
                + json.dumps(
                    {s: {k: split[s][k] for k in ("hit_rate_at_5", "mrr_at_10")} for s in split}
                ),
                file=sys.stderr,
            )
    n_split = {s: sum(q.extra.get("split") == s for q in questions) for s in SPLITS}
    tokenizer = args.fts_tokenizer or "icu"
    lines = [
        f"{len(questions)} questions (bench/questions/*.jsonl: {n_split['dev']} dev, "
        f"{n_split['heldout']} held-out), model all-MiniLM-L6-v2 (bundled), k={args.k}, "
        f"FTS tokenizer {tokenizer}",
        "",
        "| chunking | mode | dev H@1 | dev H@5 | dev MRR@10 | held-out H@1 | held-out H@5 "
        "| held-out MRR@10 | chunks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, mode, r, chunks in rows:
        split = r["groups"]["split"]
        lines.append(
            f"| {label} | {mode} | {_fmt(split['dev'])} | {_fmt(split['heldout'])} | {chunks} |"
        )

    def held(row: tuple[str, str, dict[str, Any], int]) -> tuple[float, float]:
        h = row[2]["groups"]["split"]["heldout"]
        return (h["mrr_at_10"], h["hit_rate_at_5"])

    hybrid = [row for row in rows if row[1] == "hybrid"]
    best = max(hybrid, key=held)
    from common.settings import ChunkSettings

    default = ChunkSettings()
    default_label = next(
        (
            label
            for label, chunk in configs
            if all(getattr(default, k) == v for k, v in _chunk_settings(chunk).items())
            and chunk.get("contextual") != NO_SENTENCE
        ),
        None,
    )
    lines += ["", f"Best hybrid configuration on the held-out questions: **{best[0]}**."]
    for shown in dict.fromkeys([best[0], default_label]):
        if shown is not None:
            lines += _by_language(shown, rows, len(questions), args.k, shown == default_label)
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
