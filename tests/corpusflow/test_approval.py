"""Approval instead of refusal, in the engine (no orchestrator): an ``Approver`` is asked
before the first write when the plan says a budget would stop the run, and its answer
is applied; the work-weighted ETA the progress hook reports. The Prefect side (a paused
flow run answered through the API) is tests/flows/test_approval.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from common.settings import Settings, load_settings
from corpusflow.approval import Answer, ApprovalRequest, Decision, RunRejected
from corpusflow.engine import InProcessExecutor, RefreshEngine
from corpusflow.estimate import WorkEta, WorkProgress
from corpusflow.plan import DeletionGuardError
from storage import Store


def _settings(db: Path, **run: Any) -> Settings:
    return load_settings(
        None,
        {
            "storage": {"db": str(db), "write_batch_docs": 1},
            "run": {"progress": False, **run},
        },
    )


def _notes(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"note_{i:02d}.md").write_text(
            f"# Note {i}\n\nMaintenance note {i} for turbine T-{i:03d}: the blade inspection "
            f"interval is {i + 2} weeks.\n"
        )
    return root


class Answering:
    """An Approver that records what it was asked and gives one answer."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return Decision(self.answer, by="test", note="because")


def _run(src: Path, settings: Settings, approver: Answering) -> Any:
    engine = RefreshEngine(str(src), settings, approve=approver)
    return engine.refresh(InProcessExecutor())


def test_a_budget_the_plan_would_pass_asks_and_each_answer_is_applied(tmp_path: Path) -> None:
    src = _notes(tmp_path / "src", 4)
    # approve: the budget the plan predicted is lifted for this run; everything is done.
    yes = Answering(Answer.APPROVE)
    report = _run(src, _settings(tmp_path / "a", max_embedded=2), yes)
    (request,) = yes.asked
    assert request.budgets == ("run.max_embedded",) and not request.guard
    assert "run.max_embedded=2 would stop the run" in request.reasons[0]
    assert request.to_process == 4 and request.deleted == 0
    assert (report.new, report.stopped_by, report.failed) == (4, "", 0)
    assert report.embedded > 2  # past the budget: it was lifted
    assert report.approval is not None and report.approval.waited_s >= 0
    assert {k: v for k, v in report.to_dict()["approval"].items() if k != "waited_s"} == {
        "reasons": list(request.reasons),
        "answer": "approve",
        "by": "test",
        "note": "because",
    }
    assert report.estimate["budget_stop"] is None  # the estimate the run went on with

    # trim: the budget stays, and stops the run as it would without asking.
    trim = Answering(Answer.TRIM)
    report = _run(src, _settings(tmp_path / "t", max_embedded=2), trim)
    assert len(trim.asked) == 1
    assert report.stopped_by == "run.max_embedded" and 0 < report.embedded <= 2

    # reject: nothing written at all (no table, no ledger, no run record).
    no = Answering(Answer.REJECT)
    with pytest.raises(RunRejected, match="nothing changed"):
        _run(src, _settings(tmp_path / "r", max_embedded=2), no)
    store = Store(str(tmp_path / "r"))
    assert store.pointer.active() is None
    assert store.runs.recent(5) == []
    # ... and the write lease was released: the same collection can run now.
    report = RefreshEngine(str(src), _settings(tmp_path / "r")).refresh(InProcessExecutor())
    assert report.new == 4


def test_nothing_asks_within_the_budgets_or_without_an_approver(tmp_path: Path) -> None:
    src = _notes(tmp_path / "src", 3)
    quiet = Answering(Answer.REJECT)
    assert _run(src, _settings(tmp_path / "a", max_embedded=1000), quiet).new == 3
    assert quiet.asked == []  # nothing to approve: a reject was never given
    # run.approval without "budgets": the budget stops the run, nobody is asked.
    report = _run(src, _settings(tmp_path / "b", max_embedded=1, approval=["deletions"]), quiet)
    assert quiet.asked == [] and report.stopped_by == "run.max_embedded"
    # No approver (the CLI): the deletion guard refuses, as before.
    for p in list(src.iterdir())[:2]:
        p.unlink()
    with pytest.raises(DeletionGuardError, match="--force-delete"):
        RefreshEngine(str(src), _settings(tmp_path / "a")).refresh(InProcessExecutor())


def test_the_eta_moves_from_the_plans_estimate_to_the_measured_pace() -> None:
    eta = WorkEta("r", documents=101, total_s=100.0, started=0.0)
    first = eta.snapshot(now=0.0)
    assert (first.eta_s, first.measured, first.percent) == (100.0, 0.0, 0.0)
    # The run is twice as slow as estimated: 1 estimated second per 2 real ones.
    eta.advance(1.0, 1)
    one = eta.snapshot(now=2.0)
    assert 0.25 < one.measured < 0.35  # 1 - 1/sqrt(2)
    assert 99.0 < one.eta_s < 198.0
    eta.advance(49.0, 98)
    late = eta.snapshot(now=100.0)
    assert late.measured > 0.89 and late.percent == pytest.approx(50.0)
    assert late.eta_s == pytest.approx(0.9 * 100.0 + 0.1 * 50.0, rel=0.01)  # ~95 s, not 50
    assert eta.snapshot(now=101.0, final=True).eta_s == 0.0


def test_progress_artifacts_are_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.approval import ProgressArtifacts

    now = [0.0]
    hook = ProgressArtifacts("c", every_s=2.0, clock=lambda: now[0])
    sent: list[WorkProgress] = []
    monkeypatch.setattr(hook, "_publish", lambda p: sent.append(p))
    eta = WorkEta("r", documents=1000, total_s=1000.0, started=0.0)
    for i in range(1000):  # 1,000 documents in 10 s: one progress call each
        now[0] = i / 100
        eta.advance(1.0, 1)
        hook(eta.snapshot(now[0]))
    hook(eta.snapshot(now[0], final=True))
    assert len(sent) == 6  # at 0, 2, 4, 6, 8 s and the final one
    assert sent[-1].final and sent[-1].percent == 100.0
