"""A real embedding process killed with SIGKILL resumes from its Lance checkpoint.

The worker (tests/helpers/embed_worker.py) runs ``embed_texts`` with the real
``EmbeddingCache`` over generated chunks through the tiny BGE-M3 model
(FlagEmbedding's BGEM3FlagModel code path) and logs every encoder call and every
save durably. What the embedding cache holds right after a kill is read here
directly: it is the ground truth of "persisted before the kill".

Three runs share one database: run 1 is SIGKILLed from here once some batches
are checkpointed; run 2 resumes and SIGKILLs itself inside a checkpoint save,
while Lance writes that commit; run 3 finishes. Each save is one Lance commit,
so a batch is persisted wholly or not at all, and a batch cut short is embedded
again (once) by the next run: the embedding cache never holds a chunk twice.
(Three processes, because each start costs ~10 s of imports on 2 cores.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.settings import EmbedSettings
from embedding import ModelSpec, embed_texts, load_embedder, resolve_model
from storage.store import Store
from tests.helpers.embed_worker import chunk_texts, read_log

REPO = Path(__file__).resolve().parents[2]
N_CHUNKS = 1000
BATCH = 32
KILL_AFTER_SAVES = 6
KILL_IN_SAVE = 3


@pytest.fixture()
def workers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The worker processes a test started; any still running at the end is killed."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _start(
    workers: list[subprocess.Popen[bytes]],
    model: Path,
    db: Path,
    log: Path,
    *extra: str,
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tests.helpers.embed_worker"]
    cmd += ["--model", str(model), "--db", str(db), "--log", str(log)]
    cmd += ["--n", str(N_CHUNKS), "--batch-size", str(BATCH), *extra]
    # One torch thread: the worker and the fresh computation here share the 2 cores.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with log.with_suffix(".stderr").open("w") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=err, stderr=subprocess.STDOUT)
    workers.append(proc)
    return proc


def _stderr(log: Path) -> str:
    return log.with_suffix(".stderr").read_text(errors="replace")[-3000:]


def _events(log: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_log(log) if e["event"] == kind]


def _encoded(log: Path) -> list[str]:
    return [i for e in _events(log, "encode") for i in e["ids"]]


def _staged(db: Path, spec: ModelSpec) -> list[str]:
    """Every key row of the embedding cache, duplicates included."""
    store = Store(str(db), "default")
    name = store.caches.embeddings(spec.table_suffix, spec.dim).name
    if not store.exists(name):
        return []
    return [str(v) for v in store.read_columns(name, ["embed_key"]).column("embed_key").to_pylist()]


def _fresh(model: Path, ids: list[str], texts: list[str]) -> dict[str, Any]:
    """The vectors of a from-scratch run without checkpoint, in this process, on one thread."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        embedder = load_embedder(EmbedSettings(model=str(model), device="cpu"))
        return embed_texts(embedder, ids, texts, BATCH)
    finally:
        torch.set_num_threads(threads)


def _check_all_or_nothing(log: Path, staged: set[str]) -> tuple[int, bool | None]:
    """Saves logged as finished are in the table; the one cut short is wholly in or out.

    Returns (finished saves, whether the interrupted save's commit landed or None).
    """
    saved = _events(log, "saved")
    saved_ids = {i for e in saved for i in e["ids"]}
    assert saved_ids <= staged
    cut = [e for e in _events(log, "save-begin") if e["save"] > len(saved)]
    extra = staged - saved_ids
    if not cut:
        assert not extra
        return len(saved), None
    assert len(cut) == 1
    cut_ids = set(cut[0]["ids"])
    assert extra in (set(), cut_ids), "a save was persisted in part"
    return len(saved), extra == cut_ids


