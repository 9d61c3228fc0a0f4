"""E-mail messages as folders of documents.

An ``.eml`` message (MIME, RFC 5322) or an Outlook ``.msg`` (read into a MIME message of
its headers and attached files, ``OutlookMessage``; its body document is the .msg file
itself) in a source is listed as its own document, the
message's headers and body (``mail.eml``), and each attachment as a child document
``mail.eml/<attachment name>`` with its own ledger row, doc id and chunks, parsed by its
own format (a PDF through the PDF path, a DOCX through docling, ...). A message attached
to a message (a ``message/rfc822`` part, or an ``.eml`` file attached) is a nested
folder: ``mail.eml/fwd.eml`` is its body, ``mail.eml/fwd.eml/report.pdf`` its
attachment. An attachment added to or removed from a message is a new or deleted
document on the next refresh.

The body document holds the message's headers and its body part only (the part
``EmailMessage.get_body`` picks, the one unstructured's e-mail partitioner reads), never
an attachment: nothing is indexed twice, and removing an attachment leaves the body's
bytes, so its document, unchanged. Attachments are the other leaf parts: a part with a
file name, or explicitly ``attachment``, or a document type (a PDF, an office file) even
without a name (an S/MIME- or PGP-encrypted body fails ``encrypted``, a ZIP attached fails
``unsupported`` saying to save it beside the message: containers of one kind nest only
in their own kind); skipped are the other renderings of the body (``text/*`` without a
name), pictures the HTML body shows (inline images with a Content-ID), unnamed inline
images, audio and video, and signatures (``application/pkcs7-signature``, PGP).

Names: RFC 2047 and RFC 2231 encoded names are decoded (any charset, e.g. GBK); raw
8-bit names are decoded as UTF-8, a charset the message declares, or the legacy
encoding they read best in; a name is
made one safe path segment (the last part of a path some clients send, control
characters replaced, shortened past
200 bytes with its extension kept; hidden names and editor droppings such as
``.hidden`` or ``~$x.docx`` are skipped, as in folders and ZIPs), gets the extension of its
content type when it has none, and a name used twice in one message is told apart in
part order: ``report.pdf``, ``report (2).pdf``. A part without a name is
``part-<n>.<ext>`` (``n``: its position among the message's leaf parts); a nested
message without one is named after its subject.

Change hint: each document's decoded size and CRC-32, the way a ZIP member's is its
size and CRC-32. A message re-saved, moved, touched or given another attachment leaves
its other documents' hints, so they are neither hashed nor parsed again; a hint taken
from the message file (size, mtime, a part's offset) would send every document of a
message that changed at all to be hashed again. Listing a message means reading it whole
(~35 MB/s of parsing here, where a ZIP's directory is read in a few kilobytes), so a
message's listing is remembered by its stat (path, size, mtime, ctime, inode) in the
listing cache (``source.listing_cache``, an SQLite file; only where
``source.hash_shortcut`` trusts size and mtime): a nightly refresh stats an unchanged
message and reads nothing of it.

Nothing in a message stops a run: a message that cannot be read, or is over the bomb
guards (``source.message_max_attachments``, ``source.message_max_decoded_mb``, counted
over nested messages too; ``source.message_max_depth``), is listed as itself and fails
with the reason and the setting to raise; a part whose Base64 is damaged fails alone as
``corrupt``.

Attachments carry metadata naming their message (``attached_to``: path, subject, from,
date, message id), which is part of their hash as a sidecar's is; the body's own
metadata (subject, from, to, date) comes from its parser.
"""

from __future__ import annotations

import codecs
import contextlib
import email
import email.errors
import email.policy
import email.utils
import functools
import io
import logging
import mimetypes
import os
import re
import unicodedata
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage, Message
from pathlib import Path, PurePosixPath
from typing import IO, Any, cast

