"""Excel cells as the reader sees them.

docling's Excel backend (XLSX, and XLS, which it converts to XLSX with LibreOffice) writes
each cell as ``str(value)``: a cell showing ``3%`` comes out as ``0.025``, one showing
``6:15 AM`` as ``1992-12-28 06:15:00.687000``, ``$1,599.99`` as ``1599.99``. Search and
readers know the shown text. ``FormattedXlsxBackend`` is docling's backend with every
number, date, time and boolean cell replaced by its text under the cell's number format
(``parsers.tables.excel_cell_text``) once the workbook is loaded, so tables, and the chart
data read from the same cells, carry what Excel shows.

Where the shown text does not say the stored number (``3%`` for 0.025, ``1,600`` for
1599.99, ``2M`` for 1,500,000), the raw value follows it in brackets, ``3% (0.025)``: the
reader's text first, the figure a question may quote kept. A shown number that reads back
as the stored one (``12.34%``, ``$1,599.99``, ``007``), a date or time, and text with no
single number in it (``zero``) are left as shown.
"""

from __future__ import annotations

import math
import re
from typing import Any

from docling.backend.msexcel_backend import MsExcelDocumentBackend
from openpyxl.styles.numbers import is_date_format

from parsers.tables import excel_cell_text

_NUMBER = re.compile(r"(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:E[-+]?\d+)?", re.IGNORECASE)


def _read_back(shown: str) -> float | None:
    """The one number a shown text states (percent, brackets or a minus for negatives,
    thousands separators), or None when it states none or several."""
    found = _NUMBER.findall(shown)
    if len(found) != 1:
        return None
    try:
        number = float(found[0].replace(",", ""))
    except ValueError:
        return None
    if "%" in shown:
        number /= 100
    text = shown.strip()
    if (text.startswith("(") and text.endswith(")")) or re.search(r"[-\u2212]\D*\d", text):
        number = -number
    return number


def shown_with_raw(value: object, number_format: str | None) -> str:
    """A cell's shown text, followed by its stored number where the text does not say it."""
    shown = excel_cell_text(value, number_format)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return shown
    if number_format and is_date_format(number_format):
        return shown  # a date stored as a serial number says its date, not the serial
    back = _read_back(shown)
    if back is None or math.isclose(back, float(value), rel_tol=1e-9, abs_tol=1e-12):
        return shown
    raw = str(value) if isinstance(value, int) else format(value, ".15g")
    return f"{shown} ({raw})"


def format_workbook(workbook: Any) -> int:
    """Replace each non-text cell value of ``workbook`` by its shown text (and its raw
    number where the text does not say it); returns how many."""
    count = 0
    for sheet in workbook.worksheets:
        for cell in getattr(sheet, "_cells", {}).values():
            value = cell.value
            if value is None or isinstance(value, str):
                continue
            cell.value = shown_with_raw(value, cell.number_format)
            count += 1
    return count


class FormattedXlsxBackend(MsExcelDocumentBackend):
    """docling's Excel backend with cells as formatted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.workbook is not None:
            format_workbook(self.workbook)
