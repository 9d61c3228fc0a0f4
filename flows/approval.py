"""Approval in the Prefect UI, and the run's live progress as Prefect artifacts.

Thin wrappers over Prefect for what the engine exposes (corpusflow.approval,
``RefreshEngine.on_progress``); docs/operations.md, "Approving a run" and "Progress in
the UI", says what an operator sees.

- ``ask_in_ui`` is an engine ``Approver``: it publishes the markdown artifact
  ``approval-<collection>`` (reasons, the plan's estimate, the deletions: counts by status
  and the first paths) and pauses the flow run with ``pause_flow_run(wait_for_input=
  Approval)``: the UI shows a form with the answer (approve / trim / reject) and a note.
  No answer within ``run.approval_timeout_s``: Prefect fails the paused flow run, and the
  engine has written nothing.
- ``ProgressArtifacts`` keeps the progress artifact ``refresh-progress-<collection>``
  (per cent of the estimated work done) and the markdown artifact ``refresh-eta-<collection>``
  (the ETA in seconds) up to date, at most once per ``every_s`` seconds, by updating the
  same two artifacts in place (no new artifact per update).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal, cast
from uuid import UUID

from prefect import get_run_logger
from prefect.input import RunInput
from pydantic import Field

from common.settings import Settings
from corpusflow.approval import Answer, ApprovalRequest, Approver, Decision, RunRejected
from corpusflow.estimate import WorkProgress

PROGRESS_EVERY_S = 2.0  # at most one update of the progress artifacts per this many seconds


def artifact_key(collection: str) -> str:
    """A collection's name as Prefect allows in an artifact key (lowercase, digits, dashes)."""
    return "".join(c if c.isalnum() else "-" for c in collection.lower())


class Approval(RunInput):
    """The operator's answer to a paused refresh."""

    answer: Literal["approve", "trim", "reject"] = Field(
        description=(
            "approve: go on as planned (deletions applied, the budgets the plan would pass "
            "lifted for this run); trim: go on without the deletions, within the budgets; "
            "reject: end now, nothing changed"
        )
    )
    note: str = Field("", description="Why (kept in the run report)")


def request_markdown(request: ApprovalRequest, settings: Settings) -> str:
    """The approval artifact: why the run waits, what it would do and delete, the answers."""
    run = settings.run
    lines = [
        f"# Refresh {request.run_id} of `{request.collection}` waits for approval",
        "",
        f"Source: `{request.source}`",
        "",
        *(f"- **{reason}**" for reason in request.reasons),
        "",
        "## Plan and estimate",
        "",
        *(f"- {line}" for line in request.estimate_lines),
        "",
    ]
    if request.deleted:
        counts = ", ".join(
            f"{n} {status}" for status, n in sorted(request.deleted_by_status.items())
        )
        lines += [
            f"## Would delete {request.deleted} document(s) ({counts})",
            "",
            *(f"- `{path}`" for path in request.deleted_paths),
        ]
        if request.deleted_not_shown:
            lines.append(f"- ... and {request.deleted_not_shown} more")
        lines.append("")
    lifted = ", ".join(f"`{b}`" for b in request.budgets)
    lines += [
        "## Answers (Resume in the flow run's page)",
        "",
        "- **approve**: go on as planned"
        + (", deletions applied" if request.deleted else "")
        + (f"; {lifted} lifted for this run" if lifted else ""),
        "- **trim**: go on without the deletions (they are asked again next run)"
        + (f", stopped by {lifted} as configured" if lifted else ""),
        "- **reject**: end now; nothing is changed",
        "",
        f"No answer within {run.approval_timeout_s} s (`run.approval_timeout_s`): Prefect "
        "fails the flow run; nothing is changed.",
    ]
    return "\n".join(lines) + "\n"