from common.encodings import OLE_MAGIC, as_8bit, guess_encoding
from common.errors import Category, DocumentError, is_storage_full
from common.settings import SourceSettings
from common.zipguard import ARCHIVE_EXTENSIONS
from sources.members import (
    CHAIN_SEP,
    Listing,
    ListingCache,
    Member,
    listing_cache,
    listing_cache_path,
    short_name,
)

log = logging.getLogger(__name__)

MESSAGE_EXTENSIONS = (".eml", ".msg")
# MS-OXCMSG PidTagAttachMethod, and its value for an Outlook item attached as an item.
_PID_ATTACH_METHOD = 0x3705
_ATTACH_EMBEDDED_MESSAGE = 5
_OUTLOOK_ITEM = "application/x-outlook-item"
# The key's last segment that names a message's body document.
BODY = "body"
# unstructured's e-mail partitioner reads the body HTML first, then plain text.
_BODY_PREFERENCE = ("html", "plain")
_SIGNATURES = frozenset(
    {
        "application/pkcs7-signature",
        "application/x-pkcs7-signature",
        "application/pgp-signature",
        "application/pgp-encrypted",
    }
)
_SMIME = frozenset({"application/pkcs7-mime", "application/x-pkcs7-mime"})
_PGP_ARMOR = b"-----BEGIN PGP MESSAGE-----"
_ENCODED_WORD = re.compile(r"=\?([^?*]+)(?:\*[^?]*)?\?[bqBQ]\?")
_RAW_NAME = re.compile(r'(?:file)?name\s*=\s*"?([^";\r\n]+)', re.IGNORECASE)
_MIB = 1024 * 1024


def is_message(name: str) -> bool:
    return name.lower().endswith(MESSAGE_EXTENSIONS)


