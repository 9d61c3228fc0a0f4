"""Cold `corpusflow search` wall time from a fresh process: today's query path vs the NumPy one.

Usage:
    python bench/search_coldstart.py [--db DB] [--query "refund policy"] [--runs 3] [--json FILE]

Without ``--db`` (or when DB has no active table) it first runs
``corpusflow ingest samples --db DB`` (about a minute), as in issue #15.

Each run is a new process with the environment of a fresh shell (plus HF_HUB_OFFLINE=1):

- before: the `corpusflow search` command with ``Searcher.for_active`` embedding queries
  through ``embedding.load_embedder`` (sentence-transformers, as before
  embedding.query_encoder): ``python -c "<patch>; corpusflow.cli.main()"``;
- after: the console script as users run it, ``corpusflow search QUERY --db DB --json``;
- floor: ``python -c "import lancedb"`` (the storage layer's own import, which search needs).

Runs alternate (before, after, floor) so that other load on the machine hits all three
alike; the 1-minute load average is printed with each. Both commands must print the same
JSON (same chunks, scores, parents), else the script exits 1. Reported: each wall time,
the median, each run's CPU time (user + system of the process and its threads: less
sensitive than wall time to other load on the machine), and an ``-X importtime``
breakdown of one "after" process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
EXE = shutil.which("corpusflow") or str(Path(PY).with_name("corpusflow"))

BEFORE = (
    "import sys, corpusflow.api as api, embedding; "
    "api.load_query_embedder = embedding.load_embedder; "
    "from corpusflow.cli import main; sys.argv[0] = 'corpusflow'; main()"
)


def _env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["HF_HUB_OFFLINE"] = "1"
    env["PATH"] = f"{Path(PY).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _timed(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system, the child's threads included) and stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=_env(), cwd=tempfile.gettempdir()
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, cpu, proc.stdout


def _has_active(db: Path) -> bool:
    code = (
        "import sys; from storage import Store; "
        f"sys.exit(0 if Store({str(db)!r}, 'default').pointer.active() else 1)"
    )
    return db.is_dir() and subprocess.run([PY, "-c", code], env=_env()).returncode == 0


def _importtime(cmd: list[str]) -> dict[str, float]:
    proc = subprocess.run(
        [PY, "-X", "importtime", *cmd], capture_output=True, text=True, env=_env()
    )
    top: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if cumulative.strip().isdigit() and not name.startswith("  "):  # top-level imports
            top[name.strip()] = top.get(name.strip(), 0.0) + int(cumulative) / 1e6
    return dict(sorted(top.items(), key=lambda kv: -kv[1])[:8])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--query", default="refund policy")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    db = args.db or Path(tempfile.mkdtemp(prefix="search-coldstart-")) / "db"
    if not _has_active(db):
        print(f"ingesting {REPO / 'samples'} into {db} ...", flush=True)
        subprocess.run([EXE, "ingest", str(REPO / "samples"), "--db", str(db)], env=_env())
        if not _has_active(db):
            raise SystemExit(f"ingest left no active table in {db}")

    search_args = ["search", args.query, "--db", str(db), "--json"]
    commands = {
        "before": [PY, "-c", BEFORE, *search_args],
        "after": [EXE, *search_args],
        "floor": [PY, "-c", "import lancedb"],
    }
    walls: dict[str, list[float]] = {k: [] for k in commands}
    cpus: dict[str, list[float]] = {k: [] for k in commands}
    loads: list[float] = []
    outputs: dict[str, str] = {}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            loads.append(os.getloadavg()[0])
            wall, cpu, out = _timed(cmd)
            walls[name].append(wall)
            cpus[name].append(cpu)
            outputs.setdefault(name, out)
            print(
                f"{name:6s} {wall:6.2f} s wall {cpu:6.2f} s CPU  (load {loads[-1]:.2f})", flush=True
            )
    same = json.loads(outputs["before"]) == json.loads(outputs["after"])
    breakdown = _importtime(
        [
            "-c",
            f"import sys; from corpusflow.cli import main; sys.argv = {['corpusflow', *search_args]!r}; main()",
        ]
    )

    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "db": str(db),
        "query": args.query,
        "commands": {k: shlex.join(v) for k, v in commands.items()},
        "wall_s": {k: [round(w, 2) for w in v] for k, v in walls.items()},
        "median_s": {k: round(statistics.median(v), 2) for k, v in walls.items()},
        "cpu_s": {k: [round(c, 2) for c in v] for k, v in cpus.items()},
        "load_avg_1m": [round(x, 2) for x in loads],
        "same_results": same,
        "hits": len(json.loads(outputs["after"])),
        "after_top_level_imports_s": {k: round(v, 2) for k, v in breakdown.items()},
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if not same:
        print("before and after returned different results", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
