"""E-mail messages as folders of documents: the body and each attachment its own document
(``mail.eml/report.pdf``), parsed by the attachment's own format; nested messages as
nested folders; names decoded; attachments added or removed propagated; bomb guards."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from common.errors import Category, DocumentError
from common.settings import EmbedSettings, Settings, SourceSettings, load_settings
from corpusflow.api import search
from embedding import resolve_model
from flows.refresh import refresh_flow
from sources import LocalSource, SourceFile
from storage import Store
from tests.helpers.invariants import assert_nothing_lost
from tests.helpers.pdfdraw import Page, make_pdf

flow = pytest.mark.usefixtures("prefect_server")
SUFFIX = resolve_model(EmbedSettings(model="minilm")).table_suffix  # conftest's pin

PDF_TEXT = "The yaw drive torque limit is 4200 newton metres at the Aalborg site."
BODY_TEXT = "Hi Bob, please find the quarterly files attached. Regards, Ann."


def _settings(db: Path) -> Settings:
    source = {"listing_cache": str(db.parent / "listings.sqlite")}
    return load_settings(
        None, {"storage": {"db": str(db)}, "run": {"progress": False}, "source": source}
    )


def _ledger(db: Path) -> dict[str, dict[str, Any]]:
    store = Store(str(db))
    return {r.path: r.to_row() for r in store.ledger.all(SUFFIX).values()}


def _chunks(db: Path) -> list[dict[str, Any]]:
    store = Store(str(db))
    return store.read_columns(store.chunks.name(SUFFIX), ["path", "text"]).to_pylist()


def _pdf(path: Path) -> bytes:
    def page(p: Page) -> None:
        p.text("Yaw drive maintenance", 72, 72, font="Helvetica-Bold", size=16)
        p.text(PDF_TEXT, 72, 110)

    return make_pdf(path, page).read_bytes()


def _message(
    subject: str,
    attachments: list[tuple[str, bytes, str]],
    body: str = BODY_TEXT,
    forwarded: list[EmailMessage] | None = None,
) -> EmailMessage:
    """A message as a mail client writes one: plain and HTML body, then attachments
    (name, bytes, content type), then forwarded messages (message/rfc822)."""
    msg = EmailMessage()
    msg["From"] = "Ann Berg <ann@example.com>"
    msg["To"] = "Bob Lund <bob@example.com>"
    msg["Subject"] = subject
    msg["Date"] = format_datetime(datetime(2026, 3, 2, 9, 30, tzinfo=UTC))
    msg["Message-ID"] = f"<{subject.replace(' ', '.')}@example.com>"
    msg.set_content(body)
    msg.add_alternative(f"<html><body><p>{body}</p></body></html>", subtype="html")
    for name, data, ctype in attachments:
        maintype, subtype = ctype.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    for inner in forwarded or []:
        msg.add_attachment(inner)
    return msg


def _listing(root: Path, **settings: Any) -> dict[str, SourceFile]:
    settings.setdefault("listing_cache", "off")
    return {f.rel_path: f for f in LocalSource(root, SourceSettings(**settings)).list()}


@flow
def test_message_and_attachments_are_documents(tmp_path: Path, samples_dir: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pdf = _pdf(tmp_path / "draw.pdf")
    docx = (samples_dir / "travel_policy.docx").read_bytes()
    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    subject = "Q3 files"
    with_pdf = [("yaw report.pdf", pdf, "application/pdf"), ("policy.docx", docx, docx_type)]
    (corpus / "mail.eml").write_bytes(_message(subject, with_pdf).as_bytes())
    settings = _settings(tmp_path / "db")

    report = refresh_flow(str(corpus), settings.model_dump_json())
    assert (report["new"], report["failed"]) == (3, 0), report
    ledger = _ledger(tmp_path / "db")
    assert set(ledger) == {"mail.eml", "mail.eml/yaw report.pdf", "mail.eml/policy.docx"}
    assert all(r["status"] == "indexed" and r["chunk_count"] > 0 for r in ledger.values())
    assert ledger["mail.eml/yaw report.pdf"]["format"] == "pdf"
    assert ledger["mail.eml/policy.docx"]["format"] == "docx"
    # The body's metadata is the message's headers; an attachment's names its message.
    body_meta = json.loads(ledger["mail.eml"]["metadata_json"])
    assert body_meta["email"]["subject"] == subject
    assert body_meta["email"]["from"] == ["Ann Berg <ann@example.com>"]
    assert body_meta["email"]["date"].startswith("Mon, 02 Mar 2026")
    pdf_meta = json.loads(ledger["mail.eml/yaw report.pdf"]["metadata_json"])
    assert pdf_meta["attached_to"]["path"] == "mail.eml"
    assert pdf_meta["attached_to"]["subject"] == subject
    assert pdf_meta["attached_to"]["from"] == "Ann Berg <ann@example.com>"
    assert_nothing_lost(settings, str(corpus))

    hits = search("yaw drive torque limit", settings, k=3)
    assert hits[0]["path"] == "mail.eml/yaw report.pdf", [h["path"] for h in hits]
    assert "4200 newton metres" in hits[0]["text"]
    # No double indexing: the attachments' text is in their documents, not the body's.
    chunks = _chunks(tmp_path / "db")
    body = " ".join(c["text"] for c in chunks if c["path"] == "mail.eml")
    assert "quarterly files attached" in body
    assert "4200" not in body and "newton" not in body
    assert "4200 newton metres" in " ".join(
        c["text"] for c in chunks if c["path"] == "mail.eml/yaw report.pdf"
    )

    # Nothing changed: nothing is parsed again.
    again = refresh_flow(str(corpus), settings.model_dump_json())
    assert (again["unchanged"], again["new"], again["changed"], again["deleted"]) == (3, 0, 0, 0)

    # The PDF removed from the message (the client saves it again): that document goes,
    # the body and the other attachment are unchanged.
    (corpus / "mail.eml").write_bytes(_message(subject, with_pdf[1:]).as_bytes())
    third = refresh_flow(str(corpus), settings.model_dump_json())
    assert (third["deleted"], third["unchanged"], third["changed"], third["new"]) == (1, 2, 0, 0)
    live = assert_nothing_lost(settings, str(corpus))
    assert set(live) == {"mail.eml", "mail.eml/policy.docx"}
    assert not any("4200" in c["text"] for c in _chunks(tmp_path / "db"))

    # Added back: a new document again.
    (corpus / "mail.eml").write_bytes(_message(subject, with_pdf).as_bytes())
    fourth = refresh_flow(str(corpus), settings.model_dump_json())
    assert (fourth["new"], fourth["unchanged"]) == (1, 2), fourth


@flow
def test_nested_messages_are_nested_folders(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    minutes = b"Minutes: the crane inspection moved to Thursday.\n"
    forwarded = _message(
        "Crane inspection",
        [("minutes.txt", minutes, "text/plain")],
        body="The crane inspection is on Tuesday.",
    )
    old = _message("Old thread", [], body="An older thread about the harbour lights.")
    outer = _message(
        "Fwd: inspections",
        [("old.eml", old.as_bytes(), "application/octet-stream")],
        body="Forwarding the inspection mails.",
        forwarded=[forwarded],
    )
    (corpus / "mail.eml").write_bytes(outer.as_bytes())
    listed = _listing(corpus)
    assert set(listed) == {
        "mail.eml",
        "mail.eml/old.eml",
        "mail.eml/Crane inspection.eml",
        "mail.eml/Crane inspection.eml/minutes.txt",
    }
    settings = _settings(tmp_path / "db")
    report = refresh_flow(str(corpus), settings.model_dump_json())
    assert (report["new"], report["failed"]) == (4, 0), report
    ledger = _ledger(tmp_path / "db")
    meta = json.loads(ledger["mail.eml/Crane inspection.eml/minutes.txt"]["metadata_json"])
    assert meta["attached_to"]["path"] == "mail.eml/Crane inspection.eml"
    assert meta["attached_to"]["subject"] == "Crane inspection"
    nested = json.loads(ledger["mail.eml/Crane inspection.eml"]["metadata_json"])
    assert nested["email"]["subject"] == "Crane inspection"
    assert nested["attached_to"]["subject"] == "Fwd: inspections"
    by_path: dict[str, str] = {}
    for c in _chunks(tmp_path / "db"):
        by_path[c["path"]] = by_path.get(c["path"], "") + c["text"]
    assert "Tuesday" in by_path["mail.eml/Crane inspection.eml"]
    assert "Thursday" not in by_path["mail.eml/Crane inspection.eml"]
    assert "Thursday" in by_path["mail.eml/Crane inspection.eml/minutes.txt"]
    assert "harbour lights" in by_path["mail.eml/old.eml"]
    assert "Tuesday" not in by_path["mail.eml"] and "harbour" not in by_path["mail.eml"]
    assert_nothing_lost(settings, str(corpus))
    again = refresh_flow(str(corpus), settings.model_dump_json())
    assert (again["unchanged"], again["new"], again["changed"]) == (4, 0, 0)


def _raw_message(parts: list[bytes]) -> bytes:
    subject = base64.b64encode("季度报告".encode("gbk"))
    head = (
        b"From: =?utf-8?b?5byg5LiJ?= <zhang@example.cn>\r\nTo: li@example.cn\r\n"
        b"Subject: =?gbk?b?" + subject + b"?=\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="BOUNDARY"\r\n\r\n'
        b"--BOUNDARY\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nbody\r\n"
    )
    body = b"".join(b"--BOUNDARY\r\n" + p + b"\r\n" for p in parts)
    return head + body + b"--BOUNDARY--\r\n"


def _part(disposition: bytes, data: bytes, ctype: bytes = b"text/plain") -> bytes:
    return (
        b"Content-Type: " + ctype + b"\r\nContent-Transfer-Encoding: base64\r\n"
        b"Content-Disposition: " + disposition + b"\r\n\r\n" + base64.encodebytes(data)
    )


def test_chinese_attachment_names_are_decoded(tmp_path: Path) -> None:
    """GBK and UTF-8 names as Chinese mail clients write them: RFC 2047 inside the quoted
    parameter (Outlook, Foxmail), RFC 2231, and raw 8-bit bytes with no declaration."""

    def enc2047(name: str, charset: str) -> bytes:
        b64 = base64.b64encode(name.encode(charset)).decode()
        return f'attachment; filename="=?{charset}?B?{b64}?="'.encode()

    def enc2231(name: str, charset: str) -> bytes:
        quoted = "".join(f"%{b:02X}" for b in name.encode(charset))
        return f"attachment; filename*={charset}''{quoted}".encode()

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    parts = [
        _part(enc2047("季度报告.txt", "gbk"), "一季度".encode()),
        _part(enc2047("会议纪要.txt", "utf-8"), "二季度".encode()),
        _part(enc2231("风机检修.txt", "gbk"), "三季度".encode()),
        _part(b'attachment; filename="' + "叶片检查.txt".encode("gbk") + b'"', "四".encode()),
        _part(b'attachment; filename="' + "塔筒记录.txt".encode() + b'"', "五".encode()),
    ]
    (corpus / "mail.eml").write_bytes(_raw_message(parts))
    listed = _listing(corpus)
    assert set(listed) == {
        "mail.eml",
        "mail.eml/季度报告.txt",
        "mail.eml/会议纪要.txt",
        "mail.eml/风机检修.txt",
        "mail.eml/叶片检查.txt",
        "mail.eml/塔筒记录.txt",
    }
    source = LocalSource(corpus, SourceSettings())
    with source.fetch(listed["mail.eml/季度报告.txt"]) as local:
        assert Path(local).name == "季度报告.txt"
        assert Path(local).read_bytes() == "一季度".encode()
    meta = source.metadata(listed["mail.eml/风机检修.txt"])
    assert meta["attached_to"]["subject"] == "季度报告"  # the GBK subject, decoded


def test_which_parts_are_documents_and_their_names(tmp_path: Path) -> None:
    """Inline pictures, unnamed inline images and signatures are no documents; an unnamed
    PDF is; names are made safe path segments and told apart in part order."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pdf = b"%PDF-1.4\n%fake\n"
    msg = _message("Parts", [])
    html = msg.get_body(("html",))
    assert html is not None
    html.add_related(b"\x89PNG logo", maintype="image", subtype="png", cid="<logo@x>")
    msg.add_attachment(b"\x89PNG inline", maintype="image", subtype="png", disposition="inline")
    msg.add_attachment(pdf, maintype="application", subtype="pdf", disposition="inline")
    msg.add_attachment(
        b"sig", maintype="application", subtype="pkcs7-signature", filename="smime.p7s"
    )
    for name, data in (
        ("../../etc/passwd.txt", b"one"),
        ("C:\\Users\\ann\\tab\tle.txt", b"one and a half"),
        ("notes.txt", b"two"),
        ("notes.txt", b"three"),
        (".hidden.txt", b"four"),
    ):
        msg.add_attachment(data, maintype="text", subtype="plain", filename=name)
    msg.add_attachment(pdf, maintype="application", subtype="pdf", filename="scan")
    msg.add_attachment(b"PK\x05\x06" + bytes(18), "application", "zip", filename="files.zip")
    msg.add_attachment(
        b"0\x80",
        "application",
        "pkcs7-mime",
        filename="smime.p7m",
        params={"smime-type": "enveloped-data"},
    )
    (corpus / "mail.eml").write_bytes(msg.as_bytes())
    listed = _listing(corpus)
    assert sorted(listed) == sorted(
        [
            "mail.eml",
            "mail.eml/part-5.pdf",
            "mail.eml/passwd.txt",
            "mail.eml/tab_le.txt",
            "mail.eml/notes.txt",
            "mail.eml/notes (2).txt",
            "mail.eml/scan.pdf",
            "mail.eml/files.zip",
            "mail.eml/smime.p7m",
        ]
    )
    zipped, sealed = listed["mail.eml/files.zip"].refusal, listed["mail.eml/smime.p7m"].refusal
    assert zipped is not None and zipped[0] == Category.UNSUPPORTED.value
    assert "save it beside the message" in zipped[1]
    assert sealed is not None and sealed[0] == Category.ENCRYPTED.value
    source = LocalSource(corpus, SourceSettings())
    for path, data in (("mail.eml/notes.txt", b"two"), ("mail.eml/notes (2).txt", b"three")):
        with source.fetch(listed[path]) as local:
            assert Path(local).read_bytes() == data
    # The body document holds the headers and the body part only.
    with source.fetch(listed["mail.eml"]) as local:
        body = Path(local).read_bytes()
    assert b"quarterly files" in body and b"PNG" not in body and b"%PDF" not in body


