"""ZIP archives as folders of documents: each member its own ledger row, changes and
deletions inside the archive propagated, bomb guards before anything is inflated."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from common.errors import DocumentError
from common.settings import EmbedSettings, Settings, SourceSettings, load_settings
from embedding import resolve_model
from flows.refresh import refresh_flow
from sources import LocalSource, archive
from storage import Store
from storage.records import LedgerRow
from tests.helpers.invariants import assert_nothing_lost

flow = pytest.mark.usefixtures("prefect_server")
SUFFIX = resolve_model(EmbedSettings(model="minilm")).table_suffix  # conftest's pin


# Two members of Apache Tika's test-documents/moby.zip (Apache-2.0; the text is Moby-Dick),
# copied with their compressed bytes unchanged: moby_shrink.txt (shrink, method 1) and
# moby_implode.txt (implode, method 6), which Python's zipfile cannot read. Nothing here
# writes those methods (7-Zip and Info-ZIP only read them).
LEGACY = Path(__file__).parents[1] / "data" / "legacy_methods.zip"
DECODERS = archive._DECODERS


def _settings(db: Path) -> Settings:
    return load_settings(None, {"storage": {"db": str(db)}, "run": {"progress": False}})


def _zip(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _ledger(db: Path) -> dict[str, dict[str, Any]]:
    store = Store(str(db))
    return {r.path: r.to_row() for r in store.ledger.all(SUFFIX).values()}


@flow
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
    from common.errors import Category
    from parsers import ParseError, parse_file

    path = tmp_path / "bundle.zip"
    _zip(path, {"a.md": b"# A\n"})
    with pytest.raises(ParseError) as err:
        parse_file(path)
    assert err.value.category == Category.UNSUPPORTED
    assert "archive.zip/member" in err.value.message


@flow
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


@flow
def test_shipped_formats_sample_is_fully_indexed(tmp_path: Path) -> None:
    """samples/formats: CSV in cp1252, RST, Org, JSON, YAML, UTF-16 text, WebVTT and a ZIP."""
    corpus = Path(__file__).resolve().parents[2] / "samples" / "formats"
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


# ---- archives the way real corpora hold them (issue 32) -------------------------------


def _zip_raw_names(path: Path, members: dict[bytes, bytes]) -> None:
    """A ZIP whose member names are these raw bytes with the UTF-8 flag (bit 11) clear,
    as a ZIP made on Chinese or Japanese Windows has them (zipfile itself only writes
    ASCII or flagged UTF-8 names): written under same-length ASCII stand-ins, then the
    stand-ins are replaced by the raw bytes in the local and central headers."""
    data = io.BytesIO()
    stand_ins = {}
    with zipfile.ZipFile(data, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for n, (raw, body) in enumerate(members.items()):
            stand_in = f"Q{n}".ljust(len(raw), "Q").encode()
            stand_ins[stand_in] = raw
            zf.writestr(stand_in.decode(), body)
    blob = data.getvalue()
    for stand_in, raw in stand_ins.items():
        assert blob.count(stand_in) == 2  # local header + central directory
        blob = blob.replace(stand_in, raw)
    path.write_bytes(blob)


class _Unseekable(io.RawIOBase):
    """A write-only stream that cannot seek back: zipfile writes data descriptors."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.buf += bytes(b)
        return len(b)


def _data_descriptor_zip(path: Path, members: dict[str, bytes]) -> None:
    out = _Unseekable()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, body in members.items():
            with zf.open(name, "w") as fh:
                fh.write(body)
    path.write_bytes(bytes(out.buf))
    with zipfile.ZipFile(path) as zf:
        assert all(i.flag_bits & 0x08 for i in zf.infolist())  # sizes follow the data


def _spanned_pair(directory: Path) -> None:
    """A two-volume spanned archive as PKZIP/Info-ZIP `zip -s` write it: volume 1
    (`.z01`) starts with the split marker and holds the data; the last volume (`.zip`)
    holds the central directory, whose end record names disk 1."""
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as zf:
        zf.writestr("part.md", "# Part\n\nspread over two volumes\n")
    blob = data.getvalue()
    eocd = blob.rfind(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack("<LL", blob[eocd + 12 : eocd + 20])
    central = bytearray(blob[cd_offset:eocd])
    struct.pack_into("<H", central, 34, 0)  # the member starts on disk 0 (the .z01)
    (directory / "set.z01").write_bytes(b"PK\x07\x08" + blob[:cd_offset])
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 1, 1, 1, 1, cd_size, 0, 0)
    (directory / "set.zip").write_bytes(bytes(central) + end)


