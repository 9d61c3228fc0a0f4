"""Drawings no chosen library reads directly (Visio .vsd/.vsdx/.vsdm, Windows metafiles
.emf/.wmf): LibreOffice Draw opens them (libvisio, its metafile import) and exports each
page as a PDF page, which the PDF path then reads with its text layer, headings and
tables, or OCR where a page holds no text (``parsers.pdf.PDF``).

The export runs through docling's hardened LibreOffice call (throwaway profile,
macros off, process-group kill on timeout), as the legacy Office conversions do.
The PDF lives in a temporary folder for the parse only; the document keeps the
drawing's own name and format.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from parsers.backend import TableBackend
from parsers.errors import Category, ParseError

if TYPE_CHECKING:
    from common.settings import ParseSettings
    from parsers.formats import FormatSpec
    from parsers.models import BackendResult

# LibreOffice's export of one drawing; generous for a many-page diagram on a busy machine.
EXPORT_TIMEOUT_S = 120


class DrawingBackend(TableBackend):
    """A drawing exported to PDF by LibreOffice, read by the PDF backend."""

    name = "parsers.drawing:parse_drawing"

    def fingerprint(self, settings: ParseSettings) -> dict[str, object]:
        # Whatever re-parses PDFs (their format version, OCR, the PDF path) re-parses these.
        from parsers.fingerprint import format_fingerprint
        from parsers.formats import spec_for

        return {"pdf": format_fingerprint(spec_for("pdf"), settings)}

    def parse(self, path: Path, spec: FormatSpec, settings: ParseSettings) -> BackendResult:
        from docling.backend.docx.drawingml.utils import convert_to_modern_format

        from parsers.formats import spec_for
        from parsers.pdf import PDF

        self.check_valid(path, spec)  # the registry checked LibreOffice (the row's needs)
        with tempfile.TemporaryDirectory(prefix="corpusflow-drawing-") as tmp:
            # A copy under a plain name: LibreOffice picks its import filter by the suffix.
            source = Path(tmp) / f"drawing{path.suffix.lower() or spec.extensions[0]}"
            shutil.copyfile(path, source)
            try:
                pdf = convert_to_modern_format(source, "", "pdf", timeout_s=EXPORT_TIMEOUT_S)
            except Exception as exc:  # no output, a crash, a timeout
                raise ParseError(
                    Category.CORRUPT, f"LibreOffice could not open this drawing: {exc}"[:500]
                ) from exc
            exported = Path(tmp) / f"{path.stem or 'drawing'}.pdf"
            exported.write_bytes(pdf.getvalue())
            result = PDF.parse(exported, spec_for("pdf"), settings)
        result.parser = f"libreoffice+{result.parser}"
        return result


DRAWING = DrawingBackend()
