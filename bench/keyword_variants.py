"""Keyword-leg variants of use-m3 hybrid search on the multilingual set (issue #31).

Usage: python bench/keyword_variants.py --db DIR/db [--collection m_use_m3] [--json FILE]
       [--only LABEL ...]

Reads the active use-m3 chunk table a ``bench/multilingual_eval.py --set multilingual
--models use-m3 --db DIR`` run left and asks every question of
bench/questions/multilingual.jsonl once per leg through the product's ``Searcher``
(dense and keyword, depth 50, as its hybrid mode does), then fuses the legs here with the
product's own ``rrf`` (use-m3's defaults: rrf_k 5, dense x1.5) and scores like
bench/multilingual_eval.py (H@1 / H@5 / MRR@10; English, non-English, cross-lingual; dev
and heldout). The baseline row is checked against ``Searcher.search(mode="hybrid")`` with
the CJK bigram leg and the language weighting off (the fusion these variants start from);
the last row is ``Searcher.search`` with the current defaults.

Variants (nothing is re-embedded; the extra indexes are copies in DIR/../kwvar):

- ``q-norm``: the keyword leg's query NFKC-folded, punctuation dropped, and question words /
  particles removed (``qnorm``: levels ``fold`` and ``strip``);
- ``ngram``: a second full-text index, character bigrams of the CJK runs of each chunk's
  ``embed_text`` (Lance ``base_tokenizer="ngram"``, 2-2, no stemming), as a third leg for
  a query with CJK characters, or instead of the ICU leg for such a query;
- ``parent``: a full-text index (the product's ICU settings) over the parent sections;
  each chunk takes its parent's rank as a third leg;
- ``dedupe``: at most one hit per parent section in the fused list (later ones move to
  the end), so more distinct sections reach the top 5.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
DEPTH = 50


Leg = list[str]  # chunk ids, best first


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--collection", default="m_use_m3")
    ap.add_argument("--json")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()

    import lancedb
    from lancedb.index import FTS
    from multilingual_eval import _groups

    from chunking.language import cjk_runs, has_cjk
    from common.settings import EmbedSettings, SearchSettings
    from corpusflow.api import Filters, Searcher, active_spec, rrf
    from corpusflow.evaluate import load_questions, rank_of, summarize
    from corpusflow.runtime import configure_environment
    from embedding.presets import fusion_defaults
    from embedding.query_encoder import load_query_embedder
    from storage import Store
    from storage.maintenance import CJK_FTS_SETTINGS, FTS_SETTINGS
    from storage.tables import read_table

    configure_environment()
    questions = load_questions(REPO / "bench" / "questions" / "multilingual.jsonl")
    store = Store(args.db, args.collection)
    active, spec = active_spec(store)
    embedder = load_query_embedder(EmbedSettings(model="use-m3"), spec)
    searcher = Searcher(store, active.chunk_table, active.parent_table, embedder)
    rrf_k, dense_w = fusion_defaults(spec)
    every = Filters(all_groups=True)

    chunks = read_table(
        store.db.open_table(active.chunk_table),
        ["chunk_id", "path", "text", "parent_id", "embed_text"],
    ).to_pylist()
    parents = {
        r["parent_id"]: r["text"]
        for r in read_table(
            store.db.open_table(active.parent_table), ["parent_id", "text"]
        ).to_pylist()
    }
    by_id = {r["chunk_id"]: r for r in chunks}
    hit = {
        c["chunk_id"]: {
            "chunk_id": c["chunk_id"],
            "path": c["path"],
            "text": c["text"],
            "parent_text": parents.get(c["parent_id"], ""),
        }
        for c in chunks
    }
    print(f"{len(chunks)} chunks, {len(parents)} parents", file=sys.stderr)

    # Extra indexes, copies beside the database.
    aux = lancedb.connect(str(Path(args.db).parent / "kwvar"))
    import pyarrow as pa

    def fresh(name: str, data: pa.Table, column: str, **fts: Any) -> Any:
        if name in aux.table_names():
            aux.drop_table(name)
        t = aux.create_table(name, data)
        t.create_index(column, config=FTS(**fts))
        return t

    t_cjk = fresh(
        "cjk_bigrams",
        pa.table(
            {
                "chunk_id": [c["chunk_id"] for c in chunks],
                "cjk": [cjk_runs(c["embed_text"]) for c in chunks],
            }
        ),
        "cjk",
        **CJK_FTS_SETTINGS,  # the product's CJK bigram index
    )
    t_par = fresh(
        "parents",
        pa.table({"parent_id": list(parents), "text": list(parents.values())}),
        "text",
        **FTS_SETTINGS,
    )
    chunks_of: dict[str, list[str]] = {}
    for c in chunks:
        chunks_of.setdefault(c["parent_id"], []).append(c["chunk_id"])

    def fts(table: Any, column: str, key: str, query: str, limit: int = DEPTH) -> list[str]:
        if not query.strip():
            return []
        try:
            rows = table.search(query, query_type="fts", fts_columns=column).limit(limit)
            return [r[key] for r in rows.select([key]).to_list()]
        except Exception as exc:  # an unparsable query
            print(f"fts error {query!r}: {exc}", file=sys.stderr)
            return []

    def keyword(query: str) -> Leg:
        if not query.strip():
            return []
        return [h["chunk_id"] for h in searcher.search(query, DEPTH, "keyword", every)]

    # Legs per question.
    from qnorm import normalize

    dense = [
        [h["chunk_id"] for h in searcher.search(q.question, DEPTH, "dense", every)]
        for q in questions
    ]
    kw = {"raw": [keyword(q.question) for q in questions]}
    for level in ("fold", "strip", "ko"):
        kw[level] = [keyword(normalize(q.question, level)) for q in questions]
    bigram = {
        level: [
            fts(t_cjk, "cjk", "chunk_id", cjk_runs(normalize(q.question, level))) for q in questions
        ]
        for level in ("fold", "strip")
    }
    parent_rank = {
        level: [
            fts(t_par, "text", "parent_id", normalize(q.question, level), 20) for q in questions
        ]
        for level in ("fold", "strip")
    }
    # The product's own hybrid with the two legs these variants are built from (dense,
    # ICU keyword; the CJK bigram leg and the language weighting of 8a78876 off): with the
    # fused order as it is (the baseline) and one chunk per section (``distinct_parents``).
    two_legs = {"cjk_bigram_weight": 0.0, "keyword_language_floor": 1.0}

    def product_hybrid(**fusion: Any) -> list[list[dict[str, Any]]]:
        s = Searcher(
            store,
            active.chunk_table,
            active.parent_table,
            embedder,
            fusion=SearchSettings(**two_legs, **fusion),
        )
        return [s.search(q.question, 10, "hybrid", every) for q in questions]

    product = product_hybrid(distinct_parents=False)
    sectioned = product_hybrid()
    default = [searcher.search(q.question, 10, "hybrid", every) for q in questions]

    def fuse(lists: Sequence[tuple[Leg, float]]) -> Leg:
        rows = [[({"chunk_id": c}, 0.0) for c in leg] for leg, _ in lists]
        return [r["chunk_id"] for r, _ in rrf(rows, rrf_k, weights=[w for _, w in lists])]

    def parent_leg(ranked_parents: list[str]) -> Leg:
        # each chunk of the parent at rank r takes rank r (ties by chunk id)
        out: list[str] = []
        for p in ranked_parents:
            out.extend(sorted(chunks_of.get(p, [])))
        return out

    def parent_fuse(lists: Sequence[tuple[Leg, float]], ranked_parents: list[str], w: float) -> Leg:
        scores: dict[str, float] = {}
        for leg, weight in lists:
            for rank, c in enumerate(leg, start=1):
                scores[c] = scores.get(c, 0.0) + weight / (rrf_k + rank)
        prank = {p: r for r, p in enumerate(ranked_parents, start=1)}
        for c in list(scores):
            r = prank.get(by_id[c]["parent_id"])
            if r is not None:
                scores[c] += w / (rrf_k + r)
        return sorted(scores, key=lambda c: (-scores[c], c))

    def dedupe(leg: Leg, per: int = 1) -> Leg:
        seen: dict[str, int] = {}
        head, tail = [], []
        for c in leg:
            p = by_id[c]["parent_id"]
            seen[p] = seen.get(p, 0) + 1
            (head if seen[p] <= per else tail).append(c)
        return head + tail

    Policy = Callable[[int, str], Leg]
    variants: dict[str, Policy] = {}
    variants["baseline (product hybrid: dense x1.5 + ICU keyword, rrf_k 5)"] = lambda i, q: fuse(
        [(dense[i], dense_w), (kw["raw"][i], 1.0)]
    )
    variants["keyword query NFKC + punctuation dropped"] = lambda i, q: fuse(
        [(dense[i], dense_w), (kw["fold"][i], 1.0)]
    )
    variants["keyword query NFKC + question words/particles stripped"] = lambda i, q: fuse(
        [(dense[i], dense_w), (kw["strip"][i], 1.0)]
    )
    variants["keyword query stripped + Korean particles split off / expanded"] = lambda i, q: fuse(
        [(dense[i], dense_w), (kw["ko"][i], 1.0)]
    )
    variants["query ko + CJK bigram leg x0.5 for CJK queries"] = lambda i, q: fuse(
        [(dense[i], dense_w), (kw["ko"][i], 1.0)]
        + ([(bigram["strip"][i], 0.5)] if has_cjk(q) else [])
    )
    variants["query ko + dedupe by parent"] = lambda i, q: dedupe(
        fuse([(dense[i], dense_w), (kw["ko"][i], 1.0)])
    )
    variants["keyword leg alone (ko)"] = lambda i, q: kw["ko"][i]
    for lv in ("fold", "strip"):
        for w in (0.5, 1.0):
            variants[f"+ CJK bigram leg x{w} for CJK queries (query {lv})"] = (
                lambda i, q, lv=lv, w=w: fuse(
                    [(dense[i], dense_w), (kw[lv][i], 1.0)]
                    + ([(bigram[lv][i], w)] if has_cjk(q) else [])
                )
            )
        variants[f"CJK bigram leg instead of ICU for CJK queries (query {lv})"] = (
            lambda i, q, lv=lv: fuse(
                [(dense[i], dense_w), (bigram[lv][i] if has_cjk(q) else kw[lv][i], 1.0)]
            )
        )
        for w in (0.5, 1.0):
            variants[f"+ parent-section keyword leg x{w} (query {lv})"] = lambda i, q, lv=lv, w=w: (
                fuse([(dense[i], dense_w), (kw[lv][i], 1.0), (parent_leg(parent_rank[lv][i]), w)])
            )
            variants[f"+ parent-section keyword score x{w} added to fused chunks (query {lv})"] = (
                lambda i, q, lv=lv, w=w: parent_fuse(
                    [(dense[i], dense_w), (kw[lv][i], 1.0)], parent_rank[lv][i], w
                )
            )
    variants["dedupe by parent (1 per parent)"] = lambda i, q: dedupe(
        fuse([(dense[i], dense_w), (kw["raw"][i], 1.0)])
    )
    variants["dedupe by parent (2 per parent)"] = lambda i, q: dedupe(
        fuse([(dense[i], dense_w), (kw["raw"][i], 1.0)]), 2
    )
    variants["query strip + dedupe by parent"] = lambda i, q: dedupe(
        fuse([(dense[i], dense_w), (kw["strip"][i], 1.0)])
    )
    for w in (0.25,):
        variants[f"+ CJK bigram leg x{w} for CJK queries (query fold)"] = lambda i, q, w=w: fuse(
            [(dense[i], dense_w), (kw["fold"][i], 1.0)]
            + ([(bigram["fold"][i], w)] if has_cjk(q) else [])
        )
    variants["+ CJK bigram leg top 10 only, x0.5 (query fold)"] = lambda i, q: fuse(
        [(dense[i], dense_w), (kw["fold"][i], 1.0)]
        + ([(bigram["fold"][i][:10], 0.5)] if has_cjk(q) else [])
    )

    def combo(i: int, q: str) -> Leg:
        if not has_cjk(q):
            return kw["raw"][i]
        rows = [[({"chunk_id": c}, 0.0) for c in leg] for leg in (kw["fold"][i], bigram["fold"][i])]
        return [r["chunk_id"] for r, _ in rrf(rows, 60)][:DEPTH]

    variants["keyword leg = RRF(ICU, CJK bigram) for CJK queries"] = lambda i, q: fuse(
        [(dense[i], dense_w), (combo(i, q), 1.0)]
    )
    variants["keyword leg = RRF(ICU, CJK bigram) for CJK queries + dedupe"] = lambda i, q: dedupe(
        fuse([(dense[i], dense_w), (combo(i, q), 1.0)])
    )
    variants["+ CJK bigram x0.5 + dedupe by parent"] = lambda i, q: dedupe(
        fuse(
            [(dense[i], dense_w), (kw["fold"][i], 1.0)]
            + ([(bigram["fold"][i], 0.5)] if has_cjk(q) else [])
        )
    )
    variants["keyword leg alone (raw)"] = lambda i, q: kw["raw"][i]
    variants["keyword leg alone (strip)"] = lambda i, q: kw["strip"][i]
    variants["bigram leg alone (strip)"] = lambda i, q: bigram["strip"][i]

    # The baseline is the product's hybrid.
    base = variants["baseline (product hybrid: dense x1.5 + ICU keyword, rrf_k 5)"]

    def check(
        variant: Callable[[int, str], list[str]], got: list[list[dict[str, Any]]], what: str
    ) -> None:
        """Print how many questions' top 10 differ between a variant and the product."""
        mism = sum(
            1
            for i, q in enumerate(questions)
            if variant(i, q.question)[:10] != [h["chunk_id"] for h in got[i]]
        )
        print(f"{what}: {mism} of {len(questions)} differ", file=sys.stderr)

    check(base, product, "baseline vs Searcher.search(hybrid, distinct_parents=False)")
    check(
        variants["dedupe by parent (1 per parent)"],
        sectioned,
        "dedupe by parent vs Searcher.search(hybrid) with distinct_parents, two legs",
    )
    variants["product hybrid, this branch's defaults (Searcher.search)"] = lambda i, q: [
        h["chunk_id"] for h in default[i]
    ]

    figures: dict[str, Any] = {}
    ranks: dict[str, list[int | None]] = {}
    for label, policy in variants.items():
        if args.only and not any(o in label for o in args.only):
            continue
        per: dict[str, dict[str, list[dict[str, Any]]]] = {}
        ranks[label] = []
        for i, q in enumerate(questions):
            ranked = policy(i, q.question)[:10]
            rank, _ = rank_of(q, [hit[c] for c in ranked])
            ranks[label].append(rank)
            for g in _groups(q):
                per.setdefault(str(q.extra.get("split")), {}).setdefault(g, []).append(
                    {"rank": rank}
                )
        figures[label] = {s: {g: summarize(v) for g, v in gs.items()} for s, gs in per.items()}

    def cell(f: dict[str, Any]) -> str:
        return f"{f['hit_rate_at_1']:.2f} / {f['hit_rate_at_5']:.2f} / {f['mrr_at_10']:.2f}"

    for split in ("dev", "heldout"):
        print(f"\n**{split}** (H@1 / H@5 / MRR@10)\n")
        print("| variant | English | non-English | cross-lingual | all |")
        print("|---|---|---|---|---|")
        for label, fig in figures.items():
            cells = [cell(fig[split][g]) for g in ("en", "non-en", "cross-lingual", "all")]
            print(f"| {label} | " + " | ".join(cells) + " |")
    print("\nranked by dev all MRR@10:")
    for label in sorted(figures, key=lambda k: -figures[k]["dev"]["all"]["mrr_at_10"]):
        f = figures[label]["dev"]["all"]
        print(f"  {f['mrr_at_10']:.4f} H@5 {f['hit_rate_at_5']:.3f}  {label}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "figures": figures,
                    "ranks": ranks,
                    "questions": [q.question for q in questions],
                    "splits": [q.extra.get("split") for q in questions],
                    "queries": {
                        lv: [normalize(q.question, lv) for q in questions]
                        for lv in ("fold", "strip", "ko")
                    },
                },
                ensure_ascii=False,
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