def _crc(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def _parse(data: bytes) -> EmailMessage:
    """The message in ``data``: MIME (one saved as UTF-16/32 is read as the text it
    holds), or an Outlook .msg (an OLE2 compound file) read as ``OutlookMessage``."""
    if data.startswith(OLE_MAGIC):
        return _outlook(data)
    return cast(EmailMessage, email.message_from_bytes(as_8bit(data), policy=email.policy.default))


class OutlookMessage(EmailMessage):
    """An Outlook .msg as a MIME message: the headers an attachment's ``attached_to``
    names (subject, from, date, message id; the body's parser reads the rest) and one ``attachment`` part per attached file, so listing, naming and
    the bomb guards are the .eml code's. Its body document is the .msg file itself
    (``original``), read by the msg parser, which leaves attachments out; a change to
    an attachment therefore re-reads the body too (a saved .msg rarely changes)."""

    original: bytes = b""


def _outlook(data: bytes) -> EmailMessage:
    from oxmsg import Message as OutlookFile

    source = OutlookFile.load(data)
    msg = OutlookMessage(policy=email.policy.default)
    msg.original = data
    headers = {
        "Subject": source.subject or "",
        "From": source.sender or "",
        "Date": email.utils.format_datetime(source.sent_date) if source.sent_date else "",
        "Message-ID": next(
            (v for k, v in source.message_headers.items() if k.lower() == "message-id"), ""
        ),
    }
    for name, value in headers.items():
        with contextlib.suppress(Exception):  # a malformed header is left out, not the message
            if value:
                msg[name] = value
    for index, attached in enumerate(source.attachments):
        ctype = (attached.mime_type or "application/octet-stream").lower()
        maintype, _, subtype = ctype.partition("/")
        name = attached.file_name or ""
        content = attached.file_bytes
        if content is None:
            method = attached.properties.int_prop_value(_PID_ATTACH_METHOD)
            if method != _ATTACH_EMBEDDED_MESSAGE:
                continue  # a link to a file elsewhere (by reference): nothing to read here
            # An Outlook item attached as an item: its text is in no file of its own.
            content, maintype, subtype = b"", *_OUTLOOK_ITEM.split("/")
            name = name or f"item-{index + 1}"
        msg.add_attachment(
            content,
            maintype=maintype or "application",
            subtype=subtype or "octet-stream",
            filename=name or None,
        )
    return msg


@functools.lru_cache(maxsize=4)
def _load_stat(location: str, size: int, mtime_ns: int) -> EmailMessage:
    return _parse(Path(location).read_bytes())


def _load(location: str) -> EmailMessage:
    """The parsed message at ``location``: the few last parsed are kept, because a
    message's documents are hashed, given metadata and extracted one by one."""
    st = os.stat(location)
    return _load_stat(location, st.st_size, st.st_mtime_ns)


def _leaves(msg: Message) -> list[EmailMessage]:
    """The message's leaf parts in order; a ``message/rfc822`` part is a leaf."""
    out: list[EmailMessage] = []

    def walk(part: Message) -> None:
        if part.get_content_maintype() == "multipart":
            payload = part.get_payload()
            for sub in payload if isinstance(payload, list) else ():
                if isinstance(sub, Message):
                    walk(sub)
        else:
            out.append(cast(EmailMessage, part))

    walk(msg)
    return out


def _body(msg: EmailMessage) -> EmailMessage | None:
    return cast("EmailMessage | None", msg.get_body(_BODY_PREFERENCE))


def body_only(msg: EmailMessage) -> bytes:
    """The message's headers with only its body part: the body document's bytes. The
    body part is written as it came (its own Content-* headers, its payload in its own
    transfer encoding, 8-bit bytes kept)."""
    if isinstance(msg, OutlookMessage):
        return msg.original
    body = _body(msg)
    if body is msg:
        return msg.as_bytes()
    head = EmailMessage(policy=msg.policy)
    for name, value in msg.raw_items():
        if not name.lower().startswith("content-"):
            head.set_raw(name, value)
    headers = head.as_bytes().rstrip(b"\r\n") + b"\n"
    if body is None:
        return headers + b"\n"
    return headers + body.as_bytes()


def _role(part: EmailMessage, body: EmailMessage | None, hints: tuple[str, ...]) -> str | None:
    """The part's role: "message" (a nested folder), "attachment", or None for a part
    that is no document of its own."""
    if part is body:
        return None
    ctype = part.get_content_type()
    if ctype in _SIGNATURES:
        return None
    if ctype == _OUTLOOK_ITEM:
        return "outlook-item"
    if ctype in _SMIME and part.get_param("smime-type") != "signed-data":
        return "encrypted"
    if (
        ctype == "application/octet-stream"
        and _PGP_ARMOR in (cast(bytes, part.get_payload(decode=True) or b"")[:256])
    ):
        return "encrypted"  # PGP/MIME: the encrypted body beside its pgp-encrypted part
    name = _filename(part, hints)
    if ctype == "message/rfc822" or (name and is_message(name)):
        return "message"
    maintype = part.get_content_maintype()
    disposition = part.get_content_disposition()
    if name:
        if disposition != "attachment" and maintype == "image" and part["content-id"]:
            return None  # a picture the HTML body shows
        return "attachment"
    if disposition == "attachment" and maintype != "message":
        return "attachment"
    if maintype in ("text", "image", "audio", "video", "message"):
        return None  # other renderings of the body, pictures, delivery reports
    return None if ctype == "application/octet-stream" else "attachment"


def _charsets(msg: EmailMessage) -> tuple[str, ...]:
    """The charsets a message declares (its parts', its headers' encoded words): what a
    raw 8-bit name in it was most likely written in."""
    found: list[str] = []
    for _, value in msg.raw_items():
        found.extend(m.lower() for m in _ENCODED_WORD.findall(value))
    for part in _leaves(msg):
        found.append(part.get_content_charset() or "")
    out = []
    for charset in found:
        with contextlib.suppress(LookupError):
            if charset and codecs.lookup(charset).name not in ("ascii", "utf-8"):
                out.append(charset)
    return tuple(dict.fromkeys(out))


def _decode_raw(raw: bytes, hints: tuple[str, ...]) -> str:
    for charset in ("utf-8", *hints):
        with contextlib.suppress(UnicodeDecodeError, LookupError):
            return raw.decode(charset)
    return raw.decode(guess_encoding([raw]), errors="replace")


def _filename(part: EmailMessage, hints: tuple[str, ...] = ()) -> str:
    """The part's file name, RFC 2047/2231 decoded; raw 8-bit names decoded as UTF-8, a
    charset the message declares (``hints``), or the legacy encoding they read best in."""
    try:
        name = part.get_filename() or ""
    except Exception:  # a malformed parameter: read it from the raw header below
        name = "\ufffd"
    if "\ufffd" not in name and not _has_surrogates(name):
        return name
    for header, value in part.raw_items():
        if header.lower() not in ("content-disposition", "content-type"):
            continue
        found = _RAW_NAME.search(value)
        if found:
            return _decode_raw(found.group(1).strip().encode("ascii", "surrogateescape"), hints)
    return name


def _has_surrogates(text: str) -> bool:
    return any("\udc80" <= c <= "\udcff" for c in text)


def _segment(name: str) -> str:
    """``name`` as one safe path segment (maybe empty): the last part of a path some
    clients send (``C:\\Users\\ann\\report.pdf``, ``../x``), control characters as ``_``."""
    name = re.split(r"[/\\]", unicodedata.normalize("NFC", name))[-1]
    name = "".join("_" if unicodedata.category(c) in ("Cc", "Cs") else c for c in name)
    return short_name(" ".join(name.split()))


def _name(part: EmailMessage, index: int, role: str, hints: tuple[str, ...]) -> str:
    ctype = part.get_content_type()
    name = _segment(_filename(part, hints))
    if role == "message":
        if not name:
            inner = part.get_payload(0) if ctype == "message/rfc822" else None
            subject = str(inner.get("subject", "") or "") if isinstance(inner, Message) else ""
            name = _segment(subject) or f"message-{index + 1}"
        return name if is_message(name) else short_name(name + ".eml")
    extension = mimetypes.guess_extension(ctype) if ctype != "application/octet-stream" else None
    if not name:
        return f"part-{index + 1}{extension or '.bin'}"
    if not PurePosixPath(name).suffix and extension:
        name = short_name(name + extension)
    return name


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        taken.add(name)
        return name
    pure = PurePosixPath(name)
    stem = name[: len(name) - len(pure.suffix)] if pure.suffix else name
    n = 2
    while f"{stem} ({n}){pure.suffix}" in taken:
        n += 1
    out = f"{stem} ({n}){pure.suffix}"
    taken.add(out)
    return out


def _bytes(part: EmailMessage, shown: str) -> bytes:
    """A part's decoded bytes (a nested message's as a message file); a damaged part is
    a DocumentError."""
    if part.get_content_type() == "message/rfc822":
        try:
            inner = part.get_payload(0)
            return cast(Message, inner).as_bytes()
        except Exception as exc:
            raise DocumentError(
                Category.CORRUPT, f"attached message {shown} cannot be read: {exc}"
            ) from exc
    data = part.get_payload(decode=True)
    if any(isinstance(d, email.errors.InvalidBase64LengthDefect) for d in part.defects):
        raise DocumentError(
            Category.CORRUPT,
            f"attachment {shown}: its Base64 data is truncated or damaged (the message was "
            "cut off or mangled in transit); ask for the attachment again",
        )
    return data if isinstance(data, bytes) else b""


@dataclass(slots=True)
class _Budget:
    attachments: int
    bytes: float
    depth: int


# Bumped whenever what a message lists changes, so remembered listings are not reused.
LISTING_VERSION = 3  # 2: messages saved as UTF-16/32 are read as text; 3: .msg, PGP


def list_message(path: Path, settings: SourceSettings) -> Listing:
    """The message's body and attachments (nested messages expanded); never raises. An
    unchanged message's listing comes from the listing cache (``source.listing_cache``)
    where ``source.hash_shortcut`` trusts the change hint."""
    at = listing_cache_path(settings.listing_cache) if settings.hash_shortcut else None
    key = None
    if at is not None:
        limits = (
            LISTING_VERSION,
            settings.max_file_size_mb,
            settings.message_max_attachments,
            settings.message_max_decoded_mb,
            settings.message_max_depth,
        )
        key = ListingCache.key(path, limits)
    if at is not None and key is not None:
        cached = listing_cache(str(at)).get(key)
        if cached is not None:
            return cached
    listing, settled = _list_message(path, settings)
    if at is not None and key is not None and settled:
        listing_cache(str(at)).put(key, listing)
    return listing


def _list_message(path: Path, settings: SourceSettings) -> tuple[Listing, bool]:
    """The listing, and whether it is settled (not an error that may pass)."""
    try:
        size = path.stat().st_size
        if size > settings.max_file_size_mb * _MIB:
            message = (
                f"message of {size / _MIB:.1f} MiB exceeds source.max_file_size_mb="
                f"{settings.max_file_size_mb:g}; raise it to index the message"
            )
            return Listing(refusal=(Category.TOO_LARGE.value, message)), True
        budget = _Budget(
            settings.message_max_attachments,
            settings.message_max_decoded_mb * _MIB,
            settings.message_max_depth,
        )
        members: list[Member] = []
        _expand(_load(str(path)), (), "", 0, budget, members)
    except DocumentError as exc:
        return Listing(refusal=(exc.category.value, exc.message)), True
    except OSError as exc:
        if is_storage_full(exc):
            raise
        message = f"e-mail message cannot be read: {exc}"
        return Listing(refusal=(Category.CORRUPT.value, message)), False
    except Exception as exc:  # one message never stops a listing
        if is_storage_full(exc):
            raise
        message = f"e-mail message cannot be read: {exc}"
        return Listing(refusal=(Category.CORRUPT.value, message)), True
    return Listing(members), True


def _expand(
    msg: EmailMessage,
    chain: tuple[str, ...],
    prefix: str,
    depth: int,
    budget: _Budget,
    out: list[Member],
) -> None:
    """List ``msg``'s body and attachments into ``out`` under ``prefix``."""
    body = body_only(msg)
    out.append(Member(prefix.rstrip("/"), CHAIN_SEP.join((*chain, BODY)), len(body), _crc(body)))
    taken: set[str] = set()
    body_part, hints = _body(msg), _charsets(msg)
    for index, part in enumerate(_leaves(msg)):
        role = _role(part, body_part, hints)
        if role is None:
            continue
        path = prefix + _unique(_name(part, index, role, hints), taken)
        budget.attachments -= 1
        if budget.attachments < 0:
            raise DocumentError(
                Category.TOO_LARGE,
                "message has more attachments than source.message_max_attachments "
                "(counted with the messages attached to it); raise it to expand the message",
            )
        try:
            data = _bytes(part, path)
        except DocumentError as exc:
            key = CHAIN_SEP.join((*chain, f"{index}:"))
            out.append(Member(path, key, 0, "damaged", (exc.category.value, exc.message)))
            continue
        budget.bytes -= len(data)
        if budget.bytes < 0:
            raise DocumentError(
                Category.TOO_LARGE,
                "message's attachments decode to more than source.message_max_decoded_mb "
                "(counted with the messages attached to it); raise it to expand the message",
            )
        segment = f"{index}:{_crc(data)}"
        key = CHAIN_SEP.join((*chain, segment))
        if role != "message":
            out.append(Member(path, key, len(data), _crc(data), _refusal(role, path)))
        elif depth + 1 > budget.depth:
            out.append(
                Member(
                    path,
                    key,
                    len(data),
                    _crc(data),
                    (
                        Category.TOO_LARGE.value,
                        f"message attached deeper than source.message_max_depth="
                        f"{budget.depth}; raise it to expand this one",
                    ),
                )
            )
        else:
            _expand(_parse(data), (*chain, segment), path + "/", depth + 1, budget, out)


def _refusal(role: str, path: str) -> tuple[str, str] | None:
    """Why an attachment fails without being parsed, if it does."""
    if role == "encrypted":
        return (
            Category.ENCRYPTED.value,
            f"{path} is an encrypted message body (S/MIME or PGP): decrypt the message with "
            "its recipient's key and ingest the decrypted message, or exclude it "
            "(source.exclude)",
        )
    if role == "outlook-item":
        return (
            Category.UNSUPPORTED.value,
            f"{path} is an Outlook item attached as an item, not as a file: open the message "
            "in Outlook, save the item as a .msg file and ingest that",
        )
    if path.lower().endswith(ARCHIVE_EXTENSIONS):
        return (
            Category.UNSUPPORTED.value,
            f"{path} is a ZIP archive attached to a message, which is not expanded: save it "
            "beside the message to index its members",
        )
    return None


def _resolve(location: str, key: str) -> tuple[list[EmailMessage], bytes]:
    """The messages from the outermost to the one holding the member, and its bytes."""
    messages = [_load(location)]
    segments = key.split(CHAIN_SEP)
    for at, segment in enumerate(segments):
        msg = messages[-1]
        if segment == BODY:
            return messages, body_only(msg)
        index, _, crc = segment.partition(":")
        leaves = _leaves(msg)
        if not index.isdigit() or int(index) >= len(leaves):
            raise DocumentError(Category.SOURCE_CHANGED, "attachment is no longer in the message")
        part = leaves[int(index)]
        data = _bytes(part, f"part {int(index) + 1}")
        if _crc(data) != crc:
            raise DocumentError(Category.SOURCE_CHANGED, "the message changed after it was listed")
        if at == len(segments) - 1:
            return messages, data
        messages.append(_parse(data))
    raise DocumentError(Category.SOURCE_CHANGED, "attachment is no longer in the message")


@contextlib.contextmanager
def open_member(location: str, key: str) -> Iterator[IO[bytes]]:
    """A document's bytes from the message at ``location``; every failure is a
    DocumentError with its category."""
    _, data = _resolved(location, key)
    yield io.BytesIO(data)


def _resolved(location: str, key: str) -> tuple[list[EmailMessage], bytes]:
    """``_resolve`` with every failure a DocumentError with its category."""
    try:
        return _resolve(location, key)
    except DocumentError:
        raise
    except FileNotFoundError as exc:
        raise DocumentError(Category.SOURCE_CHANGED, f"message vanished: {exc}") from exc
    except Exception as exc:
        if is_storage_full(exc):
            raise
        raise DocumentError(Category.CORRUPT, f"e-mail attachment cannot be read: {exc}") from exc


def _headers(msg: EmailMessage) -> dict[str, Any]:
    def text(name: str) -> str:
        try:
            return str(msg.get(name, "") or "")
        except Exception:  # a malformed header is left out, not the document
            return ""

    return {
        "subject": text("subject"),
        "from": text("from"),
        "date": text("date"),
        "message_id": text("message-id"),
    }


def member_metadata(location: str, key: str, rel_path: str) -> dict[str, Any]:
    """``attached_to``: the message holding the document (none for a message's own body)."""
    if key == BODY:
        return {}
    messages, _ = _resolved(location, key)
    holder = messages[-2] if key.endswith(CHAIN_SEP + BODY) else messages[-1]
    parent = PurePosixPath(rel_path).parent.as_posix()
    return {"attached_to": {"path": parent, **_headers(holder)}}


class MailContainer:
    """E-mail messages behind the container interface (``sources.members.Container``):
    the message's body is a document (path "") and so is each attachment."""

    label = "mail-crc32"
    claims = staticmethod(is_message)
    list = staticmethod(list_message)
    open_member = staticmethod(open_member)
    member_metadata = staticmethod(member_metadata)

    def enabled(self, settings: SourceSettings) -> bool:
        return settings.expand_messages
