"""One embedding run in its own process, for the kill test (tests/embedding/test_embed_kill.py).

    python -m tests.helpers.embed_worker --model DIR --db DIR --log FILE [--n 3000]
        [--batch-size 32] [--out FILE.npz] [--die-in-save K]

It embeds ``chunk_texts(n)`` with ``embedding.embed_texts`` and the real
``EmbeddingCache`` of ``storage.Store(db, "default")``, exactly as
``corpusflow.writes.write_batch`` does. The product code is not changed: this
script wraps the embedder's encode function and the checkpoint's save, and
appends one JSON line per event to ``--log``, flushed and fsync'd before the
run goes on, so a SIGKILL loses no event that happened:

- ``{"event": "start", "pid": ...}``
- ``{"event": "encode", "call": n, "ids": [...]}`` before every encoder call;
- ``{"event": "save-begin" | "saved", "save": n, "ids": [...]}`` around every
  checkpoint save;
- ``{"event": "done", "n": ..., "calls": ...}`` once ``embed_texts`` returned.

``--die-in-save K`` makes the process SIGKILL itself inside the K-th save: a
thread watches the embedding cache's data folder and kills the process the moment
a new data file appears there, i.e. while Lance is writing that commit (the
data file may be cut short; the commit may or may not have landed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

VOCABULARY = (
    "hotel cap tier city yuan technician lockout tagout checklist cabinet spare ship day "
    "order afternoon fleet availability percent quarter invoice policy travel meal "
    "approval manager budget report table figure page section heading contract supplier"
)


def chunk_texts(n: int, seed: int = 7) -> tuple[list[str], list[str]]:
    """``n`` deterministic (id, text) pairs of 3 to 40 words; every text is distinct."""
    rng = random.Random(seed)
    words = VOCABULARY.split()
    ids = [f"chunk-{i:05d}" for i in range(n)]
    texts = [
        f"item {i}: " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 40)))
        for i in range(n)
    ]
    return ids, texts


class DurableLog:
    def __init__(self, path: Path) -> None:
        self._fh: TextIO = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, **event: Any) -> None:
        with self._lock:
            self._fh.write(json.dumps({"t": round(time.time(), 4), **event}) + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())


def read_log(path: Path) -> list[dict[str, Any]]:
    """The complete events of a log (a line cut short by a kill is dropped)."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def _files(folder: Path) -> set[str]:
    try:
        return set(os.listdir(folder))
    except FileNotFoundError:
        return set()


def _kill_on_new_file(folder: Path, before: set[str]) -> None:
    """SIGKILL this process as soon as a file not in ``before`` appears in ``folder``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _files(folder) - before:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.0002)
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", default="")
    ap.add_argument("--die-in-save", type=int, default=0)
    args = ap.parse_args()

    import numpy as np

    from common.settings import EmbedSettings
    from embedding import embed_texts, load_embedder, resolve_model
    from storage.store import Store

    log = DurableLog(Path(args.log))
    log.write(event="start", pid=os.getpid())
    ids, texts = chunk_texts(args.n)
    id_of = dict(zip(texts, ids, strict=True))
    settings = EmbedSettings(model=args.model, device="cpu", batch_size=args.batch_size)
    spec = resolve_model(settings)
    embedder = load_embedder(settings, spec)
    checkpoint = Store(args.db, "default").caches.embeddings(spec.table_suffix, spec.dim)

    real_encode = embedder._encode  # type: ignore[attr-defined]
    calls = 0

    def logged_encode(batch: list[str]) -> Any:
        nonlocal calls
        calls += 1
        log.write(event="encode", call=calls, ids=[id_of[t] for t in batch])
        return real_encode(batch)

    embedder._encode = logged_encode  # type: ignore[attr-defined]

    real_save = checkpoint.save
    saves = 0

    def logged_save(
        part_ids: Sequence[str], dense: np.ndarray, sparse: list[dict[int, float]] | None
    ) -> None:
        nonlocal saves
        saves += 1
        log.write(event="save-begin", save=saves, ids=list(part_ids))
        if saves == args.die_in_save:
            data_dir = Path(args.db) / f"{checkpoint.name}.lance" / "data"
            before = _files(data_dir)
            threading.Thread(target=_kill_on_new_file, args=(data_dir, before), daemon=True).start()
        real_save(part_ids, dense, sparse)
        log.write(event="saved", save=saves, ids=list(part_ids))
        if saves == args.die_in_save:
            time.sleep(30)  # the watcher's kill lands before anything else happens

    checkpoint.save = logged_save  # type: ignore[method-assign,assignment]

    out = embed_texts(embedder, ids, texts, args.batch_size, checkpoint=checkpoint)
    if args.out:
        np.savez(
            args.out,
            ids=np.array(ids),
            dense=np.stack([out[i][0] for i in ids]),
            sparse=np.array([json.dumps(out[i][1]) for i in ids]),
        )
    log.write(event="done", n=len(out), calls=calls)


if __name__ == "__main__":
    main()
