"""Throughput of the embed stage: the pipeline path vs the library's own encode.

Usage:
    HF_HUB_OFFLINE=1 python bench/embed_throughput.py [--device auto|cpu|cuda]
        [--minilm-chunks N] [--minilm-tokens 200] [--bge-chunks N] [--bge-tokens 256,512]
        [--batch-size N] [--bge-batch-size N] [--bge-dir DIR] [--repeat 1]
        [--skip-minilm] [--skip-bge] [--json FILE]

For each case, in one process and on the same chunks:

- pipeline: ``embedding.embed_texts`` with the real ``EmbeddingCache`` of a
  fresh LanceDB database (``store.caches.embeddings(spec.table_suffix, spec.dim)``),
  the batch size and ``checkpoint_every`` of ``EmbedSettings``, exactly as
  ``corpusflow.writes.write_batch`` calls it during a refresh;
- raw: the same loaded model's own ``encode`` (SentenceTransformer.encode or
  BGEM3FlagModel.encode) over all chunks at once, with the same batch size and
  outputs (BGE-M3: dense + sparse).

Models: the bundled MiniLM (``EmbedSettings()``), and a randomly initialised model
of BGE-M3's exact architecture (XLM-RoBERTa large, 24 layers, hidden 1024, 568M
parameters; built in a child process into a temporary directory in BGE-M3's
layout, with a WordPiece tokenizer) whose chunks are made to tokenise to exactly
``--bge-tokens`` tokens. Speed does not depend on the weights' values.

Reported: chunks/s of both paths and their ratio (target >= 0.9), the same ratio
by this process's CPU time (less sensitive to other load on the machine), model
forward passes of each path, peak RSS of each phase (psutil, sampled every 10 ms)
and of the whole process (getrusage), peak CUDA memory on a GPU. Defaults are sized for
a run of about 10 minutes on 2 CPU cores; on CUDA they are larger.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MIB = 1024 * 1024

# The words the random BGE-M3's WordPiece tokenizer is trained on: each becomes one token.
BGE_WORDS = (
    "hotel cap tier city yuan technician lockout tagout checklist cabinet spare ship day "
    "order afternoon fleet availability percent quarter invoice policy travel meal approval "
    "manager budget report table figure page section heading contract supplier warranty "
    "engine turbine inspection maintenance schedule pressure valve pump sensor alarm"
)


class PeakRSS:
    """Peak resident memory of this process while the block runs (sampled)."""

    def __init__(self, interval: float = 0.01) -> None:
        import psutil

        self._proc = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.peak = max(self.peak, int(self._proc.memory_info().rss))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def __enter__(self) -> PeakRSS:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


@dataclass
class Phase:
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)  # this process, all threads
    forwards: int = 0
    peak_rss: int = 0
    peak_cuda: int = 0


@dataclass
class Result:
    model: str
    device: str
    chunks: int
    tokens_mean: float
    batch_size: int
    load_s: float
    pipeline: Phase
    raw: Phase
    encode_calls: int
    max_abs_diff: float

    def rate(self, phase: Phase) -> float:
        return self.chunks / statistics.median(phase.seconds)

    @property
    def ratio(self) -> float:
        return self.rate(self.pipeline) / self.rate(self.raw)

    @property
    def cpu_ratio(self) -> float:
        """The ratio by this process's CPU time: less sensitive to other load on the machine."""
        return statistics.median(self.raw.cpu_seconds) / statistics.median(
            self.pipeline.cpu_seconds
        )


def hf_tokenizer(embedder: Any) -> Any:
    """The model's transformers tokenizer (batch calls, vocabulary; the bench loads torch anyway)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedder.spec.path, local_files_only=True)


def word_vocab(tokenizer: Any) -> list[str]:
    """Words of the tokenizer's vocabulary that tokenise to exactly one token."""
    words = sorted(
        w
        for w in tokenizer.get_vocab()
        if w.isascii() and w.isalpha() and w.islower() and 3 <= len(w) <= 12
    )
    encoded = tokenizer(words, add_special_tokens=False)["input_ids"]
    single = [w for w, ids in zip(words, encoded, strict=True) if len(ids) == 1]
    if len(single) < 20:
        raise SystemExit(f"tokenizer has too few whole-word tokens ({len(single)})")
    return single


