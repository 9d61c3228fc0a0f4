"""ZIP archives as folders of documents: each member its own ledger row, changes and
deletions inside the archive propagated, bomb guards before anything is inflated."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from corpusflow.settings import EmbedSettings, Settings, SourceSettings, load_settings
from embedding import resolve_model
from flows.refresh import refresh_flow
from sources import LocalSource
from storage import Store
from storage.records import LedgerRow
from tests.helpers.invariants import assert_nothing_lost

pytestmark = pytest.mark.usefixtures("prefect_server")
SUFFIX = resolve_model(EmbedSettings()).table_suffix


def _settings(db: Path) -> Settings:
    return load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False}})


def _zip(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _ledger(db: Path) -> dict[str, dict[str, Any]]:
    store = Store(str(db))
    return {r.path: r.to_row() for r in store.ledger.all(SUFFIX).values()}


def test_archive_members_are_documents(tmp_path: Path, samples_dir: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    policy = (samples_dir / "travel_policy.docx").read_bytes()
    _zip(
        corpus / "bundle.zip",
        {
            "policies/travel_policy.docx": policy,
            "notes/gearbox.md": b"# Gearbox\n\nChange the gearbox oil every 18 months.\n",
            "../escape.md": b"# Escape\n\nnever listed\n",
            ".hidden.md": b"# Hidden\n",
            "notes/": b"",
        },
    )
    (corpus / "bundle.zip.meta.json").write_text('{"department": "ops"}')
    settings = _settings(tmp_path / "db")
    report = refresh_flow(str(corpus), settings.model_dump_json())
    assert report["failed"] == 0, report
    ledger = _ledger(tmp_path / "db")
    assert set(ledger) == {"bundle.zip/notes/gearbox.md", "bundle.zip/policies/travel_policy.docx"}
    assert all(r["status"] == "indexed" and r["chunk_count"] > 0 for r in ledger.values())
    assert all('"department": "ops"' in r["metadata_json"] for r in ledger.values())
    assert_nothing_lost(settings, str(corpus))

    # Unchanged archive: nothing is re-read. Then one member changed, one removed, one added.
    again = refresh_flow(str(corpus), settings.model_dump_json())
    assert (again["unchanged"], again["new"], again["changed"]) == (2, 0, 0)
    _zip(
        corpus / "bundle.zip",
        {
            "policies/travel_policy.docx": policy,
            "notes/gearbox.md": b"# Gearbox\n\nChange the gearbox oil every 24 months.\n",
            "notes/yaw.md": b"# Yaw\n\nGrease the yaw bearing twice a year.\n",
        },
    )
    _zip(corpus / "other.zip", {"a.md": b"# A\n\nalpha\n"})
    third = refresh_flow(str(corpus), settings.model_dump_json())
    assert (third["new"], third["changed"], third["unchanged"]) == (2, 1, 1), third
    _zip(
        corpus / "bundle.zip", {"notes/yaw.md": b"# Yaw\n\nGrease the yaw bearing twice a year.\n"}
    )
    fourth = refresh_flow(str(corpus), settings.model_dump_json())
    assert fourth["deleted"] == 2, fourth
    live = assert_nothing_lost(settings, str(corpus))
    assert {p for p, r in live.items() if r["status"] == "indexed"} == {
        "bundle.zip/notes/yaw.md",
        "other.zip/a.md",
    }
    store = Store(str(tmp_path / "db"))
    texts = store.read_columns(store.chunks.name(SUFFIX), ["path", "text"]).to_pylist()
    assert not any("24 months" in t["text"] for t in texts)  # the deleted member's chunks went


def test_archive_over_the_limits_is_not_expanded(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _zip(corpus / "many.zip", {f"m{i}.md": b"# x\n" for i in range(20)})
    listed = list(LocalSource(corpus, SourceSettings(archive_max_members=10)).list())
    assert [f.rel_path for f in listed] == ["many.zip"]  # parsed (and refused) as itself
    bomb = corpus / "bomb.zip"
    _zip(bomb, {"zeros.txt": b"\0" * (50 * 1024 * 1024)})
    names = [f.rel_path for f in LocalSource(corpus, SourceSettings()).list()]
    assert "bomb.zip" in names and "bomb.zip/zeros.txt" not in names


def test_archive_itself_is_refused_with_a_reason(tmp_path: Path) -> None:
    from corpusflow.errors import Category
    from parsers import ParseError, parse_file

    path = tmp_path / "bundle.zip"
    _zip(path, {"a.md": b"# A\n"})
    with pytest.raises(ParseError) as err:
        parse_file(path)
    assert err.value.category == Category.UNSUPPORTED
    assert "archive.zip/member" in err.value.message


def test_verify_flags_text_failed_as_empty(tmp_path: Path) -> None:
    """A document whose cached parse has text must never stand in the ledger as `empty`."""
    from corpusflow.verify import nothing_lost

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "only_heading.md").write_text("# Only a heading\n")
    settings = _settings(tmp_path / "db")
    report = refresh_flow(str(corpus), settings.model_dump_json())
    assert report["failed"] == 0 and report["chunks_written"] == 1
    assert nothing_lost(settings, str(corpus)).ok
    store = Store(str(tmp_path / "db"))
    row = _ledger(tmp_path / "db")["only_heading.md"]
    # What the chunker did before it guaranteed a chunk: fail the document as empty.
    failed = {**row, "status": "failed", "error_category": "empty", "chunk_count": 0}
    store.ledger.upsert(SUFFIX, [LedgerRow.from_row(failed)])
    violations = nothing_lost(settings, str(corpus)).violations
    assert any("only_heading.md" in v and "empty" in v for v in violations), violations


def test_shipped_formats_sample_is_fully_indexed(tmp_path: Path) -> None:
    """samples/formats: CSV in cp1252, RST, Org, JSON, YAML, UTF-16 text, WebVTT and a ZIP."""
    corpus = Path(__file__).resolve().parents[1] / "samples" / "formats"
    settings = _settings(tmp_path / "db")
    report = refresh_flow(str(corpus), settings.model_dump_json())
    assert report["failed"] == 0, report
    live = assert_nothing_lost(settings, str(corpus))
    assert {p for p, r in live.items() if r["status"] == "indexed"} == {
        "alarm_thresholds.yaml",
        "inventory.json",
        "maintenance_log.csv",
        "procedures.zip/lifting/crane_checklist.md",
        "procedures.zip/lifting/rigging.csv",
        "release_plan.org",
        "runbook.rst",
        "site_notes_utf16.txt",
        "standup.vtt",
    }
    store = Store(str(tmp_path / "db"))
    text = " ".join(
        r["text"] for r in store.read_columns(store.chunks.name(SUFFIX), ["text"]).to_pylist()
    )
    for phrase in ("José Müller", "Lock and tag", "现场访客", "Crane booking", "every 12 months"):
        assert phrase in text, phrase
