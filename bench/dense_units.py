"""What the use-m3 dense leg embeds, and how a chunk is scored from it (issue #31).

Usage: python bench/dense_units.py --db DIR --table CHUNK_TABLE [--table ...] [--json FILE]

Reads each chunk table a bench/multilingual_eval.py run (or ``corpusflow reindex
--model use-m3`` with another ``embed.max_length``) left in DIR, and, for the
multilingual question set, compares dense representations of the same chunks, all
embedded with the product's own USEEmbedder:

- ``embed_text``: context + chunk, what the product embeds today (the stored vectors);
- ``text``: the chunk without its context prefix;
- ``windows W``: the chunk cut into sentence windows of at most W tokens (MiniLM
  tokenizer, the chunker's), each embedded alone (optionally after a short
  "title > headings" line), the chunk scored by the best window (max-sim);
- ``windows W + chunk``: the mean of the best window's and the whole chunk's score.

Each dense list is fused with the table's keyword leg (the product's Searcher, BM25 on
the ICU index) by weighted reciprocal rank, with several weights and rrf_k, and scored
per split and question group (English, non-English, cross-lingual) like
bench/multilingual_eval.py. The keyword leg and the scoring are the product's own; only
the dense scoring is computed here, exhaustively (every chunk), in NumPy.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
DEPTH = 50

_SENT = re.compile(r"(?<=[。！？!?；;])|(?<=[.:])\s+|\n+")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text) if s and s.strip()]


def windows(text: str, count: Any, max_tokens: int) -> list[str]:
    """Consecutive sentences packed into windows of at most ``max_tokens``; a longer
    sentence is a window of its own (USE has no length limit)."""
    out: list[str] = []
    cur: list[str] = []
    used = 0
    for s in sentences(text):
        n = count(s)
        if cur and used + n > max_tokens:
            out.append(" ".join(cur))
            cur, used = [], 0
        cur.append(s)
        used += n
    if cur:
        out.append(" ".join(cur))
    return out or [text]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--collection", default="m_minilm")
    ap.add_argument("--table", action="append", required=True)
    ap.add_argument("--json")
    ap.add_argument("--windows", nargs="*", type=int, default=[32, 64])
    ap.add_argument("--stored-only", action="store_true", help="no re-embedded variants")
    ap.add_argument("--no-text", action="store_true", help="skip the text-only variant")
    ap.add_argument("--no-heading", action="store_true", help="windows without a heading line only")
    ap.add_argument("--rrf-k", nargs="+", type=int, default=[60, 20])
    args = ap.parse_args()

    from multilingual_eval import _groups

    from common.settings import EmbedSettings
    from corpusflow.api import Filters, Searcher
    from corpusflow.evaluate import load_questions, rank_of, summarize
    from corpusflow.runtime import configure_environment
    from embedding import load_embedder, resolve_model
    from storage import Store

    configure_environment()
    questions = load_questions(REPO / "bench" / "questions" / "multilingual.jsonl")
    spec = resolve_model(EmbedSettings(model="use-m3"))
    embedder = load_embedder(EmbedSettings(model="use-m3"), spec)
    tok = embedder.tokenizer()

    def count(s: str) -> int:
        return len(tok.encode(s))

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(embedder.embed(list(texts), 256).dense, dtype=np.float32)

    qv = embed([q.question for q in questions])
    from chunking.language import has_cjk

    cjk = [has_cjk(q.question) for q in questions]
    store = Store(args.db, args.collection)
    every = Filters(all_groups=True)
    out: dict[str, Any] = {}
    for table_name in args.table:
        table = store.db.open_table(table_name)
        rows = table.to_arrow().to_pylist()
        parent_table = table_name.replace("__chunks__", "__parents__")
        parents = {
            r["parent_id"]: r["text"]
            for r in store.db.open_table(parent_table).to_arrow().to_pylist()
        }
        for r in rows:
            r["parent_text"] = parents.get(r["parent_id"], "")
        n_tokens = [int(r["n_tokens"]) for r in rows]
        print(
            f"{table_name}: {len(rows)} chunks, median {np.median(n_tokens):.0f} tokens",
            file=sys.stderr,
        )
        searcher = Searcher(store, table_name, parent_table, embedder)
        keyword_ids = [
            [
                h["chunk_id"]
                for h in searcher.search(q.question, k=DEPTH, mode="keyword", filters=every)
            ]
            for q in questions
        ]
        index = {r["chunk_id"]: i for i, r in enumerate(rows)}
        keyword = [[index[c] for c in ids if c in index] for ids in keyword_ids]

        # Dense scores: (questions x chunks) per variant.
        dense: dict[str, np.ndarray] = {}
        stored = np.asarray([r["vector"] for r in rows], dtype=np.float32)
        dense["embed_text (stored)"] = qv @ stored.T
        cost: dict[str, Any] = {"chunks": len(rows)}
        if not (args.stored_only or args.no_text):
            t0 = time.perf_counter()
            dense["text"] = qv @ embed([r["text"] for r in rows]).T
            cost["text_s"] = round(time.perf_counter() - t0, 2)
        for w in [] if args.stored_only else args.windows:
            for ctx in (False,) if args.no_heading else (False, True):
                owner: list[int] = []
                units: list[str] = []
                for i, r in enumerate(rows):
                    head = " > ".join([r["title"] or "", *(r["heading_path"] or [])]).strip(" >")
                    for piece in windows(r["text"], count, w):
                        owner.append(i)
                        units.append(f"{head}\n{piece}" if ctx and head else piece)
                t0 = time.perf_counter()
                uv = embed(units)
                name = f"windows {w}{' + heading line' if ctx else ''}"
                cost[name] = {"units": len(units), "s": round(time.perf_counter() - t0, 2)}
                sims = qv @ uv.T
                best = np.full((len(questions), len(rows)), -2.0, dtype=np.float32)
                own = np.asarray(owner)
                for j in range(len(units)):
                    np.maximum(best[:, own[j]], sims[:, j], out=best[:, own[j]])
                dense[name] = best
                dense[name + " + chunk"] = (best + dense["embed_text (stored)"]) / 2

        def ranked_dense(s: np.ndarray) -> list[list[int]]:
            return [list(np.argsort(-row, kind="stable")[:DEPTH]) for row in s]

        def fuse(lists: Sequence[tuple[list[int], float]], rrf_k: int) -> list[int]:
            scores: dict[int, float] = {}
            for ranked, weight in lists:
                for rank, c in enumerate(ranked, start=1):
                    scores[c] = scores.get(c, 0.0) + weight / (rrf_k + rank)
            return sorted(scores, key=lambda c: (-scores[c], c))

        def score(
            ranked: Sequence[list[int]], rows: list[dict[str, Any]] = rows
        ) -> dict[str, dict[str, dict[str, float]]]:
            per: dict[str, dict[str, list[dict[str, Any]]]] = {}
            for q, res in zip(questions, ranked, strict=True):
                rank, _ = rank_of(q, [rows[c] for c in res[:10]])
                for g in _groups(q):
                    per.setdefault(str(q.extra.get("split")), {}).setdefault(g, []).append(
                        {"rank": rank}
                    )
            return {s: {g: summarize(v) for g, v in gs.items()} for s, gs in per.items()}

        figures: dict[str, Any] = {"keyword": score(keyword)}
        for name, s in dense.items():
            d = ranked_dense(s)
            figures[f"dense {name}"] = score(d)
            for rrf_k in args.rrf_k:
                for wd, wk, wk_cjk in (
                    (1, 1, 1),
                    (1.5, 1, 1),
                    (2, 1, 1),
                    (1, 1.5, 1.5),
                    (1, 0.67, 1.5),
                ):
                    label = f"hybrid {name} | k{rrf_k} d{wd} kw{wk}/cjk{wk_cjk}"
                    figures[label] = score(
                        [
                            fuse([(d[i], wd), (keyword[i], wk_cjk if cjk[i] else wk)], rrf_k)
                            for i in range(len(questions))
                        ]
                    )
        out[table_name] = {"cost": cost, "figures": figures}
        for split in ("dev", "heldout"):
            print(f"\n{table_name} **{split}** (H@1 / H@5 / MRR@10)\n")
            print("| legs and fusion | English | non-English | cross-lingual | all |")
            print("|---|---|---|---|---|")
            for label, fig in figures.items():
                cells = []
                for g in ("en", "non-en", "cross-lingual", "all"):
                    f = fig.get(split, {}).get(g)
                    cells.append(
                        f"{f['hit_rate_at_1']:.2f} / {f['hit_rate_at_5']:.2f} / {f['mrr_at_10']:.2f}"
                        if f
                        else "-"
                    )
                print(f"| {label} | " + " | ".join(cells) + " |")
        print(json.dumps(cost), file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