def make_chunks(
    tokenizer: Any, n: int, tokens: int, spread: float, seed: int
) -> tuple[list[str], list[str], float]:
    """n chunks of about ``tokens`` tokens each (special tokens included): ids, texts, mean."""
    rng = random.Random(seed)
    words = word_vocab(tokenizer)
    texts = []
    for _ in range(n):
        target = round(tokens * rng.uniform(1 - spread, 1 + spread))
        texts.append(" ".join(rng.choice(words) for _ in range(max(1, target - 2))))
    ids = [f"bench-{tokens}-{i:05d}" for i in range(n)]
    lengths = [len(x) for x in tokenizer(texts, add_special_tokens=True)["input_ids"]]
    return ids, texts, statistics.fmean(lengths)


def build_bge_m3(target: Path) -> float:
    """Build the random BGE-M3-architecture model in a child process (keeps RSS clean)."""
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from tests.helpers.tiny_models import build_random_bgem3;"
        "words = sys.argv[3].split();"
        "corpus = [' '.join(words[i:] + words[:i]) for i in range(len(words))];"
        "build_random_bgem3(Path(sys.argv[2]), corpus=corpus)"
    )
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(REPO), str(target), BGE_WORDS], check=True)
    return time.perf_counter() - start


def forward_module(model: Any) -> Any:
    import torch

    return model if isinstance(model, torch.nn.Module) else model.model


def raw_encode(model: Any, backend: str, texts: list[str], batch_size: int, spec: Any) -> Any:
    import numpy as np

    if backend == "bge-m3":
        out = model.encode(
            texts,
            batch_size=batch_size,
            max_length=spec.max_length,
            return_dense=True,
            return_sparse=True,
            return_colbert_vecs=False,
        )
        return np.asarray(out["dense_vecs"], dtype=np.float32)
    return model.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=spec.normalize,
        convert_to_numpy=True,
        show_progress_bar=False,
    )


class MemoryCheckpoint:
    """The embed stage's checkpoint kept in this process (``--checkpoint memory``).

    For machines that cannot hold the storage stack (a GPU host reached with only the
    embedding dependencies): the pipeline path then differs from a refresh by the Lance
    writes of the embedding cache, which the CPU rows measure.
    """

    def __init__(self) -> None:
        self.rows: dict[str, tuple[Any, dict[int, float] | None]] = {}

    def load(self, ids: Any) -> dict[str, tuple[Any, dict[int, float] | None]]:
        return {i: self.rows[i] for i in ids if i in self.rows}

    def save(self, ids: Any, dense: Any, sparse: Any) -> None:
        for n, i in enumerate(ids):
            self.rows[i] = (dense[n], sparse[n] if sparse is not None else None)


def new_checkpoint(kind: str, db: Path, spec: Any) -> Any:
    if kind == "memory":
        return MemoryCheckpoint()
    from storage.store import Store

    return Store(str(db), "bench").caches.embeddings(spec.table_suffix, spec.dim)


def checkpoint_rows(kind: str, checkpoint: Any, db: Path) -> int:
    if kind == "memory":
        return len(checkpoint.rows)
    from storage.store import Store

    return Store(str(db), "bench").read_columns(checkpoint.name, ["embed_key"]).num_rows


