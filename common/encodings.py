"""Byte-order marks, and UTF-16/32 text saved without one.

What both the text decoder (``parsers.textcodec``) and the e-mail source
(``sources.mail``: a message saved as UTF-16 by a Windows tool) must recognise before
anything reads the bytes as 8-bit text.
"""

from __future__ import annotations

import codecs
import itertools
import re

BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
SAMPLE = 1 << 16


def bom_encoding(raw: bytes) -> str | None:
    """The encoding a leading byte-order mark names, if any."""
    for bom, name in BOMS:
        if raw.startswith(bom):
            return name
    return None


def bomless_wide(raw: bytes) -> str | None:
    """UTF-16/32 without a BOM: in mostly-ASCII text every 2nd/4th byte is NUL."""
    sample = raw[: SAMPLE - (SAMPLE % 4)]
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


def as_8bit(raw: bytes) -> bytes:
    """Bytes an 8-bit reader (the e-mail parser) can read: a UTF-8 BOM dropped, UTF-16/32
    text (with a BOM or without) re-encoded as UTF-8; anything else unchanged."""
    encoding = bom_encoding(raw) or bomless_wide(raw)
    if encoding is None:
        return raw
    if encoding == "utf-8":
        return raw[len(codecs.BOM_UTF8) :]
    return raw.decode(encoding, errors="replace").lstrip("\ufeff").encode("utf-8")


# The Windows "ANSI" code pages names written without an encoding are told apart in
# (an attachment's raw name, an embedded object's file name): Chinese (simplified and
# traditional), Japanese, Korean, and Western as the default.
WINDOWS_ANSI = ("gb18030", "cp932", "cp950", "cp949", "cp1252")
# Compound File Binary (OLE2) files: legacy Office, Outlook .msg, encrypted OOXML.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def _implausible(text: str) -> bool:
    """A decoding no writer meant: Hangul syllables beside Han ideographs (Korean names are
    written in Hangul; Chinese bytes read as Korean give both), a lone Hangul jamo, or
    half-width katakana beside kanji, Hangul or a Latin letter (Chinese or Korean bytes
    read as Shift-JIS), or Western accented letters read as ideographs."""
    hangul = any("\uac00" <= c <= "\ud7a3" for c in text)
    jamo = any("\u3131" <= c <= "\u318e" for c in text)
    han = any(_is_han(c) for c in text)
    kana = any("\uff61" <= c <= "\uff9f" for c in text)
    kana_by_latin = any(
        ("\uff61" <= a <= "\uff9f" and b.isascii() and b.isalpha())
        or ("\uff61" <= b <= "\uff9f" and a.isascii() and a.isalpha())
        for a, b in itertools.pairwise(text)
    )
    return (
        (hangul and han) or jamo or (kana and (han or hangul)) or kana_by_latin or _latin_han(text)
    )


def _latin_han(text: str) -> bool:
    """Latin words with single Han ideographs inside them ("Ni隳", "M舐z"): an accented
    letter and the ASCII letter after it read as one double-byte character. Chinese names
    that mix in Latin ("iPhone使用说明") hold runs of two or more ideographs."""
    runs = [m for m in re.finditer(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+", text)]
    if not runs or any(len(m.group()) > 1 for m in runs):
        return False

    def letter(i: int) -> bool:
        return 0 <= i < len(text) and text[i].isascii() and text[i].isalpha()

    return all(letter(m.start() - 1) or letter(m.end()) for m in runs)


def _is_han(c: str) -> bool:
    return "\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" or "\uf900" <= c <= "\ufaff"


def guess_encoding(raws: list[bytes], candidates: tuple[str, ...] = WINDOWS_ANSI) -> str:
    """The encoding names written without one were most likely written in: UTF-8 where
    they all decode, else the candidate they read best in: charset_normalizer's ranking,
    less the decodings that mix scripts no writer mixes. ``candidates[-1]`` is
    the default when none fits.

    Short names stay ambiguous where two encodings map the same bytes to the same kind of
    text: GBK and Korean cp949 share their byte ranges, so a two-character Chinese name
    may read as two Hangul syllables."""
    try:
        for raw in raws:
            raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    import charset_normalizer

    matches = list(charset_normalizer.from_bytes(b"\n".join(raws), cp_isolation=list(candidates)))
    if not matches:
        return candidates[-1]
    plausible = [m for m in matches if not _implausible(str(m))]
    return str((plausible or matches)[0].encoding)
