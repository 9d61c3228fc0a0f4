"""A query-side encoder that starts in well under a second: BERT in NumPy.

``corpusflow search`` embeds one short query per process. Through sentence-transformers
that costs ~10 s of imports (sentence_transformers, transformers, sklearn, torch) before
the first vector; the forward pass itself is a few milliseconds. For the models whose
sentence-transformers pipeline is plain ``Transformer (BertModel) -> Pooling (cls, mean
or max) -> [Normalize]`` this module computes the same vectors with NumPy from the
model's own ``model.safetensors`` and ``tokenizer.json`` (``tokenizers``), importing
neither torch nor transformers.

Nothing is exported or cached: the weights are memory-mapped in place, so there is no
derived file to go stale (an ONNX export was the other option; ``torch.onnx.export`` needs
the ``onnx`` package, which is not a dependency). The tokenizer's own truncation default
in tokenizer.json is replaced by the table's ``max_length``, as sentence-transformers
does. Queries run on the CPU whatever ``embed.device`` says: one query is milliseconds. Anything this module does not reproduce exactly (another architecture,
a Dense or other extra module, a default prompt, lower-casing done by sentence-
transformers, ``.bin`` weights, several pooling modes at once) makes ``load_query_embedder``
return today's sentence-transformers embedder instead, as it does for BGE-M3 (its sparse
head is a torch pickle). tests/corpusflow/test_search_coldstart.py checks the vectors against
sentence-transformers (cosine >= 0.9999) and the top-k against a real index.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedding.base import Embedder, Embeddings, ModelSpec
from embedding.tokenizer import Tokenizer, load_tokenizer

log = logging.getLogger(__name__)

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


class Unsupported(Exception):
    """The model's pipeline is not one this encoder reproduces exactly."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise Unsupported(f"cannot read {path.name}: {exc}") from exc


def _module_type(entry: dict[str, Any]) -> str:
    # sentence-transformers 5 writes sentence_transformers.base.modules... / ...sentence_transformer.modules...
    # for the same classes; compare on the class name with the package root.
    kind = str(entry.get("type", ""))
    name = kind.rsplit(".", 1)[-1]
    return (
        f"sentence_transformers.models.{name}" if kind.startswith("sentence_transformers") else kind
    )


def inspect_model(spec: ModelSpec) -> dict[str, Any]:
    """What the NumPy path needs from the model directory; raises Unsupported otherwise."""
    if spec.backend != "sentence-transformers":
        raise Unsupported(f"backend {spec.backend}")
    root = Path(spec.path)
    modules = _read_json(root / "modules.json")
    if not isinstance(modules, list) or not modules:
        raise Unsupported("no modules.json")
    kinds = [_module_type(m) for m in sorted(modules, key=lambda m: int(m.get("idx", 0)))]
    if kinds[:2] != [_TRANSFORMER, _POOLING] or any(k != _NORMALIZE for k in kinds[2:]):
        raise Unsupported(f"pipeline {kinds}")
    if str(modules[0].get("path", "")) not in ("", "."):
        raise Unsupported("transformer module in a sub-directory")
    normalize = len(kinds) > 2
    st_cfg = _read_json(root / "sentence_bert_config.json") or {}
    if st_cfg.get("do_lower_case"):
        raise Unsupported("do_lower_case")
    prompts = _read_json(root / "config_sentence_transformers.json") or {}
    if prompts.get("default_prompt_name") or prompts.get("prompts", {}).get("query"):
        raise Unsupported("prompts")
    pool_dir = root / str(modules[1].get("path", "1_Pooling"))
    pool_cfg = _read_json(pool_dir / "config.json") or {}
    modes = [
        k.removeprefix("pooling_mode_").removesuffix("_token").removesuffix("_tokens")
        for k, v in pool_cfg.items()
        if k.startswith("pooling_mode_") and v
    ]
    if len(modes) != 1 or modes[0] not in ("cls", "mean", "max"):
        raise Unsupported(f"pooling {modes}")
    if pool_cfg.get("include_prompt") is False:
        raise Unsupported("include_prompt")
    config = _read_json(root / "config.json") or {}
    if config.get("model_type") != "bert":
        raise Unsupported(f"model_type {config.get('model_type')}")
    if config.get("hidden_act", "gelu") != "gelu":
        raise Unsupported(f"hidden_act {config.get('hidden_act')}")
    if config.get("position_embedding_type", "absolute") != "absolute" or config.get("is_decoder"):
        raise Unsupported("position embeddings / decoder")
    for name in ("model.safetensors", "tokenizer.json"):
        if not (root / name).is_file():
            raise Unsupported(f"no {name}")
    return {
        "root": root,
        "pooling": modes[0],
        "normalize": normalize or spec.normalize,
        "layers": int(config["num_hidden_layers"]),
        "heads": int(config["num_attention_heads"]),
        "eps": float(config.get("layer_norm_eps", 1e-12)),
        "hidden": int(config["hidden_size"]),
    }


