"""A real CUDA out-of-memory in the embed stage: the batch halves and the vectors match.

Usage:
    HF_HUB_OFFLINE=1 python bench/cuda_oom.py --bge-dir DIR [--chunks 256] [--tokens 2048]
        [--batch 256] [--free-gib 6]

DIR holds a BGE-M3-shaped model (``bench/embed_throughput.py --bge-dir DIR`` builds and
keeps one). Round 1 embeds the chunks with ``--batch`` while a ballast tensor leaves only
``--free-gib`` of the GPU free, so the first batches run out of memory for real (no
simulated exception); ``embedding.runtime.encode_with_halving`` must halve the batch until
it fits and go on. Round 2 embeds the same chunks with no ballast at a batch size that fits.
Reported: the batch sizes tried, the time of each round, and the largest difference between
the two rounds' dense vectors and sparse weights (fp16 on the GPU: the same inputs in
different batches may differ in the last bits, not more).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class _Halvings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "out of memory" in record.getMessage():
            self.messages.append(record.getMessage())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bge-dir", required=True)
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--free-gib", type=float, default=6.0)
    args = ap.parse_args()

    import numpy as np
    import torch

    from common.errors import is_oom
    from common.settings import EmbedSettings
    from embedding import load_embedder, resolve_model

    sys.path.insert(0, str(REPO / "bench"))
    from embed_throughput import hf_tokenizer, make_chunks

    if not torch.cuda.is_available():
        sys.exit("no CUDA device: this check needs a GPU")
    halvings = _Halvings()
    logging.getLogger("embedding.runtime").addHandler(halvings)

    def run(batch: int) -> tuple[object, float]:
        settings = EmbedSettings(
            model=args.bge_dir, device="cuda", batch_size=batch, max_length=args.tokens
        )
        embedder = load_embedder(settings, resolve_model(settings))
        texts = make_chunks(hf_tokenizer(embedder), args.chunks, args.tokens, 0.0, 1)[1]
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = embedder.embed(texts, batch)
        torch.cuda.synchronize()
        return out, time.perf_counter() - start

    free, total = torch.cuda.mem_get_info()
    ballast_bytes = max(0, free - int(args.free_gib * 2**30))
    ballast = torch.empty(ballast_bytes, dtype=torch.uint8, device="cuda")
    print(
        f"GPU {torch.cuda.get_device_name()}: {total / 2**30:.1f} GiB; ballast "
        f"{ballast_bytes / 2**30:.1f} GiB leaves {torch.cuda.mem_get_info()[0] / 2**30:.1f} GiB"
    )
    try:
        squeezed, squeezed_s = run(args.batch)
    except Exception as exc:  # a failure here is the finding: report it whole
        print(f"FAILED under memory pressure: {type(exc).__name__}: {exc} (is_oom={is_oom(exc)})")
        raise
    del ballast
    torch.cuda.empty_cache()
    tried = [args.batch] + [int(m.split()[-1]) for m in halvings.messages]
    fit = tried[-1]
    free_run, free_s = run(fit)
    dense_diff = float(np.abs(squeezed.dense - free_run.dense).max())
    sparse_diff = 0.0
    for a, b in zip(squeezed.sparse or [], free_run.sparse or [], strict=True):
        for token in set(a) | set(b):
            sparse_diff = max(sparse_diff, abs(a.get(token, 0.0) - b.get(token, 0.0)))
    print(f"chunks {args.chunks} x {args.tokens} tokens; batch sizes tried {tried}")
    print(f"under pressure: {squeezed_s:.1f} s ({len(halvings.messages)} out-of-memory halvings)")
    print(f"no pressure, batch {fit}: {free_s:.1f} s")
    print(f"max abs diff: dense {dense_diff:.2e}, sparse {sparse_diff:.2e}")
    ok = len(halvings.messages) > 0 and dense_diff < 1e-2
    print("RESULT", "ok" if ok else "NOT OK (no halving happened or vectors differ)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
