"""Cost of the nightly refresh relative to the first full ingest, on a generated corpus.

Usage: python bench/refresh_cost.py [--docs 1000] [--workers 2]

Measures, in one process against one ephemeral Prefect API:
  1. first full ingest of N generated documents (60% PDF);
  2. a no-change refresh (target <= 2% of 1);
  3. a refresh with 1% of the documents changed (target <= 5% of 1);
  4. a model-change reindex to a fine-tuned copy of the model (same tokenizer and
     max length, other weights = a new fingerprint), built from the parse cache
     (target <= 50% of 1). ``--model-change max-length`` instead switches to MiniLM at
     max length 128, which also cuts ~2x the chunks (a re-chunk + re-embed).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

# CORPUSFLOW_REPO: measure another checkout's code with this script (before/after runs).
REPO = Path(os.environ.get("CORPUSFLOW_REPO") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def tuned_copy(target: Path) -> Path:
    """The bundled MiniLM with slightly different weights: what a fine-tuned upgrade of
    the same model looks like to the pipeline (same tokenizer, dimension, max length)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from common.settings import EmbedSettings
    from embedding import resolve_model

    model = SentenceTransformer(resolve_model(EmbedSettings()).path, device="cpu")
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 1e-3)
    model.save(str(target))
    return target


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--model-change", choices=["tuned", "max-length"], default="tuned")
    ap.add_argument("--no-reindex", action="store_true", help="Stop after the 1%%-changed refresh.")
    args = ap.parse_args()
    from corpusflow.runtime import configure_environment

    configure_environment()
    from gen_corpus import document, generate

    from common.settings import load_settings
    from flows.refresh import refresh_flow
    from flows.reindex import reindex_flow

    work = Path(tempfile.mkdtemp(prefix="cf-refresh-cost-"))
    corpus = work / "corpus"
    paths = generate(corpus, args.docs)
    base = {
        "storage": {"db": str(work / "db")},
        "parse": {"workers": args.workers},
        "run": {"progress": False},
    }
    settings = load_settings(None, base).model_dump_json()
    rows = []

    def timed(label: str, fn, *a, **kw) -> dict:  # type: ignore[no-untyped-def,type-arg]
        start = time.perf_counter()
        report = fn(*a, **kw)
        rows.append((label, time.perf_counter() - start, report))
        print(f"{label}: {rows[-1][1]:.1f}s", file=sys.stderr)
        return report

    timed("first full ingest", refresh_flow, str(corpus), settings)
    timed("no-change refresh", refresh_flow, str(corpus), settings)
    changed = paths[:: max(1, len(paths) // max(1, args.docs // 100))][: max(1, args.docs // 100)]
    for p in changed:
        document(p, paths.index(p), revision=1)
    timed(
        f"{len(changed)} changed ({len(changed) / len(paths):.0%})",
        refresh_flow,
        str(corpus),
        settings,
    )
    if not args.no_reindex:
        if args.model_change == "tuned":
            new_embed = {"model": str(tuned_copy(work / "minilm-tuned")), "max_length": 256}
        else:
            new_embed = {"model": "minilm", "max_length": 128}
        new_model = load_settings(None, {**base, "embed": new_embed})
        timed("model-change reindex", reindex_flow, str(corpus), new_model.model_dump_json())

    first = rows[0][1]
    print(
        f"{args.docs} generated documents (60% PDF, 20% DOCX, 10% HTML, 10% MD), parse.workers={args.workers}"
    )
    print()
    print("| run | wall s | % of first ingest | parsed | cache hits | chunks written |")
    print("|---|---|---|---|---|---|")
    for label, secs, r in rows:
        print(
            f"| {label} | {secs:.1f} | {100 * secs / first:.1f}% | {r['parsed']} | "
            f"{r['parse_cache_hits']} | {r['chunks_written']} |"
        )
    print("\nseconds per stage (the flow's own timers):\n")
    for label, _, r in rows:
        print(f"- {label}: " + ", ".join(f"{k} {v:.1f}" for k, v in r["stage_s"].items()))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the flow process: {peak:.0f} MiB")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
