"""Approval in the Prefect UI, on the session's Prefect server: a refresh flow run that
would delete most of the index pauses with a form (approve / trim / reject); the test
answers it through Prefect's API from another thread, as the UI does
(``resume_flow_run(flow_run_id, run_input=...)``), and checks what each answer did to
the index. Also the run's live progress artifacts."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from common.settings import Settings, load_settings
from corpusflow.engine import InProcessExecutor, RefreshEngine
from flows.refresh import refresh_flow
from storage import Store

pytestmark = pytest.mark.usefixtures("prefect_server")

DEADLINE_S = 120.0  # for the flow run to pause (a busy 2-core machine), then to answer
GONE = [f"note_{i}.md" for i in range(4)]


def _settings(db: Path, **run: Any) -> Settings:
    return load_settings(
        None,
        {
            "storage": {"db": str(db)},
            "run": {
                "progress": False,
                "approval_poll_s": 1,
                "approval_timeout_s": int(DEADLINE_S) + 60,
                **run,
            },
        },
    )


@pytest.fixture()
def wiped(tmp_path: Path) -> Iterator[tuple[Path, Settings]]:
    """Six notes indexed (in-process, no flow run); then four of them vanish (more than
    storage.max_delete_fraction), one changes and one is added."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"note_{i}.md").write_text(
            f"# Note {i}\n\nInspection note {i} for turbine T-{i:03d}: blades every {i + 2} weeks.\n"
        )
    settings = _settings(tmp_path / "db")
    assert RefreshEngine(str(src), settings).refresh(InProcessExecutor()).new == 6
    for name in GONE:
        (src / name).unlink()
    (src / "note_5.md").write_text("# Note 5\n\nThe gearbox oil is changed every 18 months.\n")
    (src / "added.md").write_text("# Added\n\nThe nacelle crane is inspected each spring.\n")
    yield src, settings


def _ledger(settings: Settings) -> dict[str, tuple[str, str]]:
    store = Store(settings.storage.db)
    active = store.pointer.active()
    assert active is not None
    rows = store.ledger.all(store.chunks.suffix_of(active.chunk_table)).values()
    return {r.path: (str(r.status), r.content_sha256) for r in rows}


def _versions(settings: Settings) -> dict[str, int]:
    """Every table of the database and its version: what 'nothing changed' means."""
    db = Store(settings.storage.db).db
    return {name: db.open_table(name).version for name in db.table_names()}


class Answerer:
    """Answers the paused flow run of ``source`` from another thread, through the API,
    as an operator in the UI does; keeps what it saw while the run was paused."""

    def __init__(self, source: Path, answer: str | None) -> None:
        self.source, self.answer = str(source), answer
        self.seen: dict[str, Any] = {}
        self.error: BaseException | None = None
        context = contextvars.copy_context()  # the session's Prefect API settings
        self.thread = threading.Thread(target=context.run, args=(self._run,), daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._answer()
        except BaseException as exc:  # reported by the test's thread
            self.error = exc

    def _paused(self, client: Any) -> Any:
        from prefect.client.schemas.filters import (
            FlowRunFilter,
            FlowRunFilterState,
            FlowRunFilterStateType,
        )
        from prefect.client.schemas.objects import StateType

        paused = FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED]))
        )
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            for run in client.read_flow_runs(flow_run_filter=paused):
                if run.parameters.get("source") == self.source:
                    return run
            time.sleep(0.2)
        raise TimeoutError(f"no paused flow run of {self.source} within {DEADLINE_S} s")

    def _answer(self) -> None:
        from prefect.client.orchestration import get_client
        from prefect.exceptions import PrefectHTTPStatusError
        from prefect.flow_runs import resume_flow_run
        from prefect.input.run_input import keyset_from_paused_state

        with get_client(sync_client=True) as client:
            run = self._paused(client)
            self.seen["flow_run_id"] = run.id
            self.seen["approval"] = _artifact(client, run.id, "approval-default").data
            if self.answer is None:
                return
            keys = keyset_from_paused_state(run.state)
            # Saved just after the pause, as JSON: what the UI reads to render the form.
            deadline = time.monotonic() + DEADLINE_S
            while "description" not in self.seen:
                try:
                    for part in ("schema", "description"):
                        raw = client.read_flow_run_input(run.id, keys[part])
                        self.seen[part] = json.loads(raw)
                except PrefectHTTPStatusError as exc:
                    if exc.response.status_code != 404 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        resume_flow_run(run.id, run_input={"answer": self.answer, "note": "checked"})

    def join(self) -> dict[str, Any]:
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive(), "the answering thread did not finish"
        if self.error is not None:
            raise self.error
        return self.seen