def measure(
    label: str,
    embedder: Any,
    chunks: list[tuple[list[str], list[str], float]],
    settings: Any,
    repeat: int,
    load_s: float,
    workdir: Path,
    checkpoint_kind: str = "lance",
) -> list[Result]:
    import numpy as np
    import torch

    from embedding import embed_texts

    spec = embedder.spec
    model = embedder.model.get()
    device = embedder.model.device
    cuda = device.startswith("cuda")
    forwards = 0

    def count(*_: Any) -> None:
        nonlocal forwards
        forwards += 1

    hook = forward_module(model).register_forward_hook(count)
    results = []
    try:
        for ids, texts, tokens_mean in chunks:
            pipeline, raw = Phase(), Phase()
            dense_pipeline: Any = None
            dense_raw: Any = None
            calls = 0
            for r in range(repeat):
                for which in ("pipeline", "raw") if r % 2 == 0 else ("raw", "pipeline"):
                    phase = pipeline if which == "pipeline" else raw
                    if cuda:
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                    db = Path(tempfile.mkdtemp(prefix="db-", dir=workdir))
                    checkpoint = new_checkpoint(checkpoint_kind, db, spec)
                    before_calls, before_fwd = embedder.model.encode_calls, forwards
                    with PeakRSS() as rss:
                        start, cpu_start = time.perf_counter(), time.process_time()
                        if which == "pipeline":
                            out = embed_texts(
                                embedder,
                                ids,
                                texts,
                                settings.batch_size,
                                checkpoint=checkpoint,
                                checkpoint_every=settings.checkpoint_every,
                            )
                        else:
                            dense = raw_encode(
                                model, spec.backend, texts, settings.batch_size, spec
                            )
                        if cuda:
                            torch.cuda.synchronize()
                        phase.seconds.append(time.perf_counter() - start)
                        phase.cpu_seconds.append(time.process_time() - cpu_start)
                    phase.forwards = forwards - before_fwd
                    phase.peak_rss = max(phase.peak_rss, rss.peak)
                    if cuda:
                        phase.peak_cuda = max(phase.peak_cuda, torch.cuda.max_memory_allocated())
                    if which == "pipeline":
                        calls = embedder.model.encode_calls - before_calls
                        dense_pipeline = np.stack([out[i][0] for i in ids])
                        staged = checkpoint_rows(checkpoint_kind, checkpoint, db)
                        assert staged == len(ids), "embedding cache incomplete"
                    else:
                        dense_raw = dense
                    shutil.rmtree(db, ignore_errors=True)
                    print(
                        f"  {label} {tokens_mean:.0f} tok x {len(ids)}: {which} "
                        f"{len(ids) / phase.seconds[-1]:.2f} chunks/s",
                        file=sys.stderr,
                        flush=True,
                    )
            diff = float(np.abs(dense_pipeline.astype(np.float32) - dense_raw).max())
            results.append(
                Result(
                    model=label,
                    device=device,
                    chunks=len(ids),
                    tokens_mean=tokens_mean,
                    batch_size=settings.batch_size,
                    load_s=load_s,
                    pipeline=pipeline,
                    raw=raw,
                    encode_calls=calls,
                    max_abs_diff=diff,
                )
            )
    finally:
        hook.remove()
    return results


def load(settings: Any) -> tuple[Any, float]:
    from embedding import load_embedder, resolve_model

    start = time.perf_counter()
    embedder: Any = load_embedder(settings, resolve_model(settings))
    embedder.embed(["warm up", "the model"], 2)
    embedder.model.encode_calls = 0
    return embedder, time.perf_counter() - start