def _corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir()
    shutil.copy(LEGACY, corpus / "moby.zip")
    _zip_raw_names(
        corpus / "gbk.zip",
        {"审计报告/年度检查.md".encode("gbk"): "# 年度检查\n\n审计系统自动巡检需求。\n".encode()},
    )
    _zip_raw_names(
        corpus / "sjis.zip",
        {"文書/会議メモ.md".encode("cp932"): "# 会議メモ\n\n来週の会議の議題。\n".encode()},
    )
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("yaw/bearing.md", "# Yaw bearing\n\nGrease the yaw bearing twice a year.\n")
    _zip(
        corpus / "outer.zip",
        {"inner.zip": inner.getvalue(), "top.md": b"# Top\n\nThe outer archive's own note.\n"},
    )
    _data_descriptor_zip(
        corpus / "streamed.zip", {"log.md": b"# Log\n\nWritten to a pipe, sizes after data.\n"}
    )
    _directory_without_descriptors(
        corpus / "misplaced.zip",
        {"a.md": b"# A\n\nfirst entry\n", "b.md": b"# B\n\nsecond entry\n"},
    )
    _spanned_pair(corpus)
    (corpus / "plain.md").write_text("# Plain\n\nA file beside the archives.\n")
    return corpus


def test_gbk_and_shift_jis_member_names_are_decoded(tmp_path: Path) -> None:
    _zip_raw_names(tmp_path / "a.zip", {"审计报告/年度检查需求文档.doc".encode("gbk"): b"x"})
    _zip_raw_names(tmp_path / "b.zip", {"文章1.txt".encode("cp932"): b"x"})
    utf8 = "Résumé café.txt".encode()  # UTF-8 bytes without the flag (Linux/macOS zip)
    _zip_raw_names(tmp_path / "c.zip", {utf8: b"x"})
    _zip_raw_names(tmp_path / "d.zip", {"Résumé.txt".encode("cp437"): b"x"})  # DOS
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert zf.namelist() != ["审计报告/年度检查需求文档.doc"]  # zipfile alone: mojibake
    listed = [f.rel_path for f in LocalSource(tmp_path, SourceSettings()).list()]
    assert listed == [
        "a.zip/审计报告/年度检查需求文档.doc",
        "b.zip/文章1.txt",
        "c.zip/Résumé café.txt",
        "d.zip/Résumé.txt",
    ]
    forced = SourceSettings(archive_name_encoding="gbk")
    assert [f.rel_path for f in LocalSource(tmp_path, forced).list()][1] != "b.zip/文章1.txt"
    with pytest.raises(ValidationError, match="unknown encoding"):
        SourceSettings(archive_name_encoding="no-such-codec")


def test_members_in_methods_zipfile_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with zipfile.ZipFile(LEGACY) as zf:
        assert {i.compress_type for i in zf.infolist()} == {1, 6}
        with pytest.raises(NotImplementedError):
            zf.read("moby_implode.txt")
    corpus = tmp_path / "c"
    corpus.mkdir()
    shutil.copy(LEGACY, corpus / "moby.zip")
    src = LocalSource(corpus, SourceSettings())
    files = {f.rel_path: f for f in src.list()}
    assert set(files) == {"moby.zip/moby_implode.txt", "moby.zip/moby_shrink.txt"}
    tools = [(n, a) for n, a in DECODERS if shutil.which(n)]
    if not tools:
        pytest.skip("neither 7-Zip nor unzip here (scripts/system_deps.sh installs 7-Zip)")
    for tool in tools:  # every decoder installed here gives the same, CRC-checked bytes
        monkeypatch.setattr(archive, "_DECODERS", (tool,))
        with src.fetch(files["moby.zip/moby_implode.txt"]) as path:
            text = Path(path).read_text()
        assert "Ahab standing by the helm" in text and len(text) == 1078
        with src.fetch(files["moby.zip/moby_shrink.txt"]) as path:
            assert "MIDNIGHT ALOFT" in Path(path).read_text()
    monkeypatch.setattr(archive, "_DECODERS", ())
    with pytest.raises(DocumentError) as err:
        src.content_hash(files["moby.zip/moby_implode.txt"])
    assert err.value.category == "unsupported"
    assert "implode" in err.value.message and "7zip" in err.value.message


