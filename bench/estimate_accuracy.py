"""How close `corpusflow plan` comes: estimate vs what the run then did.

Usage: python bench/estimate_accuracy.py [--docs 40]

Generates 2 x ``--docs`` mixed documents (bench/gen_corpus.py: 60% PDF, 20% DOCX, 10% HTML,
10% Markdown). Round 1: the first half on a fresh index (the estimate on priors), ingested
in-process. Round 2: the second half added, planned with the rates round 1 recorded, then
ingested. Prints, per round, the estimate (with its range) and the actual figure for
chunks, parse CPU seconds, embedding seconds and wall time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def _round(src: Path, settings: Any) -> dict[str, Any]:
    from corpusflow.engine import InProcessExecutor, RefreshEngine
    from corpusflow.estimate import preview

    est = preview(str(src), settings).to_dict()
    t = time.perf_counter()
    report = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    wall = time.perf_counter() - t
    formats = report.rates["formats"].values()
    (embed,) = report.rates["embed"].values()
    actual = {
        "chunks": report.chunks_written,
        "parse_cpu_s": round(sum(f.get("parse_s", 0.0) for f in formats), 2),
        "embed_s": round(embed["embed_s"], 2),
        "wall_s": round(wall, 1),
    }
    estimated = {
        "chunks": est["chunks"],
        "parse_cpu_s": est["cpu_s"]["parse"],
        "embed_s": est["cpu_s"]["embed"],
        "wall_s": est["wall_s"],
    }
    return {
        "documents": est["documents"]["to_process"],
        "priors": est["priors"],
        "estimated": estimated,
        "actual": actual,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=40)
    args = ap.parse_args()
    from gen_corpus import generate

    from common.settings import load_settings
    from corpusflow.runtime import configure_environment

    configure_environment()
    work = Path(tempfile.mkdtemp(prefix="cf-estimate-"))
    try:
        pool = work / "pool"
        paths = generate(pool, 2 * args.docs)
        src = work / "src"
        settings = load_settings(
            None, {"storage": {"db": str(work / "db")}, "run": {"progress": False}}
        )
        out = []
        for half in (paths[: args.docs], paths[args.docs :]):
            for p in half:
                dst = src / p.relative_to(pool)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(p, dst)
            out.append(_round(src, settings))
        print(json.dumps(out, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