def _artifact(client: Any, flow_run_id: UUID, key: str) -> Any:
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    found = client.read_artifacts(
        artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[key]),
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
        )
    )
    assert len(found) == 1, (key, found)  # updated in place, never one per update
    return found[0]


def _flow(src: Path, settings: Settings, answer: str | None) -> tuple[Any, dict[str, Any]]:
    answerer = Answerer(src, answer)
    state = refresh_flow(str(src), settings.model_dump_json(), return_state=True)
    return state, answerer.join()


def _paused_as_the_ui_shows_it(seen: dict[str, Any]) -> None:
    markdown = seen["approval"]
    assert "refusing to delete 4 of 6 indexed documents" in markdown
    assert "Would delete 4 document(s) (4 indexed)" in markdown
    assert all(f"`{name}`" in markdown for name in GONE)
    assert "plan: 1 new, 1 changed" in markdown  # the estimate's lines
    # The form the UI renders: the three answers, and the same text above it.
    schema = seen["schema"]
    answers = schema["properties"]["answer"]
    assert set(answers.get("enum") or answers["anyOf"][0]["enum"]) == {
        "approve",
        "trim",
        "reject",
    }
    assert "answer" in schema["required"]
    assert seen["description"] == markdown


def test_approved_deletions_are_applied(
    wiped: tuple[Path, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.approval import ProgressArtifacts

    src, settings = wiped
    calls: list[bool] = []  # progress calls from the engine; True when published
    publish = ProgressArtifacts._publish

    def counted(self: ProgressArtifacts, p: Any) -> None:
        calls.append(True)
        publish(self, p)

    monkeypatch.setattr(ProgressArtifacts, "_publish", counted)
    started = time.monotonic()
    state, seen = _flow(src, settings, "approve")
    elapsed = time.monotonic() - started
    assert state.is_completed(), state
    _paused_as_the_ui_shows_it(seen)
    report = state.result()
    assert (report["deleted"], report["new"], report["changed"]) == (4, 1, 1)
    assert report["approval"]["answer"] == "approve" and report["approval"]["note"] == "checked"
    ledger = _ledger(settings)
    assert {p for p, (status, _) in ledger.items() if status == "deleted"} == set(GONE)
    assert {p for p, (status, _) in ledger.items() if status == "indexed"} == {
        "note_4.md",
        "note_5.md",
        "added.md",
    }
    # The run's progress: the same two artifacts updated in place, ending at 100%.
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        run_id = seen["flow_run_id"]
        progress = _artifact(client, run_id, "refresh-progress-default")
        summary = _artifact(client, run_id, "refresh-summary-default")
        answered = _artifact(client, run_id, "approval-default").data
        eta = _artifact(client, run_id, "refresh-eta-default")
    assert answered.startswith("**answered approve (checked)**") and seen["approval"] in answered
    assert progress.type == "progress" and float(progress.data) == 100.0
    assert "**approve by the Prefect UI: checked** (refusing to delete 4 of 6" in summary.data
    assert "2 of 2 documents" in progress.description
    assert "finished after" in eta.data and "| 2 | 2 |" in eta.data
    # The first and the final update, and at most one per 2 s in between.
    assert 2 <= len(calls) <= 2 + elapsed / 2
    print(f"approved run: {elapsed:.1f} s, {len(calls)} progress publications")


def test_rejected_run_changes_nothing(wiped: tuple[Path, Settings]) -> None:
    src, settings = wiped
    before, ledger = _versions(settings), _ledger(settings)
    runs = len(Store(settings.storage.db).runs.recent(100))
    state, seen = _flow(src, settings, "reject")
    assert state.is_cancelled(), state
    assert "nothing changed" in (state.message or "")
    _paused_as_the_ui_shows_it(seen)
    assert _versions(settings) == before  # not one table written, not even the ledger
    assert _ledger(settings) == ledger
    assert len(Store(settings.storage.db).runs.recent(100)) == runs
    # The write lease was released: the next run of the collection gets as far as the
    # deletion guard (without run.approval it refuses, as the CLI does).
    plain = _settings(Path(settings.storage.db), approval=[])
    refused = refresh_flow(str(src), plain.model_dump_json(), return_state=True)
    assert refused.is_failed() and "refusing to delete 4 of 6" in (refused.message or "")


def test_trimmed_run_applies_the_changes_but_not_the_deletions(
    wiped: tuple[Path, Settings],
) -> None:
    src, settings = wiped
    ledger = _ledger(settings)
    state, seen = _flow(src, settings, "trim")
    assert state.is_completed(), state
    _paused_as_the_ui_shows_it(seen)
    report = state.result()
    assert (report["deleted"], report["new"], report["changed"]) == (0, 1, 1)
    assert report["approval"]["answer"] == "trim"
    after = _ledger(settings)
    for name in GONE:  # still indexed with the bytes they had
        assert after[name] == ledger[name] and after[name][0] == "indexed"
    assert after["note_5.md"][1] != ledger["note_5.md"][1]  # the change went in
    assert after["added.md"][0] == "indexed"
    # The next run plans the deletions again, and asks again.
    state, seen = _flow(src, settings, "reject")
    assert state.is_cancelled() and "Would delete 4 document(s)" in seen["approval"]


def test_no_answer_by_the_timeout_changes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"note_{i}.md").write_text(f"# Note {i}\n\nTurbine T-{i:03d}.\n")
    settings = _settings(tmp_path / "db")
    RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    for i in range(2):
        (src / f"note_{i}.md").unlink()
    before = _versions(settings)
    quick = _settings(tmp_path / "db", approval_timeout_s=2)
    started = time.monotonic()
    state, seen = _flow(src, quick, None)
    assert time.monotonic() - started < DEADLINE_S
    # Prefect fails a flow run whose pause expired (the engine's Cancelled comes too late).
    assert state.is_failed() and "never resumed" in (state.message or ""), state
    assert "Would delete 2 document(s)" in seen["approval"]
    assert _versions(settings) == before


def test_a_budget_alone_pauses_and_approve_runs_past_it(tmp_path: Path) -> None:
    """No deletion anywhere: only the plan's forecast that run.max_embedded would stop the
    run pauses it; approve lifts the budget for this run, which then does all the work."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        (src / f"note_{i}.md").write_text(
            f"# Note {i}\n\nTurbine T-{i:03d}: the yaw brake is checked every {i + 3} months.\n"
        )
    settings = _settings(tmp_path / "db", max_embedded=2)
    state, seen = _flow(src, settings, "approve")
    assert state.is_completed(), state
    markdown = seen["approval"]
    # The artifact names the budget, and nothing about deletions.
    assert "- **run.max_embedded=2 would stop the run after about" in markdown
    assert "`run.max_embedded` lifted for this run" in markdown
    assert "refusing to delete" not in markdown and "Would delete" not in markdown
    assert "plan: 4 new" in markdown  # the estimate's lines
    assert seen["description"] == markdown  # the form's text
    report = state.result()
    assert (report["new"], report["failed"], report["stopped_by"]) == (4, 0, "")
    assert report["embedded"] > 2  # past the budget: approve lifted it
    assert report["approval"]["answer"] == "approve"
    assert "run.max_embedded=2 would stop the run" in report["approval"]["reasons"][0]
    assert len(report["approval"]["reasons"]) == 1  # the budget alone
    assert {status for status, _ in _ledger(settings).values()} == {"indexed"}
    assert len(_ledger(settings)) == 4
