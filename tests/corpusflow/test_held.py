"""An undone refresh is held, not retried blindly: the documents of a refresh the
retrieval check undid are marked held (with the questions that got worse), later
refreshes skip them without touching a table until their bytes, the question set or the
pipeline change, and `corpusflow accept-held` indexes them anyway (corpusflow.holds)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from common.errors import RetrievalCheckFailed
from common.settings import Settings
from corpusflow.cli import app
from corpusflow.engine import RefreshEngine
from corpusflow.holds import Accept, Hold
from corpusflow.verify import nothing_lost
from storage import Store
from storage.records import DocStatus, LedgerRow
from tests.corpusflow.test_retrieval_check import (  # the same documents and questions
    DOCS,
    QUESTIONS,
    UNRELATED,
    _settings,
    _snapshot,
    write_folder,
)


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    return write_folder(tmp_path)


def _ledger(db: Path) -> dict[str, LedgerRow]:
    """The active ledger by path."""
    store = Store(str(db))
    active = store.pointer.active()
    assert active is not None
    rows = store.ledger.all(store.chunks.suffix_of(active.chunk_table))
    return {r.path: r for r in rows.values()}


def _versions(db: Path) -> dict[str, int | None]:
    """Versions of the active chunk, parent and ledger tables."""
    store = Store(str(db))
    active = store.pointer.active()
    assert active is not None
    ledger = store.ledger.name(store.chunks.suffix_of(active.chunk_table))
    return {
        name: store.version_of(name) for name in (active.chunk_table, active.parent_table, ledger)
    }


def _texts(db: Path, path: str) -> str:
    return " ".join(r["text"] for r in _snapshot(db)["chunks"] if r["path"] == path)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _undone(folder: Path, settings: Settings, **kwargs: Any) -> dict[str, Any]:
    with pytest.raises(RetrievalCheckFailed) as caught:
        RefreshEngine(str(folder), settings, **kwargs).refresh()
    assert "held until their bytes" in str(caught.value)
    report: dict[str, Any] = caught.value.report
    return report


@pytest.mark.usefixtures("prefect_server")
def test_an_undone_refresh_is_held_then_skipped_retried_and_accepted(
    folder: Path, tmp_path: Path
) -> None:
    from prefect.artifacts import Artifact

    from flows.refresh import refresh_flow

    db, questions = tmp_path / "db", tmp_path / "q.jsonl"
    settings = _settings(db, questions, 0.0)
    RefreshEngine(str(folder), settings).refresh()
    before = _snapshot(db)

    # A refresh that loses two answers is undone, and its two documents are held.
    (folder / "hotels.md").write_text(UNRELATED, encoding="utf-8")
    (folder / "payroll.md").write_text(UNRELATED.replace("Garden", "Allotment"), encoding="utf-8")
    undone = _undone(folder, settings)
    assert undone["held"] == 2
    assert {h["path"] for h in undone["held_documents"]} == {"hotels.md", "payroll.md"}
    after_undo = _snapshot(db)
    assert after_undo["chunks"] == before["chunks"] and after_undo["parents"] == before["parents"]
    ledger = _ledger(db)
    assert ledger["sensors.md"].status == DocStatus.INDEXED
    for name in ("hotels.md", "payroll.md"):
        row = ledger[name]
        hold = Hold.from_json(row.hold_json)
        assert row.status == DocStatus.HELD and hold is not None
        # It keeps its previous indexed bytes and chunk count; the hold names the refused ones.
        old = next(r for r in before["ledger"] if r["path"] == name)
        assert row.content_sha256 == old["content_sha256"] != hold.sha256
        assert row.chunk_count == old["chunk_count"] > 0
        assert hold.sha256 == _sha(folder / name) and hold.kind == "change"
        assert hold.run_id == undone["run_id"] and hold.questions_worse == 2
        assert {q["path"] for q in hold.questions} == {"hotels.md", "payroll.md"}
        assert hold.before["hit_rate_at_5"] == 1.0 > hold.after["hit_rate_at_5"]

    # verify: nothing lost, the two held documents listed.
    report = nothing_lost(settings, str(folder))
    assert report.ok, report.violations
    assert sorted(line.split(":")[0] for line in report.held) == ["hotels.md", "payroll.md"]
    result = CliRunner().invoke(app, ["verify", str(folder), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "held       hotels.md: change held by the retrieval check" in result.output

    # status: counted and listed with the questions that got worse.
    result = CliRunner().invoke(app, ["status", "--db", str(db), "--json"])
    info = json.loads(result.stdout)
    assert info["documents"] == {"indexed": 1, "held": 2}
    assert [h["path"] for h in info["held_documents"]] == ["hotels.md", "payroll.md"]
    assert info["held_documents"][0]["questions_worse"] == 2
    result = CliRunner().invoke(app, ["status", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "held        hotels.md: change held by the retrieval check of run" in result.output
    assert f"worse: {QUESTIONS[0]['question']} (rank 1 -> -)" in result.output

    # The next refresh (the Prefect flow) touches no table and reports the held documents.
    versions = _versions(db)
    plain = refresh_flow(str(folder), settings.model_dump_json())
    assert plain["held"] == 2 and plain["changed"] == plain["new"] == plain["deleted"] == 0
    assert plain["unchanged"] == 1 and plain["chunks_written"] == 0
    assert plain["check"] == {}  # nothing to change: no check ran
    assert _versions(db) == versions
    assert _snapshot(db)["chunks"] == before["chunks"]
    artifact = Artifact.get("held-documents-default")
    assert artifact is not None
    data = str(artifact.data)
    assert "hotels.md" in data and "payroll.md" in data and undone["run_id"] in data
    assert "2 question(s) worse" in data and QUESTIONS[0]["question"] in data
    summary = Artifact.get("refresh-summary-default")
    assert summary is not None and "| held |" in str(summary.data)

    # Other bytes in a held file: it is tried (and checked) again; the other stays held.
    (folder / "hotels.md").write_text(UNRELATED.replace("Garden", "Orchard"), encoding="utf-8")
    os.utime(folder / "sensors.md", (1_700_000_000, 1_700_000_000))  # same bytes, new stat
    again = _undone(folder, settings)
    assert again["changed"] == 1 and again["held"] == 2 and again["unchanged"] == 1
    # The stat refresh the run wrote before its check outlives the undo.
    assert _ledger(db)["sensors.md"].mtime == 1_700_000_000
    assert _ledger(db)["sensors.md"].status == DocStatus.INDEXED
    hold = Hold.from_json(_ledger(db)["hotels.md"].hold_json)
    assert hold is not None and hold.run_id == again["run_id"]
    assert hold.sha256 == _sha(folder / "hotels.md")
    held_payroll = Hold.from_json(_ledger(db)["payroll.md"].hold_json)
    assert held_payroll is not None and held_payroll.run_id == undone["run_id"]

    # A held file put back to its indexed bytes is indexed again, with no chunk written.
    (folder / "payroll.md").write_text(DOCS["payroll.md"], encoding="utf-8")
    chunk_version = _versions(db)
    back = RefreshEngine(str(folder), settings).refresh()
    assert back.unchanged == 2 and back.held == 1 and back.chunks_written == 0
    assert _ledger(db)["payroll.md"].status == DocStatus.INDEXED
    assert _ledger(db)["payroll.md"].hold_json is None
    assert list(_versions(db).values())[:2] == list(chunk_version.values())[:2]

    # accept-held: a path that is not held is refused; a held one is indexed, unchecked
    # (the configured check would undo it).
    config = tmp_path / "corpusflow.toml"
    config.write_text(
        f'[storage]\ndb = "{db}"\n\n[run]\nprogress = false\n\n'
        f'[check]\nquestions = "{questions}"\nmargin = 0.0\n'
    )
    runner = CliRunner()
    result = runner.invoke(app, ["accept-held", str(folder), "sensors.md", "--config", str(config)])
    assert result.exit_code == 2 and "not held" in result.output
    result = runner.invoke(
        app, ["accept-held", str(folder), "hotels.md", "--config", str(config), "--json"]
    )
    assert result.exit_code == 0, result.output
    accepted = json.loads(result.stdout)
    assert accepted["accepted"] == 1 and accepted["changed"] == 1 and accepted["failed"] == 0
    assert "skipped, accepting 1 held document" in accepted["check"]["summary"]
    row = _ledger(db)["hotels.md"]
    assert row.status == DocStatus.INDEXED and row.content_sha256 == _sha(folder / "hotels.md")
    assert "Water the tomatoes" in _texts(db, "hotels.md")
    assert "500 EUR" not in _texts(db, "hotels.md")
    # Nothing held any more; the next refresh has nothing to do.
    assert nothing_lost(settings, str(folder)).ok
    final = RefreshEngine(str(folder), settings).refresh()
    assert final.held == 0 and final.unchanged == 3 and final.chunks_written == 0


def test_an_undone_deletion_is_held_until_the_question_set_changes(
    folder: Path, tmp_path: Path
) -> None:
    db, questions = tmp_path / "db", tmp_path / "q.jsonl"
    settings = _settings(db, questions, 0.0)
    RefreshEngine(str(folder), settings).refresh()
    before = _snapshot(db)

    # Deleting the file that answers a question is undone: its chunks stay, held.
    (folder / "sensors.md").unlink()
    undone = _undone(folder, settings)
    assert undone["deleted"] == 1 and [h["kind"] for h in undone["held_documents"]] == ["deletion"]
    row = _ledger(db)["sensors.md"]
    assert row.status == DocStatus.HELD and row.chunk_count > 0
    assert _snapshot(db)["chunks"] == before["chunks"]
    report = nothing_lost(settings, str(folder))
    assert report.ok and not report.pending, report.to_dict()
    assert report.held and report.held[0].startswith("sensors.md: deletion held")

    # The next refresh neither deletes it again nor touches a table.
    versions = _versions(db)
    plain = RefreshEngine(str(folder), settings).refresh()
    assert plain.held == 1 and plain.deleted == 0 and plain.check is None
    assert _versions(db) == versions

    # A changed question set (its bytes) lifts the hold: the deletion is tried again.
    questions.write_text(questions.read_text() + "\n")
    again = _undone(folder, settings)
    assert again["deleted"] == 1
    second = Hold.from_json(_ledger(db)["sensors.md"].hold_json)
    assert second is not None and second.run_id == again["run_id"]

    # Accepted: the deletion goes through without the check.
    accepted = RefreshEngine(str(folder), settings, kind="accept-held", accept=Accept()).refresh()
    assert accepted.accepted == 1 and accepted.deleted == 1
    assert accepted.check is not None and "skipped" in accepted.check.summary
    assert _ledger(db)["sensors.md"].status == DocStatus.DELETED
    assert all(r["path"] != "sensors.md" for r in _snapshot(db)["chunks"])
    assert nothing_lost(settings, str(folder)).ok
