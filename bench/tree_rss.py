"""Peak resident memory of a command's whole process tree, by role.

Usage:
  python bench/tree_rss.py [--interval 0.25] [--json FILE] -- corpusflow ingest DIR --db DB

Runs the command as a fresh process and, every ``--interval`` seconds, sums the RSS of it
and every descendant (processes, not threads; a parser child is a child subreaper, so what
LibreOffice orphans stays in its tree). Each sample is also split by role: ``cli`` (the
command itself), ``parser`` (each parser child with everything under it, the tree the
``parse.memory_limit_mb`` cap counts), ``api`` (Prefect's uvicorn) and ``other`` (reaper,
watchdog, resource tracker). Reports the peak of the sum and of each role, and the number of
samples. A sampler misses what lives shorter than one interval: peaks are lower bounds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from typing import Any

import psutil

GIB = 2**30


def _role(proc: psutil.Process) -> str:
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "other"
    if "multiprocessing.spawn" in cmd:
        return "parser"
    if "uvicorn" in cmd:
        return "api"
    return "other"


def sample(root: psutil.Process) -> dict[str, int]:
    """RSS of the tree under ``root`` by role (a parser child's descendants count as parser)."""
    out = {"cli": 0, "parser": 0, "api": 0, "other": 0, "parser_tree_max": 0}
    with contextlib.suppress(psutil.Error):
        out["cli"] = root.memory_info().rss
    try:
        children = root.children()
    except psutil.Error:
        return out
    for child in children:
        role = _role(child)
        tree = [child]
        with contextlib.suppress(psutil.Error):
            tree += child.children(recursive=True)
        rss = 0
        for p in tree:
            with contextlib.suppress(psutil.Error):
                rss += p.memory_info().rss
        out[role] += rss
        if role == "parser":
            out["parser_tree_max"] = max(out["parser_tree_max"], rss)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--json", default="")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command given")
    start = time.monotonic()
    proc = subprocess.Popen(cmd)
    root = psutil.Process(proc.pid)
    peak: dict[str, int] = {}
    peak_total = 0
    samples = 0
    while proc.poll() is None:
        s = sample(root)
        samples += 1
        total = s["cli"] + s["parser"] + s["api"] + s["other"]
        peak_total = max(peak_total, total)
        for key, value in s.items():
            peak[key] = max(peak.get(key, 0), value)
        time.sleep(args.interval)
    result: dict[str, Any] = {
        "command": cmd,
        "rc": proc.returncode,
        "wall_s": round(time.monotonic() - start, 1),
        "samples": samples,
        "peak_tree_gib": round(peak_total / GIB, 3),
        **{f"peak_{k}_gib": round(v / GIB, 3) for k, v in peak.items()},
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    sys.exit(0)


if __name__ == "__main__":
    main()
