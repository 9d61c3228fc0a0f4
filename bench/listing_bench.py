"""Cost of planning a no-change refresh over a large tree of small files.

Usage: python bench/listing_bench.py [--files 100000] [--per-dir 500] [--sidecars 0.01]

Generates ``--files`` tiny files (a few bytes each, ``--per-dir`` per folder, two folder
levels, a share of them with ``.meta.json`` sidecars) in a temporary directory, seeds a
LanceDB ledger as if every file were indexed (real SHA-256 hashes, written with
``store.ledger.upsert``), then measures what it costs to produce the change set of a
refresh in which nothing changed: ``corpusflow.plan.plan_changes`` over a
``LocalSource``. Nothing is parsed or embedded; this is the floor of every nightly run.

Rows:
- listing only: ``LocalSource.list()`` streamed to the end;
- ledger load: ``store.ledger.all()`` (the whole ledger as Python dicts);
- plan, hash shortcut: the default (size + mtime unchanged: no file is read);
- plan, hashing every file: ``source.hash_shortcut = false``.

Each step runs in a fresh process: timed once without tracing (RSS sampled every 5 ms
with psutil; growth = peak minus the RSS after imports and opening the database), then
again under tracemalloc for the peak of Python allocations (Arrow buffers are not
traced; the RSS columns include them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def generate(root: Path, files: int, per_dir: int, sidecar_share: float) -> int:
    """Write ``files`` tiny documents; returns how many sidecars were written."""
    sidecar_every = int(1 / sidecar_share) if sidecar_share > 0 else 0
    sidecars = 0
    folder = root
    for i in range(files):
        if i % per_dir == 0:
            folder = root / f"g{i // (per_dir * 100):03d}" / f"d{(i // per_dir) % 100:03d}"
            folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"doc-{i:07d}.md"
        path.write_bytes(f"# Doc {i}\n".encode())
        if sidecar_every and i % sidecar_every == 0:
            (folder / f"doc-{i:07d}.md.meta.json").write_bytes(b'{"acl": ["all"]}')
            sidecars += 1
    return sidecars


class RssSampler:
    """Peak resident memory of this process while a step runs (psutil, 5 ms samples)."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(0.005)

    def __enter__(self) -> RssSampler:
        self.before = self.process.memory_info().rss
        self.peak = self.before
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


STEPS = {
    "listing": "listing only (LocalSource.list)",
    "ledger": "ledger load (store.ledger.all)",
    "plan": "plan, hash shortcut (default)",
    "plan-hash-all": "plan, hashing every file",
}


def _setup(work: Path, hash_shortcut: bool = True) -> tuple[Any, Any, Any, Any]:
    from common.settings import load_settings
    from corpusflow.fingerprints import Fingerprints
    from parsers import ParserFingerprints
    from sources import LocalSource
    from storage import Store

    settings = load_settings(
        None,
        {"storage": {"db": str(work / "db")}, "source": {"hash_shortcut": hash_shortcut}},
    )
    source = LocalSource(work / "tree", settings.source)
    store = Store.from_settings(settings.storage)
    fps = Fingerprints(
        ParserFingerprints({"md": "bench-parser"}), "bench-chunker", "bench-model", 512, "bench"
    )
    return settings, source, store, fps


def measure_step(step: str, work: Path) -> dict[str, Any]:
    """Run one step twice in this (fresh) process: timed with RSS sampling, then traced."""
    from corpusflow.plan import plan_changes

    settings, source, store, fps = _setup(work, hash_shortcut=step != "plan-hash-all")
    store.ledger.all("warm-up-nonexistent")  # open the database before the baseline

    def run() -> Any:
        if step == "listing":
            return {"listed": sum(1 for _ in source.list())}
        if step == "ledger":
            return {"listed": len(store.ledger.all(fps.table_suffix))}
        plan = plan_changes(source, store, settings, fps)
        return {
            "listed": plan.listed,
            "work": len(plan.work),
            "unchanged": plan.unchanged,
            "deleted": len(plan.deleted),
        }

    with RssSampler() as rss:
        start = time.perf_counter()
        result = run()
        wall = time.perf_counter() - start
    tracemalloc.start()
    run()
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result | {
        "wall_s": wall,
        "rss_growth_mib": (rss.peak - rss.before) / 2**20,
        "rss_peak_mib": rss.peak / 2**20,
        "traced_peak_mib": traced_peak / 2**20,
    }


def seed_ledger(work: Path) -> None:
    """Write a ledger row for every listed file, as a finished refresh would have."""
    _, source, store, fps = _setup(work)
    from storage.records import LedgerRow

    batch: list[LedgerRow] = []
    for f in source.list():
        batch.append(
            LedgerRow(
                doc_id=f.doc_id,
                path=f.rel_path,
                content_sha256=source.content_hash(f),
                size=f.size,
                mtime=f.mtime,
                format="md",
                parser_fingerprint=fps.parsers.of("md"),
                chunker_fingerprint=fps.chunker,
                model_fingerprint=fps.model,
                chunk_count=1,
            )
        )
        if len(batch) >= 25_000:
            store.ledger.upsert(fps.table_suffix, batch)
            batch = []
    store.ledger.upsert(fps.table_suffix, batch)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--per-dir", type=int, default=500)
    ap.add_argument("--sidecars", type=float, default=0.01, help="share of files with a sidecar")
    ap.add_argument("--keep", action="store_true", help="keep the generated tree and ledger")
    ap.add_argument("--measure", choices=sorted(STEPS), help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:  # child process: one step, JSON on stdout
        print(json.dumps(measure_step(args.measure, args.work)))
        return

    work = Path(tempfile.mkdtemp(prefix="cf-listing-bench-"))
    try:
        t0 = time.perf_counter()
        sidecars = generate(work / "tree", args.files, args.per_dir, args.sidecars)
        generated_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        seed_ledger(work)
        seeded_s = time.perf_counter() - t0

        rows = []
        for step, label in STEPS.items():
            out = subprocess.run(
                [sys.executable, __file__, "--measure", step, "--work", str(work)],
                check=True,
                capture_output=True,
                text=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            assert result["listed"] == args.files, result
            if step.startswith("plan"):
                assert result["work"] == result["deleted"] == 0, result
                assert result["unchanged"] == args.files, result
            rows.append((label, result))
            print(f"{label}: {result['wall_s']:.2f} s", file=sys.stderr)

        print(
            f"\n{args.files} files in {args.files // args.per_dir} folders ({sidecars} sidecars); "
            f"generated in {generated_s:.1f} s, ledger seeded (hash + upsert) in {seeded_s:.1f} s; "
            f"no-change plan: {args.files} listed, 0 to process, {args.files} unchanged\n"
        )
        print(
            "| step (fresh process each) | wall s | files/s | RSS growth MiB | peak RSS MiB "
            "| tracemalloc peak MiB |"
        )
        print("|---|---|---|---|---|---|")
        for label, r in rows:
            print(
                f"| {label} | {r['wall_s']:.2f} | {args.files / r['wall_s']:,.0f} "
                f"| {r['rss_growth_mib']:.0f} | {r['rss_peak_mib']:.0f} "
                f"| {r['traced_peak_mib']:.0f} |"
            )
        print(
            "\ncommand: .venv/bin/python bench/listing_bench.py "
            f"--files {args.files} --per-dir {args.per_dir} --sidecars {args.sidecars:g}"
        )
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
