"""Which Lance session cache grows with commits, and what a small bound costs.

Usage: python bench/lance_metadata_cache.py INDEX_MIB METADATA_MIB [--commits 400]

Commits ``--commits`` merge-inserts of 30 rows to a table with a BTREE index on the key,
looks one key up after each and compacts every 100 (as a run does to its caches), with the
session's index and metadata caches bounded as given. Prints the session's size every 50
commits and the wall time: run it with one bound small and the other large to see which
cache fills, and with several metadata bounds to see whether eviction costs time.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import lancedb
import pyarrow as pa
from lancedb.index import BTree


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("index_mib", type=int)
    ap.add_argument("metadata_mib", type=int)
    ap.add_argument("--commits", type=int, default=400)
    args = ap.parse_args()
    session = lancedb.Session(
        index_cache_size_bytes=args.index_mib * 2**20,
        metadata_cache_size_bytes=args.metadata_mib * 2**20,
    )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        db = lancedb.connect(tmp, session=session)
        table = db.create_table("t", pa.table({"k": ["k0"], "v": ["x" * 1000]}))
        table.create_index("k", config=BTree())
        for i in range(1, args.commits + 1):
            rows = pa.table({"k": [f"k{i}_{j}" for j in range(30)], "v": ["x" * 1000] * 30})
            table.merge_insert("k").when_not_matched_insert_all().execute(rows)
            table.search().where(f"k = 'k{i}_3'").limit(1).to_list()
            if i % 100 == 0:
                table.optimize()
            if i % 50 == 0:
                print(f"{i} commits: session caches {session.size_bytes / 2**20:.1f} MiB")
    print(
        f"index {args.index_mib} MiB, metadata {args.metadata_mib} MiB: "
        f"{time.perf_counter() - start:.2f} s"
    )


if __name__ == "__main__":
    main()
