"""Full-text index tokenizers on the same rows: retrieval per language, build time, size.

Usage: python bench/fts_tokenizers.py [--db DIR] [--repeat 3] [--scale 50] [--out FILE]

Ingests ../shared/corpus/docling (ground truth excluded), samples/corpus and
samples/bilingual once with the default settings (or reuses ``--db`` when it already
holds that collection), copies the active chunk table's rows (``embed_text`` and what
scoring needs) into one fresh Lance table per tokenizer configuration, builds the FTS
index there and scores keyword search on every question of bench/questions/*.jsonl,
per question language against document language (``zh/zh``: Chinese questions over
Chinese documents; ``zh/en``: cross-lingual, which keyword search can answer only
through shared terms). Build time and index size are measured on the rows repeated
``--scale`` times (unique ids), best of ``--repeat`` builds, each on a fresh table. The
model-backed tokenizers (jieba, lindera) are tried too: they need language models in
Lance's language-model home, and the table says when they are not there.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# label -> FTS keyword arguments; "dual" is two indexes (see below).
CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("simple (English stem + stop words; before)", {"base_tokenizer": "simple"}),
    ("icu (English stem + stop words)", {"base_tokenizer": "icu"}),
    ("icu/split (English stem + stop words)", {"base_tokenizer": "icu/split"}),
    (
        "ngram 2-2 (whole text, no stemming)",
        {
            "base_tokenizer": "ngram",
            "ngram_min_length": 2,
            "ngram_max_length": 2,
            "stem": False,
            "remove_stop_words": False,
        },
    ),
    (
        "ngram 1-2 (whole text, no stemming)",
        {
            "base_tokenizer": "ngram",
            "ngram_min_length": 1,
            "ngram_max_length": 2,
            "stem": False,
            "remove_stop_words": False,
        },
    ),
    ("simple + ngram 2-2 on the CJK characters (two indexes, RRF)", {"dual": True}),
    ("jieba/default", {"base_tokenizer": "jieba/default"}),
    ("lindera/ipadic", {"base_tokenizer": "lindera/ipadic"}),
]
NGRAM_CJK = {
    "base_tokenizer": "ngram",
    "ngram_min_length": 2,
    "ngram_max_length": 2,
    "stem": False,
    "remove_stop_words": False,
}


def _cjk_only(text: str) -> str:
    from chunking.language import _CJK

    return "".join(ch if _CJK.match(ch) else " " for ch in text)


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _ingest(db: Path, corpus: Path) -> Any:
    from common.settings import load_settings
    from flows.refresh import refresh_flow

    settings = load_settings(
        None,
        {
            "storage": {"db": str(db)},
            "source": {"exclude": ["**/groundtruth/**", "**/README.md"]},
            "run": {"progress": False},
        },
    )
    from storage import Store

    store = Store.from_settings(settings.storage)
    if store.pointer.active() is None:
        refresh_flow(str(corpus), settings.model_dump_json())
    return settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", help="database to ingest into / reuse (default: a temp dir)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=int, default=50, help="row copies for build time and size")
    ap.add_argument("--out", help="also write the table to this file")
    args = ap.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from corpusflow.runtime import configure_environment

    configure_environment()
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    from corpusflow.api import rrf
    from corpusflow.evaluate import evaluate, load_questions, per_group
    from storage import Store

    work = Path(tempfile.mkdtemp(prefix="cf-fts-"))
    corpus = work / "corpus"
    shutil.copytree(REPO.parent / "shared" / "corpus" / "docling", corpus / "docling")
    shutil.copytree(REPO / "samples" / "corpus", corpus / "samples")
    shutil.copytree(REPO / "samples" / "bilingual", corpus / "bilingual")
    db = Path(args.db) if args.db else work / "db"
    settings = _ingest(db, corpus)
    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    assert active is not None
    chunks = store.read_columns(
        active.chunk_table, ["chunk_id", "parent_id", "path", "text", "embed_text"]
    ).to_pylist()
    parents = {
        r["parent_id"]: r["text"]
        for r in store.read_columns(active.parent_table, ["parent_id", "text"]).to_pylist()
    }
    for r in chunks:
        r["parent_text"] = parents.get(r["parent_id"], "")
        r["cjk_text"] = _cjk_only(r["embed_text"])
    data = pa.Table.from_pylist(chunks)
    big = pa.Table.from_pylist(
        [{**r, "chunk_id": f"{r['chunk_id']}-{i}"} for i in range(args.scale) for r in chunks]
    )
    questions = []
    for name in ("docling", "samples", "bilingual"):
        for q in load_questions(REPO / "bench" / "questions" / f"{name}.jsonl"):
            questions.append(type(q)(q.question, f"{name}/{q.path}", q.contains, q.extra))

    rows_out = []
    for label, cfg in CONFIGS:
        best_s = float("inf")
        size = 0
        error = ""

        def build(t: Any, cfg: dict[str, Any] = cfg) -> None:
            if cfg.get("dual"):
                t.create_index("embed_text", config=FTS())
                t.create_index("cjk_text", config=FTS(**NGRAM_CJK))
            else:
                t.create_index("embed_text", config=FTS(**cfg))

        n = len(rows_out)
        for attempt in range(args.repeat):
            tdb = lancedb.connect(str(work / f"fts-{n}-{attempt}"))
            big_table = tdb.create_table("t", big)
            try:
                start = time.perf_counter()
                build(big_table)
                best_s = min(best_s, time.perf_counter() - start)
            except Exception as exc:  # model-backed tokenizers without their models
                error = str(exc).splitlines()[0][:120]
                break
            size = _dir_size(Path(tdb.uri) / "t.lance" / "_indices")
            shutil.rmtree(work / f"fts-{n}-{attempt}", ignore_errors=True)
        if error:
            rows_out.append((label, None, None, None, error))
            print(f"{label}: {error}", file=sys.stderr)
            continue
        table = lancedb.connect(str(work / f"fts-{n}")).create_table("t", data)
        build(table)

        def search(q: str, n: int, t: Any = table, dual: bool = bool(cfg.get("dual"))) -> Any:
            def one(column: str, text: str) -> list[tuple[dict[str, Any], float]]:
                if not text.strip():
                    return []
                rows = t.search(text, query_type="fts", fts_columns=column).limit(n).to_list()
                return [(r, float(r["_score"])) for r in rows]

            if dual:
                lists = [one("embed_text", q), one("cjk_text", _cjk_only(q))]
                return [r for r, _s in rrf([x for x in lists if x])][:n]
            return [r for r, _s in one("embed_text", q)]

        result = evaluate(questions, search, k=5)
        groups = per_group(result["per_question"], "lang/doc_lang")
        rows_out.append((label, best_s, size, {"all": result, **groups}, ""))
        print(label, f"{best_s:.3f}s", size, result["hit_rate_at_5"], file=sys.stderr)

    langs = sorted({g for _l, _s, _z, r, _e in rows_out if r for g in r if g != "all"})
    counts = next(
        ({g: r[g]["questions"] for g in langs} for _l, _s, _z, r, _e in rows_out if r), {}
    )
    lines = [
        f"{len(data)} chunk rows (docling + samples + bilingual, default chunking), "
        f"{len(questions)} questions, keyword mode, HitRate@5 / MRR@10 by question/document "
        f"language; build time and index size on {len(big)} rows ({args.scale} copies), "
        f"best of {args.repeat}",
        "",
        "| tokenizer | build s | index MiB | all | "
        + " | ".join(f"{g} (n={counts.get(g, 0)})" for g in langs)
        + " |",
        "|---|---|---|---|" + "---|" * len(langs),
    ]
    for label, secs, size, res, error in rows_out:
        if res is None:
            lines.append(f"| {label} | — | — | not available: {error} |" + " |" * len(langs))
            continue
        assert secs is not None and size is not None

        def cell(r: dict[str, Any] | None) -> str:
            if not r:
                return "—"
            return f"{r['hit_rate_at_5']:.3f} / {r['mrr_at_10']:.3f}"

        lines.append(
            f"| {label} | {secs:.2f} | {size / 2**20:.1f} | {cell(res['all'])} | "
            + " | ".join(cell(res.get(g)) for g in langs)
            + " |"
        )
    table_md = "\n".join(lines)
    print(table_md)
    if args.out:
        Path(args.out).write_text(table_md + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
