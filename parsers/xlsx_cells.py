"""Excel cells as the reader sees them.

docling's Excel backend (XLSX, and XLS, which it converts to XLSX with LibreOffice) writes
each cell as ``str(value)``: a cell showing ``3%`` comes out as ``0.025``, one showing
``6:15 AM`` as ``1992-12-28 06:15:00.687000``, ``$1,599.99`` as ``1599.99``. Search and
readers know the shown text. ``FormattedXlsxBackend`` is docling's backend with every
number, date, time and boolean cell replaced by its text under the cell's number format
(``parsers.tables.excel_cell_text``) once the workbook is loaded, so tables, and the chart
data read from the same cells, carry what Excel shows.
"""

from __future__ import annotations

from typing import Any

from docling.backend.msexcel_backend import MsExcelDocumentBackend

from parsers.tables import excel_cell_text


def format_workbook(workbook: Any) -> int:
    """Replace each non-text cell value of ``workbook`` by its shown text; returns how many."""
    count = 0
    for sheet in workbook.worksheets:
        for cell in getattr(sheet, "_cells", {}).values():
            value = cell.value
            if value is None or isinstance(value, str):
                continue
            cell.value = excel_cell_text(value, cell.number_format)
            count += 1
    return count


class FormattedXlsxBackend(MsExcelDocumentBackend):
    """docling's Excel backend with cells as formatted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.workbook is not None:
            format_workbook(self.workbook)