def ask_in_ui(settings: Settings) -> Approver:
    """An engine ``Approver`` that pauses the current flow run for the answer."""

    def ask(request: ApprovalRequest) -> Decision:
        from prefect.artifacts import create_markdown_artifact
        from prefect.exceptions import FlowPauseTimeout
        from prefect.flow_runs import pause_flow_run

        run = settings.run
        markdown = request_markdown(request, settings)
        artifact = cast(
            UUID,
            create_markdown_artifact(
                key=f"approval-{artifact_key(request.collection)}",
                markdown=markdown,
                description=f"Refresh {request.run_id} waits for approval",
            ),
        )
        get_run_logger().warning(
            "run %s paused for approval (%s); answer in the UI within %d s",
            request.run_id,
            "; ".join(request.reasons),
            run.approval_timeout_s,
        )
        form = Approval.with_initial_data(description=markdown)
        try:
            answer = pause_flow_run(
                wait_for_input=form,
                timeout=run.approval_timeout_s,
                poll_interval=run.approval_poll_s,
                key=f"approval-{request.run_id}",
            )
        except FlowPauseTimeout:
            outcome = (
                f"no answer within run.approval_timeout_s={run.approval_timeout_s}: nothing changed"
            )
            _answered(artifact, outcome, markdown)
            raise RunRejected(f"run {request.run_id} had {outcome}") from None
        note = f" ({answer.note})" if answer.note else ""
        _answered(artifact, f"answered {answer.answer}{note}", markdown)
        return Decision(Answer(answer.answer), by="the Prefect UI", note=answer.note)

    return ask


class ProgressArtifacts:
    """An engine ``on_progress`` hook: the run's progress by work as two Prefect
    artifacts updated in place, throttled to one update per ``every_s`` seconds (the
    first and the final one always go)."""

    def __init__(
        self,
        collection: str,
        every_s: float = PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.key = artifact_key(collection)
        self.every_s = every_s
        self.clock = clock
        self.progress_id: UUID | None = None
        self.eta_id: UUID | None = None
        self.last = float("-inf")
        self.updates = 0  # publications (two artifact writes each)
        self.failed = False

    def __call__(self, p: WorkProgress) -> None:
        now = self.clock()
        if not p.final and now - self.last < self.every_s:
            return
        self.last = now
        try:
            self._publish(p)
        except Exception as exc:  # the UI's view must never fail the run
            if not self.failed:
                get_run_logger().warning("progress artifacts not updated: %s", exc)
            self.failed = True

    def _publish(self, p: WorkProgress) -> None:
        from prefect.artifacts import (
            create_markdown_artifact,
            create_progress_artifact,
            update_progress_artifact,
        )

        summary = (
            f"{p.done} of {p.documents} documents, {p.percent:.0f}% of the estimated work; "
            + ("finished" if p.final else f"ETA {p.eta_s:.0f} s")
        )
        if self.progress_id is None:
            self.progress_id = cast(
                UUID,
                create_progress_artifact(
                    p.percent, key=f"refresh-progress-{self.key}", description=summary
                ),
            )
        else:
            update_progress_artifact(self.progress_id, p.percent, description=summary)
        markdown = eta_markdown(p)
        if self.eta_id is None:
            self.eta_id = cast(
                UUID,
                create_markdown_artifact(
                    key=f"refresh-eta-{self.key}",
                    markdown=markdown,
                    description=f"Refresh {p.run_id}: time left",
                ),
            )
        else:
            _update_artifact(self.eta_id, markdown)
        self.updates += 1


def _answered(artifact_id: UUID, outcome: str, markdown: str) -> None:
    """The approval artifact, now saying how it was answered (best effort)."""
    try:
        _update_artifact(artifact_id, f"**{outcome}**\n\n{markdown}")
    except Exception as exc:
        get_run_logger().warning("approval artifact not updated: %s", exc)


def _update_artifact(artifact_id: UUID, data: Any) -> None:
    """An artifact's data replaced in place (its key's latest version shows it)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import ArtifactUpdate

    with get_client(sync_client=True) as client:
        client.update_artifact(artifact_id=artifact_id, artifact=ArtifactUpdate(data=data))


def eta_markdown(p: WorkProgress) -> str:
    if p.final:
        eta = f"finished after {p.elapsed_s:.0f} s"
    else:
        basis = (
            "the plan's estimate"
            if not p.measured
            else f"{p.measured:.0%} this run's measured pace, the rest the plan's estimate"
        )
        eta = f"ETA: **{p.eta_s:.0f} s** ({basis})"
    return (
        f"# Refresh {p.run_id}\n\n{eta}\n\n"
        "| documents done | planned | work done (est. s) | work planned (est. s) | elapsed s |\n"
        "|---|---|---|---|---|\n"
        f"| {p.done} | {p.documents} | {p.done_s:.1f} | {p.total_s:.1f} | {p.elapsed_s:.1f} |\n"
    )
