"""Decode text files in whatever encoding they were saved in.

Order: a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32 LE/BE); UTF-16/32 without
a mark, recognised by where the NUL bytes fall in ASCII-heavy text; strict
UTF-8; then charset-normalizer's best guess (legacy single-byte and CJK code
pages: cp1252, GB18030, Shift-JIS, ...). A file is ``corrupt`` only when no
reading gives text: mostly control characters after decoding.
"""

from __future__ import annotations

import codecs

from parsers.errors import Category, ParseError

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_SAMPLE = 1 << 16


def _bomless_wide(raw: bytes) -> str | None:
    """UTF-16/32 without a BOM: in mostly-ASCII text every 2nd/4th byte is NUL."""
    sample = raw[: _SAMPLE - (_SAMPLE % 4)]
    if len(sample) < 4 or b"\x00" not in sample:
        return None
    n = len(sample)
    nul_at = [sum(1 for i in range(k, n, 4) if sample[i] == 0) / (n / 4) for k in range(4)]
    if min(nul_at[1:4]) > 0.9 and nul_at[0] < 0.5:
        return "utf-32-le"
    if min(nul_at[0:3]) > 0.9 and nul_at[3] < 0.5:
        return "utf-32-be"
    odd = (nul_at[1] + nul_at[3]) / 2
    even = (nul_at[0] + nul_at[2]) / 2
    if odd > 0.6 and even < 0.2:
        return "utf-16-le"
    if even > 0.6 and odd < 0.2:
        return "utf-16-be"
    return None


def _looks_binary(text: str) -> bool:
    sample = text[:_SAMPLE]
    if not sample:
        return False
    control = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    return control / len(sample) > 0.05


def detect_encoding(raw: bytes) -> str:
    """The encoding ``raw`` is in (a codec name Python knows)."""
    for bom, name in _BOMS:
        if raw.startswith(bom):
            return name
    wide = _bomless_wide(raw)
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