def test_sigkilled_runs_resume_without_reembedding(
    tiny_bgem3: Path, tmp_path: Path, workers: list[subprocess.Popen[bytes]]
) -> None:
    spec = resolve_model(EmbedSettings(model=str(tiny_bgem3)))
    ids, texts = chunk_texts(N_CHUNKS)
    db = tmp_path / "db"
    log1, log2, log3 = (tmp_path / f"run{n}.jsonl" for n in (1, 2, 3))

    # Run 1: SIGKILLed from here once KILL_AFTER_SAVES batches are checkpointed.
    proc = _start(workers, tiny_bgem3, db, log1)
    deadline = time.monotonic() + 120
    while len(_events(log1, "saved")) < KILL_AFTER_SAVES:
        assert proc.poll() is None, f"worker ended before the kill:\n{_stderr(log1)}"
        assert time.monotonic() < deadline, "worker too slow to checkpoint"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    assert not _events(log1, "done")

    staged1 = _staged(db, spec)
    persisted1 = set(staged1)
    assert len(staged1) == len(persisted1), "duplicate rows after the kill"
    saves1, cut1 = _check_all_or_nothing(log1, persisted1)
    encoded1 = _encoded(log1)
    assert persisted1 <= set(encoded1)
    assert saves1 >= KILL_AFTER_SAVES and 0 < len(persisted1) < N_CHUNKS

    # Run 2: resumes, and kills itself inside its KILL_IN_SAVE-th save, while Lance
    # writes the commit's data file.
    proc = _start(workers, tiny_bgem3, db, log2, "--die-in-save", str(KILL_IN_SAVE))
    assert proc.wait(120) == -signal.SIGKILL, _stderr(log2)
    encoded2 = _encoded(log2)
    assert not persisted1 & set(encoded2), "run 2 embedded ids persisted by run 1"
    assert max(Counter(encoded2).values()) == 1
    staged2 = _staged(db, spec)
    persisted2 = set(staged2)
    assert len(staged2) == len(persisted2), "duplicate rows after a kill inside a save"
    assert persisted1 <= persisted2
    saves2, cut2 = _check_all_or_nothing(log2, persisted2 - persisted1)
    assert saves2 == KILL_IN_SAVE - 1 and cut2 is not None  # the kill hit that save

    # Run 3: to the end; meanwhile a fresh computation here.
    out = tmp_path / "run3.npz"
    proc = _start(workers, tiny_bgem3, db, log3, "--out", str(out))
    fresh = _fresh(tiny_bgem3, ids, texts)
    assert proc.wait(180) == 0, _stderr(log3)
    assert _events(log3, "done")[0]["n"] == N_CHUNKS
    encoded3 = _encoded(log3)
    # Nothing persisted before a kill is encoded again; everything else exactly once.
    assert not persisted2 & set(encoded3)
    assert Counter(encoded3) == Counter(set(ids) - persisted2)

    # Every id is in the embedding cache exactly once.
    staged3 = _staged(db, spec)
    assert Counter(staged3) == Counter(ids)

    # The staged vectors are what run 3 returned and what a fresh computation gives.
    loaded = Store(str(db), "default").caches.embeddings(spec.table_suffix, spec.dim).load(ids)
    result = np.load(out)
    assert list(result["ids"]) == ids
    staged_dense = np.stack([loaded[i][0] for i in ids])
    np.testing.assert_array_equal(staged_dense, result["dense"])
    fresh_dense = np.stack([fresh[i][0] for i in ids])
    max_diff = float(np.abs(staged_dense - fresh_dense).max())
    np.testing.assert_allclose(staged_dense, fresh_dense, rtol=0, atol=1e-6)
    for i, returned in zip(ids, result["sparse"], strict=True):
        staged_sparse, fresh_sparse = loaded[i][1], fresh[i][1]
        assert staged_sparse is not None and fresh_sparse is not None
        assert staged_sparse.keys() == fresh_sparse.keys()
        assert {int(k) for k in json.loads(str(returned))} == fresh_sparse.keys()
        np.testing.assert_allclose(
            [staged_sparse[k] for k in fresh_sparse], list(fresh_sparse.values()), atol=1e-6
        )

    saves = sum(len(_events(log, "saved")) for log in (log1, log2, log3))
    data_files = sum(len(f) for d, _, f in os.walk(db) if Path(d).name == "data")
    print(
        f"\nkill test: {N_CHUNKS} chunks, batch {BATCH}. Run 1: "
        f"{len(_events(log1, 'encode'))} encoder calls, {saves1} batches ({len(persisted1)} ids) "
        f"checkpointed, SIGKILL (save in flight committed: {cut1}; "
        f"{len(set(encoded1) - persisted1)} ids encoded but not persisted). Run 2: "
        f"{len(_events(log2, 'encode'))} encoder calls, {saves2} batches checkpointed, SIGKILL "
        f"inside save {KILL_IN_SAVE} (its commit landed: {cut2}; "
        f"{len(set(encoded2) - persisted2)} ids encoded but not persisted). Run 3: "
        f"{len(_events(log3, 'encode'))} encoder calls, {len(encoded3)} ids. Staging rows "
        f"{len(staged3)}, max |staged - fresh| {max_diff:.1e}; data files that no commit "
        f"refers to: {data_files - saves}"
    )
