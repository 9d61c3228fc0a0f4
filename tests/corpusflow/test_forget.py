"""`corpusflow forget`: a canary sentence planted in one document leaves no byte behind.

A real ingest (in-process engine, bundled MiniLM) of a few sample files plus one file
carrying a unique canary, an edit so that older Lance versions and an older parse-cache
entry hold the canary too, then `corpusflow forget` through the CLI.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from common.settings import Settings, load_settings
from corpusflow.api import search
from corpusflow.cli import app
from corpusflow.engine import InProcessExecutor, RefreshEngine
from sources import doc_id_for
from storage import Store
from storage.erasure import scan_for_windows, window_hashes

CANARY = "The zanzibar quokka ledger opens at 04:17 under code VERMILION-8842 each Tuesday."
SECRET = "secret_memo.md"
QUESTIONS = ("nightly hotel cap in tier 1 cities", "who handles payroll questions")


def _settings(db: Path) -> Settings:
    return load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False}})


def _refresh(src: Path, settings: Settings) -> Any:
    return RefreshEngine(str(src), settings).refresh(InProcessExecutor())


def _files_with(root: Path, needles: list[bytes]) -> list[str]:
    hits = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            data = (Path(dirpath) / name).read_bytes()
            if any(n in data for n in needles):
                hits.append(str((Path(dirpath) / name).relative_to(root)))
    return hits


def _top(settings: Settings) -> dict[str, list[tuple[str, str]]]:
    return {
        f"{mode}: {q}": [(h["path"], h["chunk_id"]) for h in search(q, settings, k=3, mode=mode)]
        for q in QUESTIONS
        for mode in ("hybrid", "dense", "keyword")
    }


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_forget_leaves_no_trace(samples_dir: Path, tmp_path: Path, caplog: Any) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("travel_policy.docx", "onboarding.html", "release_notes.md"):
        shutil.copy(samples_dir / name, src / name)
    secret = src / SECRET
    secret.write_text(
        "# Internal memo\n\n## Access\n\n"
        f"{CANARY} Nobody outside the night shift may read this memo.\n\n"
        "## Contacts\n\nAsk the duty officer for the vault schedule.\n",
        encoding="utf-8",
    )
    db = tmp_path / "db"
    settings = _settings(db)
    first = _refresh(src, settings)
    assert (first.new, first.failed) == (4, 0)
    # An edit: the old chunks stay in older versions, the old parse in the parse cache.
    time.sleep(0.01)
    secret.write_text(secret.read_text() + "\n## Update\n\nThe vault moved to level 3.\n")
    second = _refresh(src, settings)
    assert second.changed == 1
    before = _top(settings)

    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    assert active is not None
    secret_id = doc_id_for(SECRET)
    secret_rows = store.rows_of_documents(active.chunk_table, [secret_id], ["embed_key"])
    embed_keys = {r["embed_key"] for r in secret_rows}
    assert embed_keys
    needles = [CANARY.encode("utf-8"), CANARY.encode("utf-16-le")]
    # Control: Lance stores the strings as plain UTF-8, so the scan below is not vacuous.
    assert _files_with(db, needles), "the canary should be readable in the db before forget"
    # ... and verify's window scan finds the memo's chunk texts in Lance's files.
    texts = store.rows_of_documents(active.chunk_table, [secret_id], ["text"])
    key = "ab" * 32
    pre, conf = window_hashes([r["text"] for r in texts], key)
    assert pre and scan_for_windows(db, key, pre, conf)[0]

    started = time.perf_counter()
    result = _cli("forget", SECRET, "--db", str(db), "--source", str(src), "--json")
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    elapsed = time.perf_counter() - started
    assert receipt["paths"] == [SECRET] and receipt["doc_ids"] == [secret_id]
    assert receipt["still_in_source"] == [SECRET]
    assert receipt["rows_removed"] > 0 and receipt["versions_pruned"] > 0
    assert receipt["tags_removed"]  # the refresh tags pinned versions holding the memo
    assert receipt["windows"] > 0
    assert any("time travel" in n for n in receipt["notes"])
    print(
        f"forget took {elapsed:.1f}s: {receipt['rows_removed']} rows removed, "
        f"{receipt['versions_pruned']} versions pruned, {len(receipt['tags_removed'])} tags "
        f"deleted, {receipt['windows']} window hashes"
    )
    for name, info in sorted(receipt["tables"].items()):
        print(f"  {name}: {info}")

    # Not one byte of the canary anywhere under the database directory.
    assert _files_with(db, needles) == []
    assert _files_with(db, [b"VERMILION-8842"]) == []
    # Not in any table, caches included; the embedding cache lost the memo's keys.
    store = Store.from_settings(settings.storage)
    for name in store.table_names():
        dump = json.dumps(store.db.open_table(name).to_arrow().to_pylist(), default=str)
        assert "VERMILION" not in dump and "zanzibar" not in dump, name
    for name in store.table_names():
        if "__embed_cache__" in name:
            keys = set(store.read_columns(name, ["embed_key"]).column("embed_key").to_pylist())
            assert not keys & embed_keys
    # The ledger holds a tombstone.
    ledger = store.ledger.all(store.chunks.suffix_of(active.chunk_table))
    assert ledger[secret_id].status == "forgotten"
    assert ledger[secret_id].title is None and not ledger[secret_id].chunk_count
    erasures = store.runs.erasures()
    assert [e["erasure_id"] for e in erasures] == [receipt["erasure_id"]]
    assert "VERMILION" not in json.dumps(erasures, default=str)

    # The next refresh leaves the file out while it is still there, and says so.
    caplog.set_level(logging.WARNING, logger="corpusflow.plan")
    third = _refresh(src, settings)
    assert (third.new, third.changed, third.failed, third.forgotten) == (0, 0, 0, 1)
    assert any(SECRET in r.getMessage() and "--undo" in r.getMessage() for r in caplog.records)
    assert _files_with(db, needles) == []

    # verify passes and reports the erasure check.
    result = _cli("verify", str(src), "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"], report["violations"]
    assert report["erasure"]["checked"] == [receipt["erasure_id"]]
    assert report["erasure"]["scan"] == "done" and report["erasure"]["windows_found"] == 0
    assert report["erasure"]["files_scanned"] > 0
    assert any(SECRET in line for line in report["forgotten"])

    # The other documents search as before: the same hits in the same order, the memo's
    # chunks gone from the lists.
    after = _top(settings)
    for q, hits in before.items():
        others = [h for h in hits if h[0] != SECRET]
        assert after[q][: len(others)] == others, q
        assert all(p != SECRET for p, _ in after[q])
        assert hits[0][0] != SECRET  # the top answer was another document's
    hits = search("zanzibar quokka ledger VERMILION", settings, k=5, mode="keyword")
    assert all(h["path"] != SECRET for h in hits)


def test_verify_finds_planted_text_and_undo_readmits(samples_dir: Path, tmp_path: Path) -> None:
    """The byte scan is not blind: text planted back under the database directory is a
    violation. `forget --undo` lifts the tombstone and the next refresh re-adds the file."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(samples_dir / "release_notes.md", src / "release_notes.md")
    (src / SECRET).write_text(f"# Memo\n\n{CANARY}\n", encoding="utf-8")
    db = tmp_path / "db"
    settings = _settings(db)
    _refresh(src, settings)
    result = _cli("forget", SECRET, "--db", str(db))
    assert result.exit_code == 0, result.output
    assert "rows removed" in result.output or "row(s) removed" in result.output
    (db / "stray.bin").write_bytes(b"\x00junk" + CANARY.encode() + b"junk\x00")
    result = _cli("verify", "--db", str(db))
    assert result.exit_code == 1
    assert "forgotten text in stray.bin" in result.output
    (db / "stray.bin").unlink()
    assert _cli("verify", "--db", str(db)).exit_code == 0

    assert _cli("forget", "nope.md", "--db", str(db)).exit_code == 2
    result = _cli("forget", "--undo", SECRET, "--db", str(db))
    assert result.exit_code == 0 and "re-admitted" in result.output
    again = _refresh(src, settings)
    assert again.new == 1
    store = Store.from_settings(settings.storage)
    active = store.pointer.active()
    assert active is not None
    ledger = store.ledger.all(store.chunks.suffix_of(active.chunk_table))
    assert ledger[doc_id_for(SECRET)].status == "indexed"
