"""Byte-order marks, and UTF-16/32 text saved without one.

What both the text decoder (``parsers.textcodec``) and the e-mail source
(``sources.mail``: a message saved as UTF-16 by a Windows tool) must recognise before
anything reads the bytes as 8-bit text.
"""

from __future__ import annotations

import codecs

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
