"""Parse-cache lookups and writes as a run adds fragments (issue #35).

Every batch a run commits adds a fragment to the parse cache, and the fragments since the
last ``tidy`` are not indexed. This writes 64 batches of 32 entries (JSON of ~60 KB each,
the mean of the parse cache of 2,000 copies of the shared and sample corpora) through
``Caches.put_parsed`` and times, after some of them, ``Caches.get_parsed`` for keys that
are absent (a new document, the common case in a run) and present in the newest fragment.
The same is done the plain way in the same run: one filtered read that selects the JSON,
and ``merge_insert`` for every batch (what the cache did before).

    PYTHONPATH=. python bench/cache_lookups.py [--batches 64] [--kib 60]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import string
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from storage import Store
from storage.schema import PARSE_CACHE_SCHEMA
from storage.tables import sql_in

FP = "fp"
REPEAT = 20


def _payload(i: int, kib: int) -> str:
    rng = random.Random(i)
    words = " ".join("".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(kib * 128))
    return json.dumps({"doc": i, "text": words})


def _plain_get(table: Any, sha: str) -> Any:
    keys = [f"{sha}:{FP}", f"{sha}:other"]
    q = table.search().where(sql_in("cache_key", keys))
    return q.select(["parser_fingerprint", "parsed_json"]).limit(1).to_list()


def _plain_put(store: Store, items: list[tuple[str, str]]) -> None:
    data = pa.Table.from_pylist(
        [
            {
                "cache_key": f"{sha}:{FP}",
                "content_sha256": sha,
                "parser_fingerprint": FP,
                "parsed_json": js,
                "created_at": datetime.now(UTC),
            }
            for sha, js in items
        ],
        schema=PARSE_CACHE_SCHEMA,
    )
    table = store.caches.tables.open_or_create(
        store.caches.tables.name("parse_cache"), PARSE_CACHE_SCHEMA
    )
    table.merge_insert("cache_key").when_matched_update_all().when_not_matched_insert_all().execute(
        data
    )


def _leg(root: Path, plain: bool, batches: int, kib: int, marks: set[int]) -> list[dict[str, Any]]:
    store = Store(str(root / ("plain" if plain else "corpusflow")))
    name = store.caches.tables.name("parse_cache")
    out: list[dict[str, Any]] = []
    put_s, since = 0.0, 0
    for b in range(batches):
        items = [(f"sha{b}-{i}", _payload(32 * b + i, kib)) for i in range(32)]
        t0 = time.perf_counter()
        if plain:
            _plain_put(store, items)
        else:
            store.caches.put_parsed([(sha, FP, js) for sha, js in items])
        put_s += time.perf_counter() - t0
        if b == 0:
            store.caches.tidy(max_fragments=0)  # the run's first tidy: an index on the key
        if b + 1 not in marks:
            continue
        # put_ms: the mean write of the batches since the last mark
        row: dict[str, Any] = {
            "fragments": b + 1,
            "put_ms": round(1000 * put_s / (b + 1 - since), 1),
        }
        put_s, since = 0.0, b + 1
        for label, sha in (("miss_ms", "absent"), ("hit_ms", f"sha{b}-7")):
            t0 = time.perf_counter()
            for _ in range(REPEAT):
                if plain:
                    found = _plain_get(store.open(name), sha)
                else:
                    found = store.caches.get_parsed(sha, [FP, "other"])
                assert bool(found) == (label == "hit_ms")
            row[label] = round(1000 * (time.perf_counter() - t0) / REPEAT, 1)
        out.append(row)
        print(("plain      " if plain else "corpusflow ") + json.dumps(row), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=64)
    ap.add_argument("--kib", type=int, default=60, help="size of each cached JSON")
    args = ap.parse_args()
    marks = {1, 8, 16, 32, args.batches}
    root = Path(tempfile.mkdtemp(prefix="cache-lookups-"))
    try:
        _leg(root, False, args.batches, args.kib, marks)
        _leg(root, True, args.batches, args.kib, marks)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
