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
        objs.append(
            b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream"
        )
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
