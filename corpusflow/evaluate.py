"""Retrieval evaluation on a labelled question set.

Each JSONL line: ``{"question": str, "path": str, "contains": str}`` where ``path``
is the expected source file (relative to the ingested root) and ``contains`` a
snippet the retrieved child chunk or its parent section must contain (compared
case-insensitively with whitespace normalised).

A question's rank is the position of the first result from ``path`` whose text or
parent text contains the snippet, searched to depth max(k, 10). Failures:
- ``retrieved below k``: found, but at a rank past k;
- ``wrong document``: no result from the expected document at all (others outrank it);
- ``not retrieved``: the document is in the results, but no retrieved passage has the snippet.

Optional fields of a question line (``lang``, ``kind``, ``doc_lang``, ``split``...)
are kept with it; ``evaluate`` reports HitRate@1/@5 and MRR@10 per value of each of
``GROUP_FIELDS`` the set carries (per language, per question kind, per language of the
question against the language of its document: the cross-lingual cases).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SearchFn = Callable[[str, int], list[dict[str, Any]]]
# Question fields evaluate() breaks the figures down by, when the question set has them.
GROUP_FIELDS: tuple[str, ...] = ("lang", "kind", "lang/doc_lang", "split")


@dataclass(frozen=True)
class Question:
    question: str
    path: str
    contains: str
    extra: dict[str, Any] = field(default_factory=dict)


def load_questions(path: str | Path) -> list[Question]:
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            out.append(
                Question(
                    question=data.pop("question"),
                    path=data.pop("path"),
                    contains=data.pop("contains"),
                    extra=data,
                )
            )
        except (ValueError, KeyError) as exc:
            raise ValueError(
                f"{path}:{n}: each line needs question, path and contains ({exc})"
            ) from exc
    return out


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def rank_of(q: Question, results: Sequence[dict[str, Any]]) -> tuple[int | None, bool]:
    """(1-based rank of the first matching result or None, expected document seen)."""
    snippet = _norm(q.contains)
    seen = False
    for i, r in enumerate(results, start=1):
        if r["path"] != q.path:
            continue
        seen = True
        if snippet in _norm(r.get("text", "")) or snippet in _norm(r.get("parent_text", "")):
            return i, True
    return None, seen


def evaluate(questions: Sequence[Question], search: SearchFn, k: int = 5) -> dict[str, Any]:
    depth = max(k, 10)
    per_question = []
    hits1 = hitsk = hits5 = 0
    rr = 0.0
    failures: dict[str, list[str]] = {
        "retrieved below k": [],
        "wrong document": [],
        "not retrieved": [],
    }
    for q in questions:
        results = search(q.question, depth)
        rank, seen = rank_of(q, results)
        if rank == 1:
            hits1 += 1
        if rank is not None and rank <= 5:
            hits5 += 1
        if rank is not None and rank <= k:
            hitsk += 1
        if rank is not None and rank <= 10:
            rr += 1.0 / rank
        if rank is None:
            failures["not retrieved" if seen else "wrong document"].append(q.question)
        elif rank > k:
            failures["retrieved below k"].append(q.question)
        per_question.append(
            {
                "question": q.question,
                "path": q.path,
                "rank": rank,
                "top_path": results[0]["path"] if results else None,
                **q.extra,
            }
        )
    n = max(len(questions), 1)
    groups = {
        key: per_group(per_question, key, k)
        for key in GROUP_FIELDS
        if any(all(f in pq for f in key.split("/")) for pq in per_question)
    }
    return {
        "questions": len(questions),
        "k": k,
        "hit_rate_at_1": round(hits1 / n, 4),
        "hit_rate_at_5": round(hits5 / n, 4),
        f"hit_rate_at_{k}": round(hitsk / n, 4),
        "mrr_at_10": round(rr / n, 4),
        "groups": groups,
        "failures": failures,
        "per_question": per_question,
    }


def summarize(per_question: Sequence[dict[str, Any]], k: int = 5) -> dict[str, Any]:
    """HitRate@1, @5 (and @k) and MRR@10 of some questions' ranks."""
    ranks = [pq["rank"] for pq in per_question]
    n = max(len(ranks), 1)
    out = {
        "questions": len(ranks),
        "hit_rate_at_1": round(sum(r == 1 for r in ranks) / n, 4),
        "hit_rate_at_5": round(sum(r is not None and r <= 5 for r in ranks) / n, 4),
        "mrr_at_10": round(sum(1.0 / r for r in ranks if r is not None and r <= 10) / n, 4),
    }
    out[f"hit_rate_at_{k}"] = round(sum(r is not None and r <= k for r in ranks) / n, 4)
    return out


def per_group(
    per_question: Sequence[dict[str, Any]], key: str, k: int = 5
) -> dict[str, dict[str, Any]]:
    """``summarize`` per value of a question field; ``a/b`` groups by both (``zh/en``:
    Chinese questions over English documents). A question without the field is ``?``."""
    fields = key.split("/")
    buckets: dict[str, list[dict[str, Any]]] = {}
    for pq in per_question:
        value = "/".join(str(pq.get(f, "?")) for f in fields)
        buckets.setdefault(value, []).append(pq)
    return {value: summarize(qs, k) for value, qs in sorted(buckets.items())}


def gate(old: dict[str, Any], new: dict[str, Any], margin: float) -> tuple[bool, str]:
    """Whether the new table may replace the old: not worse by more than ``margin``."""
    lines = []
    ok = True
    for key in ("hit_rate_at_5", "mrr_at_10"):
        delta = new[key] - old[key]
        passed = delta >= -margin
        ok = ok and passed
        lines.append(
            f"{key}: old {old[key]:.3f} new {new[key]:.3f} ({delta:+.3f}, "
            f"{'ok' if passed else 'worse than the margin ' + format(margin, '.3f')})"
        )
    return ok, "; ".join(lines)
