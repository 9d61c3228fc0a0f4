"""Write text PDFs of any page count directly (no PDF library needed)."""

from __future__ import annotations

from pathlib import Path


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(path: Path, pages: list[list[tuple[int, str]]]) -> Path:
    """``pages``: per page, (font size, line) pairs drawn top-down in Helvetica."""
    n = len(pages)
    # objects: 1 catalog, 2 pages, 3 font, then per page: page object, content stream
    objs: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{4 + 2 * i} 0 R".encode() for i in range(n))
        + f"] /Count {n} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, lines in enumerate(pages):
        ops = ["BT"]
        y = 800
        for size, text in lines:
            y -= size + 6
            ops.append(f"/F1 {size} Tf 1 0 0 1 50 {y} Tm ({_escape(text)}) Tj")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Contents {5 + 2 * i} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objs.append(_stream(stream))
    return _write_objects(path, objs)


def _stream(data: bytes) -> bytes:
    return b"<< /Length " + str(len(data)).encode() + b" >>\nstream\n" + data + b"\nendstream"


def _write_objects(path: Path, objs: list[bytes]) -> Path:
    """A PDF of ``objs`` (object 1 the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objs, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def _utf16(text: str) -> str:
    return text.encode("utf-16-be").hex().upper()


def write_cjk_pdf(
    path: Path, rows: list[list[str | int]], maps: dict[str, str] | None = None
) -> Path:
    """One page of Chinese and Latin text in one composite font (not embedded, with a
    ToUnicode map), one row per entry of ``rows`` from the top, at 10 pt: each row's
    strings are shown one after the other, and a number between two of them moves the
    pen right by that many thousandths of an em (a PDF ``TJ`` adjustment), as
    typesetters space a change of script. CJK glyphs advance 1 em, others 0.55 em.
    ``maps``: what the ToUnicode map gives for a glyph instead of its own character
    (macOS maps one glyph to all its forms: "⺫⽬目" for 目)."""
    chars = sorted({ch for row in rows for part in row if isinstance(part, str) for ch in part})

    def shown(part: str | int) -> str:
        if isinstance(part, int):
            return str(-part)
        return "<" + "".join(f"{ord(ch):04X}" for ch in part) + ">"

    ops = [
        f"BT /F1 10 Tf 72 {720 - 20 * k} Td [{' '.join(shown(p) for p in row)}] TJ ET"
        for k, row in enumerate(rows)
    ]
    widths = " ".join(f"{ord(ch)} [{1000 if ord(ch) >= 0x2E80 else 550}]" for ch in chars)
    tounicode = (
        "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /U def "
        "1 begincodespacerange <0000> <FFFF> endcodespacerange "
        f"{len(chars)} beginbfchar "
        + " ".join(f"<{ord(ch):04X}> <{_utf16((maps or {}).get(ch, ch))}>" for ch in chars)
        + " endbfchar endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        _stream("\n".join(ops).encode()),
        b"<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /Identity-H "
        b"/DescendantFonts [6 0 R] /ToUnicode 7 0 R >>",
        (
            "<< /Type /Font /Subtype /CIDFontType2 /BaseFont /STSong-Light /CIDSystemInfo "
            "<< /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /FontDescriptor 8 0 R "
            f"/DW 1000 /W [{widths}] >>"
        ).encode(),
        _stream(tounicode.encode()),
        b"<< /Type /FontDescriptor /FontName /STSong-Light /Flags 4 /FontBBox [0 -200 1000 900] "
        b"/ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 700 /StemV 80 >>",
    ]
    return _write_objects(path, objs)


def long_report(path: Path, n_pages: int, label: str = "") -> Path:
    """A report of ``n_pages`` pages: a chapter heading every 50 pages, numbered lines
    (``label`` makes reports of the same length differ)."""
    pages = []
    for p in range(1, n_pages + 1):
        lines: list[tuple[int, str]] = []
        if p % 50 == 1:
            lines.append((18, f"Chapter {p // 50 + 1}"))
        lines += [
            (
                10,
                f"Page {p} line {k}: inspection record {p * 100 + k} of the turbine fleet {label}.",
            )
            for k in range(1, 6)
        ]
        pages.append(lines)
    return write_pdf(path, pages)
