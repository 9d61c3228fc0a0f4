"""How chunking time grows with the size of a table.

Usage: python bench/table_chunking.py [--rows 500 2000 8000] [--max-tokens 160]

Writes a CSV of N rows x 10 columns per size, parses it (docling's CSV backend, timed
apart) and chunks it with the bundled tokenizer, printing chunks, seconds and
milliseconds per chunk. Time per chunk that rises with N is a quadratic path.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[500, 2000, 8000])
    ap.add_argument("--max-tokens", type=int, default=160)
    args = ap.parse_args()

    from chunking import chunk_document
    from chunking.structure import warm_up
    from common.settings import ChunkSettings, EmbedSettings
    from embedding import load_embedder
    from parsers import parse_file

    warm_up()
    tokenizer = load_embedder(EmbedSettings()).tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            path = Path(tmp) / f"table_{rows}.csv"
            with path.open("w", newline="", encoding="utf-8") as fh:
                writer = csv.writer(fh)
                writer.writerow([f"Column header {j}" for j in range(10)])
                writer.writerows([f"r{i}c{j} value" for j in range(10)] for i in range(rows))
            parsed = parse_file(path)
            start = time.perf_counter()
            chunks = chunk_document(parsed, "d", tokenizer, args.max_tokens, ChunkSettings())
            took = time.perf_counter() - start
            n = len(chunks.children)
            print(f"rows={rows} chunks={n} chunk_s={took:.1f} ms_per_chunk={1000 * took / n:.1f}")


if __name__ == "__main__":
    main()
