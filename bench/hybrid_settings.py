"""The product's hybrid search under given fusion settings, per split and question group.

Usage: python bench/hybrid_settings.py --db DIR --table CHUNK_TABLE [--table ...]
       [--fusion RRF_K:DENSE_WEIGHT ...]

Each question of bench/questions/multilingual.jsonl is asked through ``Searcher.search``
(mode hybrid, k 10) with ``SearchSettings(rrf_k, dense_weight)``, the query embedded by
the table's own model (``--table MODEL=TABLE``), and scored like bench/multilingual_eval.py: H@1 / H@5 / MRR@10
for English, non-English and cross-lingual questions, dev and heldout. This checks the
fusion rows of bench/dense_units.py through the product's own code path.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--collection", default="m_minilm")
    ap.add_argument("--table", action="append", required=True, help="MODEL=CHUNK_TABLE")
    ap.add_argument("--fusion", nargs="+", default=["60:1", "5:1.5"])
    args = ap.parse_args()

    from multilingual_eval import _groups

    from common.settings import EmbedSettings, SearchSettings
    from corpusflow.api import Filters, Searcher
    from corpusflow.evaluate import load_questions, rank_of, summarize
    from corpusflow.runtime import configure_environment
    from embedding import resolve_model
    from embedding.query_encoder import load_query_embedder
    from storage import Store

    configure_environment()
    questions = load_questions(REPO / "bench" / "questions" / "multilingual.jsonl")
    store = Store(args.db, args.collection)
    every = Filters(all_groups=True)
    for item in args.table:
        model, table = item.split("=", 1)
        settings = EmbedSettings(model=model)
        embedder = load_query_embedder(settings, resolve_model(settings))
        for fusion in args.fusion:
            rrf_k, dense_weight = fusion.split(":")
            searcher = Searcher(
                store,
                table,
                table.replace("__chunks__", "__parents__"),
                embedder,
                fusion=SearchSettings(rrf_k=int(rrf_k), dense_weight=float(dense_weight)),
            )
            per: dict[str, dict[str, list[dict[str, Any]]]] = {}
            for q in questions:
                hits = searcher.search(q.question, k=10, mode="hybrid", filters=every)
                rank, _ = rank_of(q, hits)
                for g in _groups(q):
                    per.setdefault(str(q.extra.get("split")), {}).setdefault(g, []).append(
                        {"rank": rank}
                    )
            for split in ("dev", "heldout"):
                cells = []
                for g in ("en", "non-en", "cross-lingual", "all"):
                    f = summarize(per[split][g])
                    cells.append(
                        f"{f['hit_rate_at_1']:.2f} / {f['hit_rate_at_5']:.2f} / {f['mrr_at_10']:.2f}"
                    )
                print(
                    f"| {model} | rrf_k {rrf_k}, dense x{dense_weight} | {split} | "
                    + " | ".join(cells)
                    + " |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