@flow
def test_a_damaged_part_fails_alone(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    good = _part(b'attachment; filename="good.txt"', b"fine text")
    bad = (
        b"Content-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n"
        b'Content-Disposition: attachment; filename="cut.pdf"\r\n\r\nJVBERi0xLjQK1\r\n'
    )
    (corpus / "mail.eml").write_bytes(_raw_message([bad, good]))
    listed = _listing(corpus)
    assert set(listed) == {"mail.eml", "mail.eml/cut.pdf", "mail.eml/good.txt"}
    assert listed["mail.eml/good.txt"].refusal is None
    refusal = listed["mail.eml/cut.pdf"].refusal
    assert refusal is not None and refusal[0] == Category.CORRUPT.value
    assert "Base64" in refusal[1]
    source = LocalSource(corpus, SourceSettings())
    with pytest.raises(DocumentError) as err, source.fetch(listed["mail.eml/cut.pdf"]):
        pass
    assert err.value.category == Category.CORRUPT
    with source.fetch(listed["mail.eml/good.txt"]) as local:
        assert Path(local).read_bytes() == b"fine text"

    settings = _settings(tmp_path / "db")
    report = refresh_flow(str(corpus), settings.model_dump_json())
    assert report["failed"] == 1, report
    ledger = _ledger(tmp_path / "db")
    assert ledger["mail.eml/cut.pdf"]["status"] == "failed"
    assert ledger["mail.eml/cut.pdf"]["error_category"] == "corrupt"
    assert ledger["mail.eml/good.txt"]["status"] == "indexed"
    assert ledger["mail.eml"]["status"] == "indexed"
    again = refresh_flow(str(corpus), settings.model_dump_json())  # the failure stops nothing
    assert (again["unchanged"], again["failed"], again["new"]) == (3, 0, 0), again


def test_bomb_guards_and_depth(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    inner = _message("Inner", [("a.txt", b"alpha", "text/plain")])
    outer = _message(
        "Outer",
        [("b.txt", b"beta", "text/plain"), ("c.txt", b"gamma", "text/plain")],
        forwarded=[inner],
    )
    (corpus / "mail.eml").write_bytes(outer.as_bytes())
    assert len(_listing(corpus)) == 5  # body, b, c, Inner.eml, Inner.eml/a.txt

    many = _listing(corpus, message_max_attachments=3)
    assert list(many) == ["mail.eml"]  # listed, and failed, as itself
    refusal = many["mail.eml"].refusal
    assert refusal is not None and refusal[0] == Category.TOO_LARGE.value
    assert "source.message_max_attachments" in refusal[1]

    big = _listing(corpus, message_max_decoded_mb=0.0001)
    assert list(big) == ["mail.eml"]
    assert "source.message_max_decoded_mb" in (big["mail.eml"].refusal or ("", ""))[1]

    shallow = _listing(corpus, message_max_depth=0)
    assert set(shallow) == {"mail.eml", "mail.eml/b.txt", "mail.eml/c.txt", "mail.eml/Inner.eml"}
    nested = shallow["mail.eml/Inner.eml"].refusal
    assert nested is not None and "source.message_max_depth" in nested[1]

    off = _listing(corpus, expand_messages=False)
    assert list(off) == ["mail.eml"] and off["mail.eml"].member is None


def test_change_hint_follows_each_document(tmp_path: Path) -> None:
    """A document's hint is its own size and CRC-32: another attachment added in front of
    it, or the message saved again with new headers' folding, leaves it alone."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    a = ("a.txt", b"alpha", "text/plain")
    b = ("b.txt", b"beta", "text/plain")
    (corpus / "mail.eml").write_bytes(_message("Hints", [b]).as_bytes())
    before = _listing(corpus)
    (corpus / "mail.eml").write_bytes(_message("Hints", [a, b]).as_bytes())
    after = _listing(corpus)
    assert set(after) == {"mail.eml", "mail.eml/a.txt", "mail.eml/b.txt"}
    for path in ("mail.eml", "mail.eml/b.txt"):
        assert (after[path].size, after[path].etag) == (before[path].size, before[path].etag)
    # A key listed before the change no longer opens: the document is read again, by its
    # new key, on the next run instead of taking another part's bytes.
    source = LocalSource(corpus, SourceSettings())
    with pytest.raises(DocumentError) as err:
        source.content_hash(before["mail.eml/b.txt"])
    assert err.value.category == Category.SOURCE_CHANGED
    with source.fetch(after["mail.eml/b.txt"]) as local:
        assert Path(local).read_bytes() == b"beta"
    (corpus / "mail.eml").unlink()  # gone between listing and parsing: source_changed
    for read in (source.metadata, source.content_hash):
        with pytest.raises(DocumentError) as err:
            read(after["mail.eml/b.txt"])
        assert err.value.category == Category.SOURCE_CHANGED


def test_an_unchanged_message_is_not_read_to_be_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sources import mail

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    path = corpus / "mail.eml"
    path.write_bytes(_message("Cached", [("a.txt", b"alpha", "text/plain")]).as_bytes())
    cache = str(tmp_path / "listings.sqlite")
    first = _listing(corpus, listing_cache=cache)
    assert set(first) == {"mail.eml", "mail.eml/a.txt"}

    def unread(location: str) -> Any:
        raise AssertionError(f"{location} was read")

    monkeypatch.setattr(mail, "_load", unread)
    again = _listing(corpus, listing_cache=cache)
    assert [(f.rel_path, f.size, f.etag, f.member) for f in again.values()] == [
        (f.rel_path, f.size, f.etag, f.member) for f in first.values()
    ]
    monkeypatch.undo()
    # Changed: read again. Without the hash shortcut (size + mtime not trusted): always.
    attachments = [("a.txt", b"alpha", "text/plain"), ("b.txt", b"beta", "text/plain")]
    path.write_bytes(_message("Cached", attachments).as_bytes())
    assert set(_listing(corpus, listing_cache=cache)) == {
        "mail.eml",
        "mail.eml/a.txt",
        "mail.eml/b.txt",
    }
    monkeypatch.setattr(mail, "_load", unread)  # a listing never raises: it refuses
    unshortcut = _listing(corpus, listing_cache=cache, hash_shortcut=False)
    assert "was read" in (unshortcut["mail.eml"].refusal or ("", ""))[1]


def test_the_body_keeps_its_8bit_text_and_headers(tmp_path: Path) -> None:
    """A body in 8-bit GBK and raw UTF-8 headers (as Chinese clients send them) reach the
    body document byte for byte."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    text = "你好，附件是风机检修报告。"
    raw = (
        "Subject: 季度报告\nFrom: 张三 <zhang@example.cn>\n"
        "Content-Type: multipart/mixed; boundary=B\n\n--B\n"
        "Content-Type: text/plain; charset=gbk\nContent-Transfer-Encoding: 8bit\n\nTEXT\n--B\n"
        'Content-Type: text/plain; name="a.txt"\n\nattached\n--B--\n'
    ).encode()
    (corpus / "mail.eml").write_bytes(raw.replace(b"TEXT", text.encode("gbk")))
    listed = _listing(corpus)
    assert set(listed) == {"mail.eml", "mail.eml/a.txt"}
    with LocalSource(corpus, SourceSettings()).fetch(listed["mail.eml"]) as local:
        body = Path(local).read_bytes()
    assert text.encode("gbk") in body and "季度报告".encode() in body
    assert b"attached" not in body


def test_messages_saved_as_utf16_are_read_as_messages(tmp_path: Path) -> None:
    """A message saved as UTF-16 (with a byte-order mark, or without as some Windows tools
    write it) or with a UTF-8 BOM is a message with its headers, body and attachments:
    not one body of raw MIME text (unstructured's example-docs hold such files)."""
    from corpusflow.engine import RefreshEngine

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pdf = _pdf(tmp_path / "draw.pdf")
    raw = _message("Yaw files", [("yaw.pdf", pdf, "application/pdf")]).as_bytes()
    saved = {
        "le.eml": raw.decode("ascii").encode("utf-16-le"),
        "bom16.eml": raw.decode("ascii").encode("utf-16"),
        "be.eml": raw.decode("ascii").encode("utf-16-be"),
        "bom8.eml": b"\xef\xbb\xbf" + raw,
    }
    for name, data in saved.items():
        (corpus / name).write_bytes(data)
    listed = _listing(corpus)
    assert set(listed) == {p for n in saved for p in (n, f"{n}/yaw.pdf")}, sorted(listed)
    settings = _settings(tmp_path / "db")
    report = RefreshEngine(str(corpus), settings).refresh()
    assert (report.new, report.failed) == (8, 0), report.to_dict()
    ledger = _ledger(tmp_path / "db")
    chunks = _chunks(tmp_path / "db")
    for name in saved:
        assert json.loads(ledger[name]["metadata_json"])["email"]["subject"] == "Yaw files"
        body = " ".join(c["text"] for c in chunks if c["path"] == name)
        assert "quarterly files attached" in body, (name, body[:200])
        assert "MIME-Version" not in body and "Content-Type" not in body, (name, body[:200])
        assert "4200 newton metres" in " ".join(
            c["text"] for c in chunks if c["path"] == f"{name}/yaw.pdf"
        )


DATA = Path(__file__).parent.parent / "data" / "unstructured"


@flow
def test_outlook_messages_are_folders_too(tmp_path: Path) -> None:
    """An Outlook .msg lists its attached files as documents (``note.msg/file.txt``), its
    body being the .msg itself; a .msg attached to an .eml is a nested folder; a PGP
    body fails ``encrypted``, not ``unsupported``."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    outlook = (DATA / "fake-email-attachment.msg").read_bytes()
    (corpus / "note.msg").write_bytes(outlook)
    (corpus / "locked.msg").write_bytes((DATA / "fake-encrypted.msg").read_bytes())
    forwarded = _message("Fwd: note", [("note.msg", outlook, "application/vnd.ms-outlook")])
    (corpus / "fwd.eml").write_bytes(forwarded.as_bytes())
    listed = _listing(corpus)
    assert set(listed) == {
        "note.msg",
        "note.msg/fake-attachment.txt",
        "locked.msg",
        "locked.msg/ATT00002.bin",
        "fwd.eml",
        "fwd.eml/note.msg",
        "fwd.eml/note.msg/fake-attachment.txt",
    }
    refusal = listed["locked.msg/ATT00002.bin"].refusal
    assert refusal is not None and refusal[0] == Category.ENCRYPTED.value, refusal
    source = LocalSource(corpus, SourceSettings(listing_cache="off"))
    with source.fetch(listed["note.msg"]) as local:
        assert Path(local).read_bytes() == outlook  # the body document is the .msg itself

    settings = _settings(tmp_path / "db")
    report = refresh_flow(str(corpus), settings.model_dump_json())
    assert (report["new"], report["failed"]) == (7, 1), report
    ledger = _ledger(tmp_path / "db")
    for path in ("note.msg", "fwd.eml/note.msg"):
        assert ledger[path]["format"] == "msg" and ledger[path]["status"] == "indexed"
        attached = ledger[f"{path}/fake-attachment.txt"]
        assert attached["status"] == "indexed", attached
        meta = json.loads(attached["metadata_json"])["attached_to"]
        assert meta["path"] == path
        assert meta["subject"] == "Fake email with attachment"
        assert meta["from"] == "Mallori Harrell <mallori@unstructured.io>"
    assert ledger["locked.msg/ATT00002.bin"]["error_category"] == "encrypted"
    chunks = _chunks(tmp_path / "db")
    text = {c["path"]: c["text"] for c in chunks}
    assert "fake attachment" in text["note.msg/fake-attachment.txt"]
    assert "fake attachment" not in text["note.msg"]  # not indexed twice
    again = refresh_flow(str(corpus), settings.model_dump_json())
    assert (again["unchanged"], again["new"], again["changed"]) == (7, 0, 0), again
