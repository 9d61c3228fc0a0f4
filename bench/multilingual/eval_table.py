"""Per-split, per-language figures of ``corpusflow eval --json`` results on the multilingual set.

Usage: corpusflow eval bench/questions/multilingual.jsonl --db DB --mode M --json > M.json
       python bench/multilingual/eval_table.py dense.json keyword.json hybrid.json

Prints one Markdown row per (result file, split, group): HitRate@1, HitRate@5, MRR@10 and the
number of questions, for the groups the issue asks for (English questions, non-English
questions, cross-lingual questions: question language != document language) and per question
language. ``corpusflow eval`` reports each field alone; this crosses them with the split.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from corpusflow.evaluate import summarize

GROUPS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "all": lambda q: True,
    "English": lambda q: q["lang"] == "en",
    "non-English": lambda q: q["lang"] != "en",
    "cross-lingual": lambda q: q["lang"] != q["doc_lang"],
    "zh": lambda q: q["lang"] == "zh",
    "ja": lambda q: q["lang"] == "ja",
    "ko": lambda q: q["lang"] == "ko",
}


def main() -> None:
    print("| result | split | group | n | H@1 | H@5 | MRR@10 |")
    print("|---|---|---|---|---|---|---|")
    for name in sys.argv[1:]:
        result = json.loads(Path(name).read_text(encoding="utf-8"))
        per_question = result["per_question"]
        for split in ("heldout", "dev"):
            for group, keep in GROUPS.items():
                qs = [q for q in per_question if q.get("split") == split and keep(q)]
                s = summarize(qs)
                print(
                    f"| {Path(name).stem} | {split} | {group} | {s['questions']} | "
                    f"{s['hit_rate_at_1']:.3f} | {s['hit_rate_at_5']:.3f} | {s['mrr_at_10']:.3f} |"
                )


if __name__ == "__main__":
    main()
