"""Approval instead of refusal: a run whose plan trips the deletion guard, or that the
estimate says a budget would stop, asks someone before its first write.

The engine knows no orchestrator: it is given an ``Approver`` (a callable taking the
``ApprovalRequest`` and returning a ``Decision``) and applies the answer:

- ``approve``: the run goes on as planned: the deletions are applied, and the budgets the
  plan predicted would stop it (``Estimate`` ``budget_stop``/``exceeded``) are lifted for
  this run only;
- ``trim``: the run goes on without the deletions (they stay indexed, and the next run
  plans them again and asks again) and within the budgets as configured;
- ``reject``: the run ends before writing anything (``RunRejected``): no table, ledger
  row or run record changes.

Without an approver (the CLI) nothing asks: the guard refuses (``--force-delete``) and a
budget stops the run where it is met, as before. ``flows.approval`` asks in the Prefect UI
(a paused flow run waiting for input).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from common.errors import CorpusflowError

# The deleted paths an approval request lists; the counts always cover all of them.
DELETED_SHOWN = 100


class Answer(StrEnum):
    APPROVE = "approve"
    TRIM = "trim"
    REJECT = "reject"


class RunRejected(CorpusflowError):
    """The run was not approved (rejected, or no answer came in time): it ended before
    its first write; nothing changed."""


@dataclass(frozen=True, slots=True)
class Decision:
    answer: Answer
    by: str = ""  # who or what answered (a note, "timeout"): kept in the run report
    note: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a run asks approval for: why, what it would do, what it would delete."""

    run_id: str
    collection: str
    source: str
    reasons: tuple[str, ...]  # the guard's refusal and/or the budget forecast
    guard: bool  # the deletion guard tripped
    budgets: tuple[str, ...]  # the run.max_* the plan predicts would stop the run
    estimate_lines: tuple[str, ...]
    to_process: int
    deleted: int  # documents the run would delete (all of them)
    deleted_by_status: dict[str, int] = field(default_factory=dict)
    deleted_paths: tuple[str, ...] = ()  # the first DELETED_SHOWN, sorted

    @property
    def deleted_not_shown(self) -> int:
        return self.deleted - len(self.deleted_paths)


Approver = Callable[[ApprovalRequest], Decision]
