"""Which native allocation sites grew between two points of a memray capture.

Capture (memray is not a corpusflow dependency: ``pip install memray``), after a first
``python bench/flow_rss.py DIR`` has generated the corpus:
    memray run --native -o run.bin bench/flow_rss.py --child DIR
Then:
    python bench/memray_growth.py run.bin 0.35 0.97 [FRAMES]
prints the bytes live at the snapshots taken at 35% and 97% of the run and the
allocation stacks (native and Python frames) whose live bytes grew most between them.
"""

from __future__ import annotations

import collections
import sys
from typing import Any

import memray

MIB = 2**20


def live_at(record: Any, snapshot: int) -> int:
    return sum(
        iv.n_bytes
        for iv in record.intervals
        if iv.allocated_before_snapshot <= snapshot
        and (iv.deallocated_before_snapshot is None or iv.deallocated_before_snapshot > snapshot)
    )


def main() -> None:
    path, first, last = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    frames = int(sys.argv[4]) if len(sys.argv) > 4 else 12
    reader = memray.FileReader(path)
    snaps = list(reader.get_memory_snapshots())
    k1, k2 = int(len(snaps) * first), min(int(len(snaps) * last), len(snaps) - 1)
    print(
        f"RSS at {first:.0%} / {last:.0%}: {snaps[k1].rss / MIB:.0f} / {snaps[k2].rss / MIB:.0f} MiB"
    )
    grew: collections.Counter[str] = collections.Counter()
    before = after = 0
    for record in reader.get_temporal_allocation_records(merge_threads=True):
        a, b = live_at(record, k1), live_at(record, k2)
        before, after = before + a, after + b
        if b != a:
            try:
                stack = record.hybrid_stack_trace(max_stacks=frames)
            except Exception:  # no native frames recorded for this site
                stack = record.stack_trace(max_stacks=frames)
            grew[" < ".join(f"{f[0]}@{f[1].rsplit('/', 1)[-1]}:{f[2]}" for f in stack)] += b - a
    print(f"live bytes {before / MIB:.0f} -> {after / MIB:.0f} MiB")
    for stack, size in grew.most_common(20):
        print(f"{size / MIB:8.2f} MiB  {stack[:900]}\n")


if __name__ == "__main__":
    main()
