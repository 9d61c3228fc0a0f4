"""RSS of the flow process over a Prefect refresh of generated documents (issue #15).

Usage: python bench/flow_rss.py DIR [--docs 600] [--without-one-thread]

Generates ``--docs`` mixed documents in DIR/corpus once (bench/gen_corpus.py), then runs
``refresh_flow`` in a child process as a served deployment does (ephemeral API, one task
run per document, two parser processes) into a fresh DIR/db, samples the child's RSS every
second and prints it at 35%, 60% and 97% of the run, its peak and the run's stage times.
``--without-one-thread`` runs the embedder on the task-runner threads, as before
OneThreadEmbedder. ``--child DIR`` runs only the flow (for ``memray run --native``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(root: Path, without_one_thread: bool) -> None:
    sys.path.insert(0, str(REPO))
    from corpusflow.runtime import configure_environment, start_prefect_api

    configure_environment()
    os.environ["PREFECT_HOME"] = str(root / "phome")
    from common.settings import load_settings
    from flows.refresh import refresh_flow

    if without_one_thread:
        import corpusflow.engine as engine

        engine.OneThreadEmbedder = lambda inner: inner  # type: ignore[assignment,misc]
    settings = load_settings(None, {"storage": {"db": str(root / "db")}, "parse": {"workers": 2}})
    api = start_prefect_api()
    start = time.time()
    with api.serving():
        report = refresh_flow(str(root / "corpus"), settings.model_dump_json())
    stages = {k: v for k, v in report["stage_s"].items() if k in ("parse_chunk", "embed")}
    print(
        f"{report['new']} new, {report['failed']} failed, {report['chunks_written']} chunks, "
        f"{time.time() - start:.0f} s, stages {stages}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--docs", type=int, default=600)
    ap.add_argument("--without-one-thread", action="store_true")
    ap.add_argument("--child", default="")
    args = ap.parse_args()
    if args.child:
        child(Path(args.child), args.without_one_thread)
        return
    import psutil

    sys.path.insert(0, str(REPO / "bench"))
    from gen_corpus import generate

    root = Path(args.dir)
    if not (root / "corpus").exists():
        generate(root / "corpus", args.docs)
    for stale in ("db", "phome"):
        shutil.rmtree(root / stale, ignore_errors=True)
    cmd = [sys.executable, __file__, "--child", str(root)]
    if args.without_one_thread:
        cmd.append("--without-one-thread")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    watched, start, samples = psutil.Process(proc.pid), time.time(), []
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            samples.append((time.time() - start, watched.memory_info().rss / 2**20))
        time.sleep(1)
    assert proc.stdout is not None
    total = samples[-1][0]

    def at(fraction: float) -> int:
        near = sorted(r for t, r in samples if abs(t - fraction * total) <= 0.03 * total)
        return round(near[len(near) // 2])

    print(proc.stdout.read().strip())
    print(
        f"flow process RSS at 35/60/97% of the run: {at(0.35)} / {at(0.6)} / {at(0.97)} MiB, "
        f"peak {max(r for _, r in samples):.0f} MiB"
    )


if __name__ == "__main__":
    main()
