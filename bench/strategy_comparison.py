"""Retrieval quality by chunking strategy and search mode, with the default offline model.

Usage: python bench/strategy_comparison.py [--out FILE] [--k 5]

Builds one working corpus from ../shared/corpus/docling (ground truth excluded) and
samples/corpus, ingests it once per chunking configuration (the same collection, so
each later configuration re-chunks from the parse cache), and scores every search mode
on the question sets in bench/questions/ (paths prefixed with docling/ and samples/).
Prints one Markdown table.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONFIGS: list[tuple[str, dict[str, object]]] = [
    (
        "fixed-size (256 tok, 32 overlap)",
        {"strategy": "fixed", "overlap_tokens": 32, "parents": False, "contextual": "none"},
    ),
    ("structure-aware", {"strategy": "structure", "parents": False, "contextual": "none"}),
    ("+ parent-child", {"strategy": "structure", "parents": True, "contextual": "none"}),
    (
        "+ contextual prefix",
        {"strategy": "structure", "parents": True, "contextual": "deterministic"},
    ),
]
MODES = ["dense", "keyword", "hybrid"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from corpusflow.runtime import configure_environment

    configure_environment()
    from corpusflow.api import Searcher
    from corpusflow.evaluate import Question, evaluate, load_questions
    from corpusflow.settings import load_settings
    from flows.refresh import refresh_flow

    work = Path(tempfile.mkdtemp(prefix="cf-strategies-"))
    corpus = work / "corpus"
    shutil.copytree(REPO.parent / "shared" / "corpus" / "docling", corpus / "docling")
    shutil.copytree(REPO / "samples" / "corpus", corpus / "samples")
    questions: list[Question] = []
    for name in ("docling", "samples"):
        for q in load_questions(REPO / "bench" / "questions" / f"{name}.jsonl"):
            questions.append(Question(q.question, f"{name}/{q.path}", q.contains, q.extra))
    rows = []
    for label, chunk in CONFIGS:
        settings = load_settings(
            None,
            {
                "storage": {"db": str(work / "db")},
                "source": {"exclude": ["**/groundtruth/**", "**/README.md"]},
                "chunk": chunk,
                "run": {"progress": False},
            },
        )
        start = time.perf_counter()
        report = refresh_flow(str(corpus), settings.model_dump_json())
        ingest_s = time.perf_counter() - start
        searcher = Searcher.for_active(settings)
        for mode in MODES:
            result = evaluate(
                questions, lambda q, n, m=mode, s=searcher: s.search(q, k=n, mode=m), k=args.k
            )
            rows.append((label, mode, result, report["chunks_written"], ingest_s))
            print(
                f"{label:35s} {mode:8s} {json.dumps({k: result[k] for k in ('hit_rate_at_1', 'hit_rate_at_5', 'mrr_at_10')})}",
                file=sys.stderr,
            )
    lines = [
        f"{len(questions)} questions (bench/questions/*.jsonl), model all-MiniLM-L6-v2 (bundled), k={args.k}",
        "",
        "| chunking | mode | HitRate@1 | HitRate@5 | MRR@10 | chunks |",
        "|---|---|---|---|---|---|",
    ]
    for label, mode, r, chunks, _s in rows:
        lines.append(
            f"| {label} | {mode} | {r['hit_rate_at_1']:.3f} | {r['hit_rate_at_5']:.3f} | {r['mrr_at_10']:.3f} | {chunks} |"
        )
    by_lang: dict[str, list[int]] = {}
    best = max(rows, key=lambda r: (r[2]["mrr_at_10"], r[2]["hit_rate_at_5"]))
    for pq in best[2]["per_question"]:
        hit = pq["rank"] is not None and pq["rank"] <= args.k
        by_lang.setdefault(f"{pq.get('lang', '?')}/{pq.get('kind', '?')}", []).append(int(hit))
    lines += ["", f"HitRate@{args.k} of the best row ({best[0]}, {best[1]}) by language/kind:", ""]
    lines += [f"- {key}: {sum(v)}/{len(v)}" for key, v in sorted(by_lang.items())]
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
