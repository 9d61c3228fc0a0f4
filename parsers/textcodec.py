"""Decode text files in whatever encoding they were saved in.

Order: a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE); UTF-16/32 without
a mark, recognised by where the NUL bytes fall in ASCII-heavy text; strict
UTF-8; then charset-normalizer's best guess (legacy single-byte and CJK code
pages: cp1252, GB18030, Shift-JIS, ...). A file is ``corrupt`` only when no
reading gives text: mostly control characters after decoding.
"""

from __future__ import annotations

from common.encodings import SAMPLE, bom_encoding, bomless_wide
from parsers.errors import Category, ParseError

_SAMPLE = SAMPLE


def _looks_binary(text: str) -> bool:
    sample = text[:_SAMPLE]
    if not sample:
        return False
    control = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    return control / len(sample) > 0.05


def detect_encoding(raw: bytes) -> str:
    """The encoding ``raw`` is in (a codec name Python knows)."""
    wide = bom_encoding(raw) or bomless_wide(raw)
    if wide is not None:
        return wide
    try:
        raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    if _clean_western(raw[: _SAMPLE * 4]):
        return "cp1252"
    from charset_normalizer import from_bytes

    best = from_bytes(raw[: _SAMPLE * 4]).best()
    if best is not None and best.encoding:
        return str(best.encoding)
    return "cp1252"


# What Windows-1252 text from Western Europe holds beyond ASCII: accented letters of
# Latin-1 and typographic punctuation. Bytes of another code page read as cp1252 give
# symbols outside this set (cp1250 Polish "ł" reads as "³", Cyrillic as "Ïðè").
_WESTERN = set("àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜÝ")
_WESTERN |= set("“”‘’–—…€•«»°§£¥©®™·¼½¾×÷¡¿ªº±µ \u00a0œŒšŠžŽŸ")


def _clean_western(raw: bytes) -> bool:
    """Whether ``raw`` reads as cp1252 with only Western letters and punctuation beyond
    ASCII (the most common legacy encoding of office text; charset-normalizer is
    unreliable on short samples of it)."""
    try:
        text = raw.decode("cp1252")
    except UnicodeDecodeError:
        return False
    extra = [ch for ch in text if ord(ch) > 127]
    return bool(extra) and all(ch in _WESTERN for ch in extra)


def decode(raw: bytes, what: str = "file") -> tuple[str, str]:
    """(text, encoding) of a text file's bytes; a leading BOM is dropped.

    Raises ParseError(CORRUPT) when the bytes are not text in any encoding.
    """
    encoding = detect_encoding(raw)
    text = raw.decode(encoding, errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    if _looks_binary(text):
        raise ParseError(Category.CORRUPT, f"binary data in a {what}: not text in any encoding")
    return text, encoding
