"""Embedding cost of the presets, side by side on the same chunks, in one process.

Usage: python bench/embed_models.py --db DB [--collection C] [--models minilm use-m3]
       [--n 600] [--rounds 3]

Takes ``--n`` chunk texts exactly as a refresh embeds them (``embed_text``: context +
chunk) from a chunk table of DB, and embeds them with each model's document embedder
(``embedding.query_encoder.load_document_embedder``, what a refresh uses: for MiniLM the
NumPy encoder for the first ``embed.numpy_texts`` texts and torch after), in
``embed.batch_size`` batches through ``embedding.embed_texts``' batching. Models take
turns, ``--rounds`` times, so drifting load on the machine hits each alike; the first
round's model load (and, for MiniLM, the start of torch) is reported apart. Reports chunks/s by wall clock and by this
process's CPU time, and the ratio of each model to the first.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--collection", default="default")
    ap.add_argument("--models", nargs="+", default=["minilm", "use-m3"])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from corpusflow.runtime import configure_environment

    configure_environment()
    from common.settings import EmbedSettings
    from embedding import resolve_model
    from embedding.query_encoder import load_document_embedder
    from storage import Store

    store = Store(args.db, args.collection)
    table = store.chunks.names()[0]
    texts = store.read_columns(table, ["embed_text"]).column("embed_text").to_pylist()
    texts = sorted(texts)[: args.n]
    settings = {m: EmbedSettings(model=m) for m in args.models}
    specs = {m: resolve_model(settings[m]) for m in args.models}
    embedders = {m: load_document_embedder(settings[m], specs[m]) for m in args.models}
    load: dict[str, float] = {}
    wall: dict[str, float] = dict.fromkeys(args.models, 0.0)
    cpu: dict[str, float] = dict.fromkeys(args.models, 0.0)
    for m in args.models:  # load (and warm) outside the timed rounds
        start = time.perf_counter()
        embedders[m].embed(texts[:300], settings[m].batch_size)  # past the NumPy budget
        load[m] = time.perf_counter() - start
    for _ in range(args.rounds):
        for m in args.models:
            w0, c0 = time.perf_counter(), time.process_time()
            embedders[m].embed(texts, settings[m].batch_size)
            wall[m] += time.perf_counter() - w0
            cpu[m] += time.process_time() - c0
    n = len(texts) * args.rounds
    first = args.models[0]
    print(f"{len(texts)} chunks x {args.rounds} rounds, {os.cpu_count()} CPUs, table {table}")
    print("| model | load s | chunks/s (wall) | chunks/s (CPU) | wall ratio | CPU ratio |")
    print("|---|---|---|---|---|---|")
    for m in args.models:
        print(
            f"| {m} | {load[m]:.1f} | {n / wall[m]:.1f} | {n / cpu[m]:.1f} "
            f"| {wall[first] / wall[m]:.2f}x | {cpu[first] / cpu[m]:.2f}x |"
        )


if __name__ == "__main__":
    main()