def table(results: list[Result], cuda: bool) -> str:
    head = [
        "model",
        "device",
        "chunks",
        "tokens/chunk",
        "batch",
        "pipeline chunks/s",
        "raw encode chunks/s",
        "ratio",
        "ratio by CPU time",
        "forwards pipeline / raw",
        "peak RSS pipeline / raw (MiB)",
    ]
    if cuda:
        head.append("peak CUDA pipeline / raw (MiB)")
    head.append("max abs diff (dense)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        row = [
            r.model,
            r.device,
            str(r.chunks),
            f"{r.tokens_mean:.0f}",
            str(r.batch_size),
            f"{r.rate(r.pipeline):.2f}",
            f"{r.rate(r.raw):.2f}",
            f"{r.ratio:.2f}x",
            f"{r.cpu_ratio:.2f}x",
            f"{r.pipeline.forwards} / {r.raw.forwards}",
            f"{r.pipeline.peak_rss / MIB:.0f} / {r.raw.peak_rss / MIB:.0f}",
        ]
        if cuda:
            row.append(f"{r.pipeline.peak_cuda / MIB:.0f} / {r.raw.peak_cuda / MIB:.0f}")
        row.append(f"{r.max_abs_diff:.1e}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--minilm-chunks", type=int, help="default 400 on CPU, 2000 on CUDA")
    ap.add_argument("--minilm-tokens", type=int, default=200, help="mean tokens/chunk (±10%%)")
    ap.add_argument("--bge-chunks", type=int, help="per token size; default 8 on CPU, 256 on CUDA")
    ap.add_argument("--bge-tokens", default="256,512", help="comma-separated tokens/chunk")
    ap.add_argument("--batch-size", type=int, help="default EmbedSettings().batch_size")
    ap.add_argument(
        "--bge-batch-size", type=int, help="default 4 on CPU, --batch-size's value on CUDA"
    )
    ap.add_argument("--bge-dir", help="reuse (or build and keep) the random BGE-M3 model here")
    ap.add_argument("--repeat", type=int, default=1, help="timed passes per path (median)")
    ap.add_argument("--skip-minilm", action="store_true")
    ap.add_argument("--skip-bge", action="store_true")
    ap.add_argument(
        "--checkpoint",
        default="lance",
        choices=["lance", "memory"],
        help="the pipeline path's checkpoint: the Lance embedding cache (as a refresh), or "
        "kept in memory where the storage stack is not installed",
    )
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    import torch

    from common.settings import EmbedSettings
    from embedding.runtime import pick_device

    device = pick_device(args.device)
    cuda = device == "cuda"
    batch = args.batch_size or EmbedSettings().batch_size
    minilm_chunks = args.minilm_chunks or (2000 if cuda else 400)
    bge_chunks = args.bge_chunks or (256 if cuda else 8)
    bge_batch = args.bge_batch_size or (batch if cuda else 4)
    bge_tokens = [int(t) for t in args.bge_tokens.split(",") if t.strip()]
    workdir = Path(tempfile.mkdtemp(prefix="corpusflow-bench-"))
    started = time.perf_counter()
    results: list[Result] = []
    notes: list[str] = []
    try:
        if not args.skip_minilm:
            settings = EmbedSettings(device=device, batch_size=batch)
            embedder, load_s = load(settings)
            chunks = make_chunks(hf_tokenizer(embedder), minilm_chunks, args.minilm_tokens, 0.1, 0)
            results += measure(
                "MiniLM-L6 (bundled)",
                embedder,
                [chunks],
                settings,
                args.repeat,
                load_s,
                workdir,
                args.checkpoint,
            )
            del embedder
        if not args.skip_bge and bge_tokens:
            bge_dir = Path(args.bge_dir) if args.bge_dir else workdir / "bge-m3-random"
            if not (bge_dir / "config.json").is_file():
                notes.append(f"built the random BGE-M3 model in {build_bge_m3(bge_dir):.0f} s")
            settings = EmbedSettings(
                model=str(bge_dir), device=device, batch_size=bge_batch, max_length=max(bge_tokens)
            )
            embedder, load_s = load(settings)
            notes.append(f"loaded it in {load_s:.0f} s ({embedder.spec.max_length} max tokens)")
            tok = hf_tokenizer(embedder)
            chunks_list = [make_chunks(tok, bge_chunks, t, 0.0, t) for t in bge_tokens]
            results += measure(
                "BGE-M3 architecture (random)",
                embedder,
                chunks_list,
                settings,
                args.repeat,
                load_s,
                workdir,
                args.checkpoint,
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    command = shlex.join(["python", "bench/embed_throughput.py", *sys.argv[1:]])
    print(table(results, cuda))
    print()
    print(f"Command: `cd {REPO} && HF_HUB_OFFLINE=1 {command}`")
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), device {device}"
        + (f" ({torch.cuda.get_device_name()})" if cuda else "")
        + f", load average {os.getloadavg()[0]:.1f}; process peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; "
        f"total {time.perf_counter() - started:.0f} s"
    )
    if any(r.pipeline.forwards > r.raw.forwards for r in results):
        notes.append(
            "forwards pipeline > raw: BGEM3FlagModel.encode runs its first batch twice (a "
            "batch-size probe), once per call; the pipeline calls it once per batch, the raw "
            "path once for all chunks"
        )
    for note in notes:
        print(f"Note: {note}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    asdict(r)
                    | {
                        "pipeline_chunks_s": r.rate(r.pipeline),
                        "raw_chunks_s": r.rate(r.raw),
                        "ratio": r.ratio,
                    }
                    for r in results
                ],
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
