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
from typing import TYPE_CHECKING, Any

from corpusflow.report import CheckResult

if TYPE_CHECKING:
    from storage.records import Pin

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


def changed_ranks(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """The questions whose rank differs between two ``evaluate`` results of one set."""
    out = []
    for old, new in zip(before["per_question"], after["per_question"], strict=True):
        if old["rank"] != new["rank"]:
            out.append(
                {
                    "question": old["question"],
                    "path": old["path"],
                    "before": old["rank"],
                    "after": new["rank"],
                }
            )
    return out


def _figures(result: dict[str, Any], k: int) -> dict[str, float]:
    keys = ("hit_rate_at_5", "mrr_at_10", f"hit_rate_at_{k}")
    return {key: result[key] for key in dict.fromkeys(keys)}


@dataclass
class RetrievalCheck:
    """A question set run on a table before and after a change (``check.*`` settings).

    The one evaluation behind both the refresh check (the same table, before and after
    the run, undone when worse) and the reindex gate (the active table against the table
    built beside it, not activated when worse). The whole table is judged, restricted
    documents included (the audited ``all_groups`` override)."""

    questions: list[Question]
    margin: float | None = None  # None: report only, never refuse or undo
    mode: str = "hybrid"
    k: int = 5
    source: str = ""

    @classmethod
    def load(
        cls, path: str | Path, margin: float | None, mode: str = "hybrid", k: int = 5
    ) -> RetrievalCheck:
        return cls(load_questions(path), margin, mode, k, str(path))

    def run(
        self,
        store: Any,
        chunk_table: str,
        parent_table: str,
        embedder: Any,
        pinned: Pin | None = None,
    ) -> dict[str, Any]:
        """``evaluate`` the question set on one chunk table (as it is now, or at the
        ``pinned`` versions)."""
        from corpusflow.api import Filters, Searcher

        searcher = Searcher(store, chunk_table, parent_table, embedder, pinned)
        every = Filters(all_groups=True)
        return evaluate(
            self.questions,
            lambda q, n: searcher.search(q, k=n, mode=self.mode, filters=every),  # type: ignore[arg-type]
            k=self.k,
        )

    def compare(self, before: dict[str, Any], after: dict[str, Any]) -> CheckResult:
        """The report: figures before and after, the questions whose rank changed,
        whether the change is worse than the margin (``worse``; with no margin, any
        drop is reported but nothing is refused) and a one-line ``summary``."""
        allowed, comparison = gate(before, after, self.margin if self.margin is not None else 0.0)
        changed = changed_ranks(before, after)
        worse = not allowed
        verdict = (
            "not worse"
            if allowed
            else "worse than the margin"
            if self.margin is not None
            else "worse (no margin configured: report only)"
        )
        summary = (
            f"retrieval check ({len(self.questions)} questions, {self.mode}): "
            f"HitRate@5 {before['hit_rate_at_5']:.3f} -> {after['hit_rate_at_5']:.3f}, "
            f"MRR@10 {before['mrr_at_10']:.3f} -> {after['mrr_at_10']:.3f}; "
            f"{len(changed)} question(s) changed rank; {verdict}"
        )
        return CheckResult(
            questions=len(self.questions),
            source=self.source,
            mode=self.mode,
            k=self.k,
            margin=self.margin,
            before=_figures(before, self.k),
            after=_figures(after, self.k),
            changed=changed,
            comparison=comparison,
            worse=worse,
            refused=worse and self.margin is not None,
            summary=summary,
        )