def test_nested_archives_share_the_bomb_budget(tmp_path: Path) -> None:
    def nested(members: int) -> bytes:
        inner = io.BytesIO()
        with zipfile.ZipFile(inner, "w") as zf:
            for i in range(members):
                zf.writestr(f"n{i}.md", f"# N{i}\n")
        return inner.getvalue()

    (tmp_path / "d").mkdir()
    _zip(tmp_path / "d" / "a.zip", {"small.zip": nested(2), "big.zip": nested(8), "x.md": b"x"})
    listed = {
        f.rel_path: f.refusal
        for f in LocalSource(tmp_path / "d", SourceSettings(archive_max_members=8)).list()
    }
    # 3 outer + 8 in big.zip is over the budget of 8: big.zip alone is refused, by name.
    assert set(listed) == {"a.zip/big.zip", "a.zip/small.zip/n0.md", "a.zip/small.zip/n1.md",
                           "a.zip/x.md"}  # fmt: skip
    refusal = listed["a.zip/big.zip"]
    assert refusal and refusal[0] == "too_large" and "archive_max_members" in refusal[1]
    flat = {
        f.rel_path for f in LocalSource(tmp_path / "d", SourceSettings(archive_max_depth=0)).list()
    }
    assert flat == {"a.zip/big.zip", "a.zip/small.zip", "a.zip/x.md"}

    # Ratio: a member's own ratio times its containers'. Each level stays under 10:1,
    # the member read out of the outer file goes beyond it.
    stuffing = b"".join(os.urandom(64) + bytes(64) for _ in range(16_000))  # ~2:1
    payload = b"".join(os.urandom(12) + bytes(84) for _ in range(16_000))  # ~7:1
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr("stuffing.bin", stuffing)  # stored
        zf.writestr("payload.bin", payload, compress_type=zipfile.ZIP_DEFLATED)
    (tmp_path / "r").mkdir()
    _zip(tmp_path / "r" / "o.zip", {"i.zip": inner.getvalue()})
    with zipfile.ZipFile(tmp_path / "r" / "o.zip") as zf:
        outer_ratio = zf.getinfo("i.zip").file_size / zf.getinfo("i.zip").compress_size
    with zipfile.ZipFile(inner) as zf:
        own = zf.getinfo("payload.bin").file_size / zf.getinfo("payload.bin").compress_size
    assert outer_ratio < 10 and own < 10 < own * outer_ratio
    listed = {
        f.rel_path: f.refusal
        for f in LocalSource(tmp_path / "r", SourceSettings(archive_max_ratio=10)).list()
    }
    assert list(listed) == ["o.zip/i.zip"]
    assert listed["o.zip/i.zip"] and "payload.bin" in listed["o.zip/i.zip"][1]
    assert len(list(LocalSource(tmp_path / "r", SourceSettings(archive_max_ratio=50)).list())) == 2


@flow
def test_archives_index_and_second_run_is_unchanged(tmp_path: Path) -> None:
    """Legacy methods, GBK and Shift-JIS names, a nested ZIP, data descriptors (also left
    out of the directory's offsets) and a spanned set: every member indexed or failed by name, and the second run of the same
    folder finds all of it unchanged."""
    if archive.decoder() is None:
        pytest.skip("neither 7-Zip nor unzip here (scripts/system_deps.sh installs 7-Zip)")
    corpus = _corpus(tmp_path)
    settings = _settings(tmp_path / "db")
    report = refresh_flow(str(corpus), settings.model_dump_json())
    ledger = _ledger(tmp_path / "db")
    indexed = {p for p, r in ledger.items() if r["status"] == "indexed"}
    assert indexed == {
        "moby.zip/moby_implode.txt",
        "moby.zip/moby_shrink.txt",
        "gbk.zip/审计报告/年度检查.md",
        "sjis.zip/文書/会議メモ.md",
        "outer.zip/inner.zip/yaw/bearing.md",
        "outer.zip/top.md",
        "streamed.zip/log.md",
        "misplaced.zip/a.md",
        "misplaced.zip/b.md",
        "plain.md",
    }, ledger
    failed = {p: (r["error_category"], r["error_message"]) for p, r in ledger.items()
              if r["status"] != "indexed"}  # fmt: skip
    assert set(failed) == {"set.zip", "set.z01"} and report["failed"] == 2
    for category, message in failed.values():
        assert category == "unsupported" and "spanned/multi-volume archive" in message
        assert "zip -s 0" in message
    assert_nothing_lost(settings, str(corpus))
    store = Store(str(tmp_path / "db"))
    text = " ".join(
        r["text"] for r in store.read_columns(store.chunks.name(SUFFIX), ["text"]).to_pylist()
    )
    for phrase in (
        "Ahab standing by the helm",
        "审计系统自动巡检需求",
        "来週の会議",
        "yaw bearing",
    ):
        assert phrase in text, phrase

    again = refresh_flow(str(corpus), settings.model_dump_json())
    assert (again["new"], again["changed"], again["retried"], again["failed"]) == (0, 0, 0, 0)
    assert again["unchanged"] == len(ledger), again
    assert_nothing_lost(settings, str(corpus))


