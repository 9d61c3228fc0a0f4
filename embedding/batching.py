"""Length-sorted, checkpointed batch embedding."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from embedding.base import Embedder, VectorCheckpoint

Vector = tuple[np.ndarray, dict[int, float] | None]


@dataclass(slots=True)
class EmbedCounts:
    """What one ``embed_texts`` call did: texts sent to the model, texts found cached."""

    embedded: int = 0
    cached: int = 0


def embed_texts(
    embedder: Embedder,
    ids: Sequence[str],
    texts: Sequence[str],
    batch_size: int,
    checkpoint: VectorCheckpoint | None = None,
    checkpoint_every: int = 1,
    on_progress: Callable[[int], None] | None = None,
    counts: EmbedCounts | None = None,
) -> dict[str, Vector]:
    """Vectors for every id. Ids already in the checkpoint are not embedded again;
    each group of ``checkpoint_every`` finished batches is saved before the next starts.
    ``counts``, when given, is increased by what was embedded and what was cached.
    """
    if len(ids) != len(texts):
        raise ValueError("ids and texts differ in length")
    done: dict[str, Vector] = dict(checkpoint.load(ids)) if checkpoint is not None else {}
    if on_progress is not None and done:
        on_progress(len(done))
    todo = sorted(
        ((i, t) for i, t in zip(ids, texts, strict=True) if i not in done),
        key=lambda it: len(it[1]),
        reverse=True,  # the longest batch first: an out-of-memory shows up at once
    )
    todo = list(dict(todo).items())  # an id repeated in the input is embedded once
    if counts is not None:
        counts.cached += len(done)
        counts.embedded += len(todo)
    group = max(1, batch_size) * max(1, checkpoint_every)
    for start in range(0, len(todo), group):
        part = todo[start : start + group]
        part_ids = [i for i, _ in part]
        out = embedder.embed([t for _, t in part], batch_size)
        if checkpoint is not None:
            checkpoint.save(part_ids, out.dense, out.sparse)
        for n, cid in enumerate(part_ids):
            done[cid] = (out.dense[n], out.sparse[n] if out.sparse is not None else None)
        if on_progress is not None:
            on_progress(len(part))
    return done
