"""Retrieval by embedding model and fusion, per question language, dev vs held-out.

Usage: python bench/multilingual_eval.py [--set multilingual|legacy] [--models minilm use-m3]
       [--db DIR] [--out FILE] [--json FILE]

``--set multilingual``: bench/multilingual/corpus with bench/questions/multilingual.jsonl
(documents no rule was written on; splits fixed per document before any tuning, see
bench/multilingual/SOURCES.md). ``--set legacy``: ../shared/corpus/docling, samples/corpus
and samples/bilingual with bench/questions/{docling,samples,bilingual}.jsonl.

The first model ingests the corpus through the CLI (``corpusflow ingest --model M``); each
other model builds its table beside it from the parse cache (``corpusflow reindex
--model M``), as a user switching models does. Models that size chunks with the same
tokenizer (minilm, use-m3) share the chunks, so their chunk ids agree. Embedding time and
chunks/s come from each run report. Then every question is asked
once per leg, to depth 50, through the product's own Searcher: each model's dense leg,
the keyword leg (BM25 on the ICU-tokenised full-text index, the same for all models),
and the product's own hybrid search (its per-model fusion defaults).
The other fusions are computed from those lists, weighted reciprocal rank
``sum w / (rrf_k + rank)`` with rrf_k 60: the product's hybrid (one model's dense + keyword), the two
dense legs together, and fusions that weigh the legs by the query's script (CJK or
not). Scores per group: English questions, non-English, cross-lingual (question and
document in different languages), for each split.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEPTH = 50
RRF_K = 60


def _corpus(which: str) -> tuple[list[tuple[Path, str]], list[Any]]:
    """[(folder, prefix)], questions with paths under those prefixes."""
    from corpusflow.evaluate import Question, load_questions

    if which == "multilingual":
        root = REPO / "bench" / "multilingual" / "corpus"
        return [(root, "")], load_questions(REPO / "bench" / "questions" / "multilingual.jsonl")
    folders = [
        (REPO.parent / "shared" / "corpus" / "docling", "docling"),
        (REPO / "samples" / "corpus", "samples"),
        (REPO / "samples" / "bilingual", "bilingual"),
    ]
    questions = []
    for _, name in folders:
        for q in load_questions(REPO / "bench" / "questions" / f"{name}.jsonl"):
            questions.append(Question(q.question, f"{name}/{q.path}", q.contains, q.extra))
    return folders, questions


def _source(folders: list[tuple[Path, str]], work: Path) -> Path:
    if len(folders) == 1 and not folders[0][1]:
        return folders[0][0]
    import shutil

    src = work / "corpus"
    if not src.exists():
        for folder, prefix in folders:
            shutil.copytree(folder, src / prefix)
    return src


def _ingest(source: Path, db: Path, model: str, collection: str, command: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["CORPUSFLOW_SOURCE__EXCLUDE"] = json.dumps(["**/groundtruth/**", "**/README.md"])
    env["CORPUSFLOW_RUN__PROGRESS"] = "false"
    cmd = [
        str(Path(sys.executable).parent / "corpusflow"),
        command,
        str(source),
        "--db",
        str(db),
        "--model",
        model,
        "--collection",
        collection,
        "--json",
    ]
    start = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(
            f"{command} with {model} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )
    report: dict[str, Any] = json.loads(out.stdout[out.stdout.index("{") :])
    report["wall_s"] = time.perf_counter() - start
    if not report.get("embedded"):  # built by an earlier run of the bench: its figures
        report = _last_embedding_run(db, collection, str(report.get("chunk_table"))) or report
    return report


def _last_embedding_run(db: Path, collection: str, chunk_table: str) -> dict[str, Any] | None:
    from storage import Store
    from storage.records import RunRecord

    store = Store(str(db), collection)
    runs = [RunRecord.from_row(r) for r in store.rows(store.name("runs"))]
    done = [
        r.report
        for r in sorted(runs, key=lambda r: str(r.finished_at or ""))
        if r.report.get("chunk_table") == chunk_table and r.report.get("embedded")
    ]
    if not done:
        return None
    found = dict(done[-1])
    found["wall_s"] = float(found.get("elapsed_s") or 0.0)
    return found


def _collection(model: str) -> str:
    return "m_" + "".join(c if c.isalnum() else "_" for c in model)


def _table_bytes(db: Path, table: str) -> int:
    root = db / f"{table}.lance"
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.exists() else 0


Leg = list[dict[str, Any]]


def _legs(
    db: Path, collection: str, models: Sequence[str], questions: Sequence[Any]
) -> dict[str, list[Leg]]:
    from common.settings import load_settings
    from corpusflow.api import Filters, Searcher
    from embedding import resolve_model
    from embedding.query_encoder import load_query_embedder
    from storage import Store

    every = Filters(all_groups=True)
    legs: dict[str, list[Leg]] = {}
    for i, model in enumerate(models):
        settings = load_settings(
            None,
            {"storage": {"db": str(db), "collection": collection}, "embed": {"model": model}},
        )
        store = Store.from_settings(settings.storage)
        spec = resolve_model(settings.embed)
        searcher = Searcher(
            store,
            store.chunks.name(spec.table_suffix),
            store.chunks.parent_name(spec.table_suffix),
            load_query_embedder(settings.embed, spec),
            fusion=settings.search,  # CORPUSFLOW_SEARCH__* from the environment
        )
        legs[f"dense:{model}"] = [
            searcher.search(q.question, k=DEPTH, mode="dense", filters=every) for q in questions
        ]
        # What a user gets: the product's own hybrid, with this model's fusion defaults
        # (embedding.presets.fusion_defaults), not this script's RRF_K.
        legs[f"hybrid:{model}"] = [
            searcher.search(q.question, k=DEPTH, mode="hybrid", filters=every) for q in questions
        ]
        if i == 0:
            legs["keyword"] = [
                searcher.search(q.question, k=DEPTH, mode="keyword", filters=every)
                for q in questions
            ]
    return legs


def _fuse(lists: Sequence[tuple[Leg, float]]) -> Leg:
    scores: dict[str, float] = {}
    rows: dict[str, dict[str, Any]] = {}
    for ranked, weight in lists:
        if weight <= 0:
            continue
        for rank, row in enumerate(ranked, start=1):
            cid = row["chunk_id"]
            scores[cid] = scores.get(cid, 0.0) + weight / (RRF_K + rank)
            rows.setdefault(cid, row)
    return [rows[c] for c in sorted(scores, key=lambda c: (-scores[c], c))]


Policy = Callable[[str], dict[str, float]]  # query -> {leg: weight}


def _policies(models: Sequence[str]) -> dict[str, Policy]:
    from chunking.language import has_cjk

    out: dict[str, Policy] = {}
    for m in models:
        out[f"dense {m}"] = lambda q, m=m: {f"dense:{m}": 1.0}
    out["keyword"] = lambda q: {"keyword": 1.0}
    for m in models:
        out[f"product hybrid {m} (its fusion defaults)"] = lambda q, m=m: {f"hybrid:{m}": 1.0}
    for m in models:
        out[f"hybrid {m} + keyword"] = lambda q, m=m: {f"dense:{m}": 1.0, "keyword": 1.0}
        for w in (1.5, 2.0):
            out[f"hybrid {m} + keyword x{w} for CJK queries"] = lambda q, m=m, w=w: {
                f"dense:{m}": 1.0,
                "keyword": w if has_cjk(q) else 1.0,
            }
            out[f"hybrid {m} + keyword x{w} for CJK, x{1 / w:.2f} otherwise"] = lambda q, m=m, w=w: {
                f"dense:{m}": 1.0,
                "keyword": w if has_cjk(q) else 1 / w,
            }
    if len(models) >= 2:
        a, b = models[0], models[1]
        out[f"{a} + {b} + keyword"] = lambda q: {
            f"dense:{a}": 1.0,
            f"dense:{b}": 1.0,
            "keyword": 1.0,
        }
        out[f"{a} + {b} (CJK query: {b} + keyword only)"] = lambda q: (
            {f"dense:{b}": 1.0, "keyword": 1.0}
            if has_cjk(q)
            else {f"dense:{a}": 1.0, f"dense:{b}": 1.0, "keyword": 1.0}
        )
        out[f"{a} for Latin queries, {b} for CJK, + keyword"] = lambda q: (
            {f"dense:{b}": 1.0, "keyword": 1.0}
            if has_cjk(q)
            else {f"dense:{a}": 1.0, "keyword": 1.0}
        )
    return out


def _groups(q: Any) -> list[str]:
    lang = str(q.extra.get("lang", "?"))
    doc = str(q.extra.get("doc_lang", lang))
    out = ["all", "en" if lang == "en" else "non-en"]
    if lang != doc:
        out.append("cross-lingual")
    return out


def _score(
    questions: Sequence[Any], ranked: Sequence[Leg]
) -> dict[str, dict[str, dict[str, float]]]:
    from corpusflow.evaluate import rank_of, summarize

    per: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for q, results in zip(questions, ranked, strict=True):
        rank, _ = rank_of(q, results[:10])
        split = str(q.extra.get("split", "all"))
        for group in _groups(q):
            per.setdefault(split, {}).setdefault(group, []).append({"rank": rank})
    return {s: {g: summarize(v) for g, v in gs.items()} for s, gs in per.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", default="multilingual", choices=["multilingual", "legacy"])
    ap.add_argument("--models", nargs="+", default=["minilm", "use-m3"])
    ap.add_argument("--db", help="database folder (kept; reused when it exists)")
    ap.add_argument("--out", help="write the Markdown tables here too")
    ap.add_argument("--json", help="write all figures as JSON here")
    args = ap.parse_args()
    from corpusflow.runtime import configure_environment

    configure_environment()
    folders, questions = _corpus(args.set)
    work = Path(args.db or f"/tmp/cf-multilingual-{args.set}")
    work.mkdir(parents=True, exist_ok=True)
    db = work / "db"
    source = _source(folders, work)
    cost: dict[str, dict[str, Any]] = {}
    collection = _collection(args.models[0])
    for i, model in enumerate(args.models):
        report = _ingest(source, db, model, collection, "reindex" if i else "ingest")
        stages = report.get("stage_s") or {}
        embedded = int(report.get("embedded") or 0)
        embed_s = float(stages.get("embed", 0.0))
        cost[model] = {
            "chunks": int(report.get("chunks_written") or 0),
            "embedded": embedded,
            "embed_s": round(embed_s, 2),
            "load_model_s": round(float(stages.get("load_model", 0.0)), 2),
            "chunks_per_s": round(embedded / embed_s, 1) if embed_s else None,
            "wall_s": round(report["wall_s"], 1),
            "table_bytes": _table_bytes(db, str(report.get("chunk_table") or "")),
        }
        print(f"{model}: {cost[model]}", file=sys.stderr)
    legs = _legs(db, collection, args.models, questions)
    figures: dict[str, Any] = {}
    for label, policy in _policies(args.models).items():
        fused = []
        for i, q in enumerate(questions):
            weights = policy(q.question)
            fused.append(_fuse([(legs[leg][i], w) for leg, w in weights.items()]))
        figures[label] = _score(questions, fused)
    splits = sorted({str(q.extra.get("split", "all")) for q in questions})
    counts = {
        s: {
            g: sum(1 for q in questions if q.extra.get("split", "all") == s and g in _groups(q))
            for g in ("all", "en", "non-en", "cross-lingual")
        }
        for s in splits
    }
    lines = [
        f"{len(questions)} questions ({args.set} set): "
        + "; ".join(
            f"{s}: " + ", ".join(f"{g} {n}" for g, n in c.items()) for s, c in counts.items()
        ),
        "",
        "| model | chunks | texts embedded | embed s | chunks/s | model load s | table MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, c in cost.items():
        lines.append(
            f"| {model} | {c['chunks']} | {c['embedded']} | {c['embed_s']} | {c['chunks_per_s']} "
            f"| {c['load_model_s']} | {c['table_bytes'] / 2**20:.1f} |"
        )
    for split in splits:
        lines += [
            "",
            f"**{split}** (H@1 / H@5 / MRR@10)",
            "",
            "| legs and fusion | English | non-English | cross-lingual | all |",
            "|---|---|---|---|---|",
        ]
        for label, fig in figures.items():
            cells = []
            for g in ("en", "non-en", "cross-lingual", "all"):
                f = fig.get(split, {}).get(g)
                cells.append(
                    f"{f['hit_rate_at_1']:.2f} / {f['hit_rate_at_5']:.2f} / {f['mrr_at_10']:.2f}"
                    if f
                    else "-"
                )
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"cost": cost, "figures": figures}, indent=1))


if __name__ == "__main__":
    main()