# Numerical Recipes' erfc Chebyshev fit (fractional error < 1.2e-7 everywhere), highest
# coefficient first: erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z/2), for z >= 0.
_ERFC_COEFFS = (
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
)


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU as in transformers' "gelu", in float32 with in-place steps.

    NumPy has no erf and scipy.special would cost its own import. The fit's error is at
    float32's own resolution; against float64 arithmetic the encoder's vectors differ by
    < 1e-6. This was half of a document's encoding time when it ran in float64 with a
    temporary per step.
    """
    z = np.abs(x)
    z *= np.float32(1.0 / math.sqrt(2.0))
    t = z * np.float32(0.5)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = np.full_like(t, _ERFC_COEFFS[0])
    for c in _ERFC_COEFFS[1:]:
        poly *= t
        poly += np.float32(c)
    z *= z
    poly -= z
    np.exp(poly, out=poly)
    poly *= t  # erfc(|x| / sqrt 2)
    poly *= x
    poly *= np.float32(0.5)  # h = x * erfc / 2: GELU is x - h for x >= 0, h below
    return np.where(x >= 0, x - poly, poly)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file as read-only views of a memory map.

    The format is an 8-byte little-endian header length, a JSON header (dtype, shape,
    byte offsets into the data that follows) and the raw little-endian data. Mapping it
    instead of reading it means a query touches only the embedding rows of its own
    tokens, not the whole vocabulary matrix.
    """
    with path.open("rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        header = json.loads(fh.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out: dict[str, np.ndarray] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(meta["dtype"])
        if dtype is None:
            raise Unsupported(f"tensor {name} has dtype {meta['dtype']}")
        start, end = meta["data_offsets"]
        shape = tuple(int(d) for d in meta["shape"])
        count = int(np.prod(shape)) if shape else 1
        if end - start != count * np.dtype(dtype).itemsize:
            raise Unsupported(f"tensor {name}: size does not match its shape")
        out[name] = np.frombuffer(
            data, dtype=np.dtype(dtype).newbyteorder("<"), count=count, offset=start
        ).reshape(shape)
    return out


def _one_blas_thread() -> Any:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


class NumpyBertEncoder:
    """BertModel forward pass (inference) + sentence-transformers pooling, in NumPy."""

    def __init__(self, spec: ModelSpec, info: dict[str, Any] | None = None) -> None:
        from tokenizers import Tokenizer

        self.spec = spec
        self.info = info or inspect_model(spec)
        root: Path = self.info["root"]
        raw = read_safetensors(root / "model.safetensors")
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in raw else ""
        self.w: dict[str, np.ndarray] = {}
        for key, value in raw.items():
            if key.startswith(prefix) and value.dtype.kind == "f":
                # float32 weights stay views of the map; others are converted once.
                self.w[key[len(prefix) :]] = (
                    value if value.dtype == np.float32 else value.astype(np.float32)
                )
        needed = [
            "embeddings.word_embeddings.weight",
            "embeddings.position_embeddings.weight",
            "embeddings.LayerNorm.weight",
            *(
                f"encoder.layer.{i}.{part}.weight"
                for i in range(self.info["layers"])
                for part in (
                    "attention.self.query",
                    "attention.self.key",
                    "attention.self.value",
                    "attention.output.dense",
                    "attention.output.LayerNorm",
                    "intermediate.dense",
                    "output.dense",
                    "output.LayerNorm",
                )
            ),
        ]
        missing = [k for k in needed if k not in self.w]
        if missing:
            raise Unsupported(f"weights lack {missing[:3]}")
        tok = Tokenizer.from_file(str(root / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=spec.max_length, strategy="longest_first")
        self.tok = tok

    def token_ids(self, text: str) -> list[int]:
        return list(self.tok.encode(text).ids)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``, without padding: the per-token layers (projections,
        feed-forward, layer norms) run once over every text's tokens stacked into one
        matrix, attention and pooling per text, so there is nothing to mask."""
        if not texts:
            return np.zeros((0, self.info["hidden"]), dtype=np.float32)
        ids = [self.token_ids(t) for t in texts]
        lengths = [len(i) for i in ids]
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        # A short query runs faster on one BLAS thread than it takes to wake the pool
        # (0.7 s against 0.02 s for a 5-token query on a busy 2-core box); a batch of
        # document chunks is matrix work the pool pays for.
        threads = _one_blas_thread() if bounds[-1] < 256 else contextlib.nullcontext()
        with threads:
            x = self._forward(np.concatenate(ids).astype(np.int64), lengths, bounds)
            return self._pool(x, bounds)

    def _forward(self, flat: np.ndarray, lengths: list[int], bounds: list[int]) -> np.ndarray:
        w, info = self.w, self.info
        eps = info["eps"]
        positions = np.concatenate([np.arange(n) for n in lengths])
        x = (
            w["embeddings.word_embeddings.weight"][flat]
            + w["embeddings.position_embeddings.weight"][positions]
        )
        types = w.get("embeddings.token_type_embeddings.weight")
        if types is not None:
            x += types[0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        heads = info["heads"]
        dh = info["hidden"] // heads
        scale = np.float32(1.0 / math.sqrt(dh))
        for i in range(info["layers"]):
            p = f"encoder.layer.{i}."

            def lin(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
                out = h @ w[p + name + ".weight"].T
                out += w[p + name + ".bias"]
                return out

            q = lin(x, "attention.self.query")
            q *= scale
            k = lin(x, "attention.self.key")
            v = lin(x, "attention.self.value")
            ctx = np.empty_like(x)
            for a, b in itertools.pairwise(bounds):
                n = b - a
                qs = q[a:b].reshape(n, heads, dh).transpose(1, 0, 2)
                ks = k[a:b].reshape(n, heads, dh).transpose(1, 2, 0)
                vs = v[a:b].reshape(n, heads, dh).transpose(1, 0, 2)
                scores = qs @ ks
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(axis=-1, keepdims=True)
                ctx[a:b] = (scores @ vs).transpose(1, 0, 2).reshape(n, heads * dh)
            x = _layer_norm(
                lin(ctx, "attention.output.dense") + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                eps,
            )
            inter = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(
                lin(inter, "output.dense") + x,
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                eps,
            )
        return x

    def _pool(self, x: np.ndarray, bounds: list[int]) -> np.ndarray:
        pooling = self.info["pooling"]
        out = np.empty((len(bounds) - 1, x.shape[1]), dtype=np.float32)
        for n, (a, b) in enumerate(itertools.pairwise(bounds)):
            if pooling == "cls":
                out[n] = x[a]
            elif pooling == "max":
                out[n] = x[a:b].max(axis=0)
            else:
                out[n] = x[a:b].sum(axis=0) / max(float(b - a), 1e-9)
        if self.info["normalize"]:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


class NumpyFirstEmbedder:
    """The NumPy encoder while it is cheaper than starting the backend, then (or if the
    model does not allow it, or it fails to load) the backend's own embedder.

    ``budget`` is how many texts the NumPy path may encode before the backend takes
    over: None for queries (one text per search, always NumPy); for documents about as
    many as the backend's start costs (importing torch and transformers, ~10 s of CPU,
    is ~300 chunks of NumPy encoding). A batch larger than what is left goes to the
    backend, and once the backend is loaded every batch does, so a large run pays the
    start once and a nightly run with a few changed documents never pays it.
    """

    has_sparse = False  # only dense-only sentence-transformers models come here

    def __init__(
        self, spec: ModelSpec, fallback: Callable[[], Embedder], budget: int | None = None
    ) -> None:
        self.spec = spec
        self._make_fallback = fallback
        self._fallback: Embedder | None = None
        self._lock = threading.Lock()
        self._fast: NumpyBertEncoder | None = None
        self._decided = False
        self.budget = budget
        self.reason = ""  # why the fast path is not used (tests and `--verbose` read it)

    @property
    def fast(self) -> NumpyBertEncoder | None:
        if not self._decided:
            with self._lock:
                if not self._decided:
                    try:
                        self._fast = NumpyBertEncoder(self.spec)
                    except Exception as exc:  # unsupported or unreadable: today's path
                        self.reason = f"{type(exc).__name__}: {exc}"
                        log.debug("NumPy encoder falls back to %s: %s", self.spec.backend, exc)
                    self._decided = True
        return self._fast

    @property
    def fallback(self) -> Embedder:
        """The backend's embedder (sentence-transformers), built only when it is needed."""
        with self._lock:
            if self._fallback is None:
                self._fallback = self._make_fallback()
            return self._fallback

    def tokenizer(self) -> Tokenizer:
        return load_tokenizer(self.spec.path)

    def _numpy_takes(self, n: int) -> bool:
        with self._lock:
            if self.budget is None:
                return True
            if self._fallback is not None or n > self.budget:
                # The backend has it from here: the NumPy weights (~90 MB for MiniLM, as
                # much as the model for any other) are not kept beside the backend's.
                self.budget = 0
                self._fast = None
                return False
            self.budget -= n
            return True

    def embed(self, texts: Sequence[str], batch_size: int) -> Embeddings:
        fast = self.fast
        if fast is None or not texts or not self._numpy_takes(len(texts)):
            return self.fallback.embed(texts, batch_size)
        return Embeddings(dense=fast.encode(texts), sparse=None)


def load_query_embedder(settings: Any, spec: ModelSpec) -> Embedder:
    """The embedder for queries against a table built with ``spec``."""
    return _numpy_first(settings, spec, None)


def load_document_embedder(settings: Any, spec: ModelSpec) -> Embedder:
    """The embedder for a run's chunks: NumPy for the first ``embed.numpy_texts`` texts
    when the model allows it, the backend after."""
    if not settings.numpy_texts:
        return _backend(settings, spec)
    return _numpy_first(settings, spec, settings.numpy_texts)


def _backend(settings: Any, spec: ModelSpec) -> Embedder:
    from embedding.presets import load_embedder

    return load_embedder(settings, spec)


def _numpy_first(settings: Any, spec: ModelSpec, budget: int | None) -> Embedder:
    try:
        inspect_model(spec)
    except Unsupported as exc:
        log.debug("NumPy encoder: %s stays on %s: %s", spec.model_id, spec.backend, exc)
        return _backend(settings, spec)
    return NumpyFirstEmbedder(spec, lambda: _backend(settings, spec), budget)