def test_no_decoder_fails_unsupported_and_the_next_run_goes_on(tmp_path: Path) -> None:
    """The nightly refresh that met moby.zip: without 7-Zip or unzip the members fail
    `unsupported` saying what to install; the second run through the CLI is all
    unchanged and exits 0 (it used to stop at once with `[corrupt] archive member ...`)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(LEGACY, corpus / "moby.zip")
    (corpus / "plain.md").write_text("# Plain\n\nStill indexed.\n")
    bare = tmp_path / "bin"  # a PATH with the interpreter and no archive tools
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{bare}"}
    exe = Path(sys.executable).parent / "corpusflow"
    db = tmp_path / "db"
    assert not any(shutil.which(n, path=env["PATH"]) for n, _ in DECODERS)

    def ingest() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), "ingest", str(corpus), "--db", str(db)],
            capture_output=True, text=True, env=env, timeout=600, check=False,
        )  # fmt: skip

    first = ingest()
    assert first.returncode == 0, first.stdout + first.stderr
    ledger = _ledger(db)
    assert ledger["plain.md"]["status"] == "indexed"
    for name in ("moby.zip/moby_implode.txt", "moby.zip/moby_shrink.txt"):
        assert ledger[name]["status"] == "failed"
        assert ledger[name]["error_category"] == "unsupported"
        assert "apt-get install 7zip" in ledger[name]["error_message"]
    second = ingest()
    assert second.returncode == 0, second.stdout + second.stderr
    assert _ledger(db) == ledger  # nothing re-read, nothing rewritten
    info = subprocess.run(
        [str(exe), "status", "--db", str(db), "--json"],
        capture_output=True, text=True, env=env, timeout=600, check=True,
    )  # fmt: skip
    assert json.loads(info.stdout)["documents"] == {"indexed": 1, "failed": 2}


def _directory_without_descriptors(path: Path, members: dict[str, bytes]) -> None:
    """A data-descriptor ZIP whose central directory was written as if the descriptors
    were not there (offsets short by 16 bytes per descriptor before them, no bit 3), as
    some Java writers did (Apache Tika's testZip_with_DataDescriptor.zip is one)."""
    _data_descriptor_zip(path, members)
    blob = bytearray(path.read_bytes())
    eocd = blob.rfind(b"PK\x05\x06")
    (cd_offset,) = struct.unpack("<L", blob[eocd + 16 : eocd + 20])
    at = cd_offset
    for n in range(len(members)):
        flags, offset = struct.unpack("<H", blob[at + 8 : at + 10])[0], blob[at + 42 : at + 46]
        struct.pack_into("<H", blob, at + 8, flags & ~0x08)
        struct.pack_into("<L", blob, at + 42, struct.unpack("<L", offset)[0] - 16 * n)
        name_len, extra_len, comment_len = struct.unpack("<3H", blob[at + 28 : at + 34])
        at += 46 + name_len + extra_len + comment_len
    struct.pack_into("<L", blob, eocd + 16, cd_offset - 16 * len(members))
    path.write_bytes(bytes(blob))


def test_members_found_where_the_directory_misplaces_them(tmp_path: Path) -> None:
    bodies = {f"en{i}.md": f"# Entry {i}\n\nbody {i}\n".encode() for i in range(4)}
    _directory_without_descriptors(tmp_path / "dd.zip", bodies)
    with zipfile.ZipFile(tmp_path / "dd.zip") as zf, pytest.raises(zipfile.BadZipFile):
        zf.read("en1.md")  # zipfile alone: "Bad magic number for file header"
    src = LocalSource(tmp_path, SourceSettings())
    files = list(src.list())
    assert [f.rel_path for f in files] == [f"dd.zip/{n}" for n in bodies]
    for f in files:
        with src.fetch(f) as path:
            assert Path(path).read_bytes() == bodies[f.rel_path.split("/")[-1]]


def test_a_name_written_twice_is_one_document(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "twice.zip", "w") as zf:
        zf.writestr("a.md", "# Old\n")
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr("a.md", "# New\n")
    src = LocalSource(tmp_path, SourceSettings())
    files = list(src.list())
    assert [f.rel_path for f in files] == ["twice.zip/a.md"]
    with src.fetch(files[0]) as path:
        assert Path(path).read_text() == "# New\n"


def test_odd_file_names_and_symlink_loops_do_not_stop_the_listing(tmp_path: Path) -> None:
    root = tmp_path / "src"
    root.mkdir()
    (root / "ok.md").write_text("# Ok\n")
    latin1 = os.path.join(os.fsencode(root), b"caf\xe9.md")  # not UTF-8: a Latin-1 name
    with open(latin1, "wb") as fh:
        fh.write(b"# Cafe\n")
    (root / "loop").symlink_to(root / "loop")  # resolves to itself
    src = LocalSource(root, SourceSettings(follow_symlinks=True))
    files = {f.rel_path: f for f in src.list()}
    assert set(files) == {"caf\\xe9.md", "ok.md"}
    odd = files["caf\\xe9.md"]
    assert len(odd.doc_id) == 32  # its identity can be hashed and stored
    with src.fetch(odd) as path:
        assert Path(path).read_bytes() == b"# Cafe\n"
    assert src.content_hash(odd) == hashlib.sha256(b"# Cafe\n").hexdigest()
