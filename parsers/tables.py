"""Tables into docling's table model, whatever backend found them.

Every parse path stores a table as a docling ``TableItem`` (cells with spans and
header flags), never as pre-rendered text: Markdown export renders it as a
Markdown table, and the chunker linearises it into "row, column = value"
triplets with the header repeated (``chunking.structure``). So a table found by
the model-free PDF path and one found by unstructured read the same downstream.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from docling_core.types.doc import TableData


class CellLike(Protocol):
    """A table cell: top-left slot (0-based) and how many rows/columns it spans."""

    @property
    def row(self) -> int: ...

    @property
    def col(self) -> int: ...

    @property
    def row_span(self) -> int: ...

    @property
    def col_span(self) -> int: ...

    @property
    def text(self) -> str: ...


def table_data(cells: Iterable[CellLike], n_rows: int, n_cols: int, header_rows: int) -> TableData:
    """docling TableData from positioned cells; the first ``header_rows`` rows are headers."""
    from docling_core.types.doc import TableCell, TableData

    table_cells = [
        TableCell(
            text=c.text,
            row_span=c.row_span,
            col_span=c.col_span,
            start_row_offset_idx=c.row,
            end_row_offset_idx=c.row + c.row_span,
            start_col_offset_idx=c.col,
            end_col_offset_idx=c.col + c.col_span,
            column_header=c.row < header_rows,
        )
        for c in cells
    ]
    return TableData(num_rows=n_rows, num_cols=n_cols, table_cells=table_cells)


class _HtmlCell:
    __slots__ = ("col", "col_span", "header", "row", "row_span", "text")

    def __init__(self, row: int, col: int, row_span: int, col_span: int, header: bool) -> None:
        self.row = row
        self.col = col
        self.row_span = row_span
        self.col_span = col_span
        self.header = header
        self.text = ""


def _span(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 1000))
    except ValueError:
        return 1


class _TableHtml(HTMLParser):
    """Reads the first <table> of an HTML fragment into positioned cells.

    The standard-library parser never fetches or expands anything: entity
    declarations are not processed, only the HTML character references.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[_HtmlCell] = []
        self.row = -1
        self.depth = 0  # nested tables are read as text of their cell
        self.done = False
        self._taken: set[tuple[int, int]] = set()
        self._cell: _HtmlCell | None = None
        self._in_thead = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        if tag == "table":
            self.depth += 1
            return
        if self.depth != 1:
            return
        if tag == "thead":
            self._in_thead = True
        elif tag == "tr":
            self.row += 1
            self._cell = None
        elif tag in ("td", "th"):
            if self.row < 0:
                self.row = 0
            a = dict(attrs)
            col = 0
            while (self.row, col) in self._taken:
                col += 1
            cell = _HtmlCell(
                self.row,
                col,
                _span(a.get("rowspan")),
                _span(a.get("colspan")),
                tag == "th" or self._in_thead,
            )
            for r in range(cell.row, cell.row + cell.row_span):
                for k in range(cell.col, cell.col + cell.col_span):
                    self._taken.add((r, k))
            self.cells.append(cell)
            self._cell = cell
        elif tag == "br" and self._cell is not None:
            self._cell.text += " "

    def handle_endtag(self, tag: str) -> None:
        if self.done:
            return
        if tag == "table":
            self.depth -= 1
            if self.depth == 0:
                self.done = True
        elif self.depth == 1 and tag in ("td", "th"):
            self._cell = None
        elif self.depth == 1 and tag == "thead":
            self._in_thead = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self.done:
            self._cell.text += data


def cells_from_html(html: str) -> tuple[list[CellLike], int, int, int] | None:
    """Cells, row count, column count and header rows of the first HTML table, or None."""
    reader = _TableHtml()
    reader.feed(html)
    reader.close()
    if not reader.cells:
        return None
    for cell in reader.cells:
        cell.text = " ".join(cell.text.split())
    n_rows = max(c.row + c.row_span for c in reader.cells)
    n_cols = max(c.col + c.col_span for c in reader.cells)
    header_rows = 0
    for r in range(n_rows):
        row_cells = [c for c in reader.cells if c.row == r]
        if row_cells and all(c.header for c in row_cells):
            header_rows = r + 1
        else:
            break
    return list(reader.cells), n_rows, n_cols, header_rows


# --------------------------------------------------------------------------- #
# Spreadsheet cells as the reader sees them
# --------------------------------------------------------------------------- #

# Excel's built-in short date (id 14) and date-time (id 22) follow the system locale;
# openpyxl names them by their ISO-less codes. Shown as Excel shows them in en-US.
_LOCALE_FORMATS = {"mm-dd-yy": "m/d/yyyy", "m/d/yy h:mm": "m/d/yyyy h:mm"}
_EXCEL_EPOCH = (1899, 12, 30)
_DATE_CODES = frozenset("ymdhsYMDHS")
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


# A section's condition: "[>999]", "[<=-1.5]", "[=0]", maybe after a colour or a
# locale/currency tag ("[Red][<0]", "[$-409][>999]").
_CONDITION = re.compile(
    r"^\s*(?:\[[A-Za-z]+\d*\]|\[\$[^\]]*\])*\[(<=|>=|<>|<|>|=)\s*(-?\d+(?:\.\d+)?)\]"
)
_COMPARE = {
    "<": float.__lt__,
    ">": float.__gt__,
    "=": float.__eq__,
    "<=": float.__le__,
    ">=": float.__ge__,
    "<>": float.__ne__,
}


def _conditional_section(sections: list[str], number: float) -> tuple[str, bool] | None:
    """The section a conditional format ("[>999999]#,,"M";[>999]#,"K";#") shows
    ``number`` in, its condition taken off, and whether the number keeps its minus sign:
    the first section whose condition holds, else the first without a condition (else
    General). A section for negative numbers only ("[<0]", "[<=-25]") writes the number
    without its sign, as Excel and LibreOffice do. None for a format without conditions."""
    conditions = [_CONDITION.match(s) for s in sections]
    if not any(conditions):
        return None
    for section, condition in zip(sections, conditions, strict=True):
        if condition is None:
            continue
        op, bound = condition.group(1), float(condition.group(2))
        if _COMPARE[op](number, bound):
            negative_only = op in ("<", "<=") and bound <= 0 and number < 0
            body = section[: condition.start(1) - 1] + section[condition.end() :]
            return body, not negative_only
    rest = [s for s, c in zip(sections, conditions, strict=True) if c is None]
    return (rest[0] if rest else "General"), True


def _is_general(section: str) -> bool:
    """A section that says General, after its colour and other tags."""
    return re.sub(r"\[[^\]]*\]", "", section).strip().lower() == "general"


def _sections(fmt: str) -> list[str]:
    """A number format's ``;``-separated sections (quotes and escapes respected)."""
    out, cur, quoted, i = [], "", False, 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "\\" and i + 1 < len(fmt):
            cur += fmt[i : i + 2]
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        if ch == ";" and not quoted:
            out.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    out.append(cur)
    return out


def _tokens(section: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: 'lit' literal text, 'code' a format character or run of them,
    'bracket' a [..] part, 'ampm' an AM/PM marker."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(section):
        ch = section[i]
        if ch == '"':
            end = section.find('"', i + 1)
            end = len(section) if end < 0 else end
            out.append(("lit", section[i + 1 : end]))
            i = end + 1
        elif ch == "\\" and i + 1 < len(section):
            out.append(("lit", section[i + 1]))
            i += 2
        elif ch == "_" and i + 1 < len(section):
            out.append(("lit", " "))  # a space as wide as the next character
            i += 2
        elif ch == "*" and i + 1 < len(section):
            i += 2  # fill character: repeats to the column width, nothing to read
        elif ch == "[":
            end = section.find("]", i)
            end = len(section) if end < 0 else end
            out.append(("bracket", section[i + 1 : end]))
            i = end + 1
        elif section[i : i + 5].upper() == "AM/PM":
            out.append(("ampm", section[i : i + 5]))
            i += 5
        elif section[i : i + 3].upper() == "A/P":
            out.append(("ampm", section[i : i + 3]))
            i += 3
        elif ch in _DATE_CODES:
            j = i
            while j < len(section) and section[j].lower() == ch.lower():
                j += 1
            out.append(("code", section[i:j].lower()))
            i = j
        elif ch in "0#?.,%@eE+-/" and ch not in "+-/":
            out.append(("code", ch))
            i += 1
        else:
            out.append(("lit", ch))
            i += 1
    return out


def _general(value: float) -> str:
    """Excel's General format, with every digit a float holds exactly (a wide column)."""
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return format(value, ".15g").replace("e+", "E+").replace("e-", "E-")


def _as_datetime(value: object) -> Any:
    import datetime as dt

    epoch = dt.datetime(*_EXCEL_EPOCH)
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    if isinstance(value, dt.time):
        return dt.datetime.combine(epoch.date(), value)
    if isinstance(value, dt.timedelta):
        return epoch + value
    if isinstance(value, int | float):
        return epoch + dt.timedelta(days=float(value))
    return None


def _format_date(value: object, tokens: list[tuple[str, str]]) -> str | None:
    import datetime as dt

    moment = _as_datetime(value)
    if moment is None:
        return None
    epoch = dt.datetime(*_EXCEL_EPOCH)
    codes = [t for k, t in tokens if k == "code"]
    # Excel rounds to the smallest unit shown when that is seconds or a fraction of one.
    decimals = 0
    for k, (kind, text) in enumerate(tokens):
        if kind == "code" and text.startswith("s"):
            follow = tokens[k + 1 : k + 2]
            if follow == [("code", ".")]:
                decimals = sum(1 for kk, tt in tokens[k + 2 :] if kk == "code" and tt == "0")
    if any(c.startswith("s") for c in codes) or any("s" in t for k, t in tokens if k == "bracket"):
        step = dt.timedelta(seconds=10**-decimals)
        moment = epoch + round((moment - epoch) / step) * step
    twelve = any(k == "ampm" for k, _ in tokens)
    out: list[str] = []
    last_code = ""
    for k, (kind, text) in enumerate(tokens):
        if kind == "lit":
            out.append(text)
        elif kind == "ampm":
            pm = moment.hour >= 12
            if text.upper() == "A/P":
                out.append(("P" if pm else "A") if text[0].isupper() else ("p" if pm else "a"))
            else:
                out.append("PM" if pm else "AM")
        elif kind == "bracket":
            span = moment - epoch
            unit = text.lower()
            if unit.startswith("h"):
                out.append(str(int(span.total_seconds() // 3600)).zfill(len(unit)))
            elif unit.startswith("m"):
                out.append(str(int(span.total_seconds() // 60)).zfill(len(unit)))
            elif unit.startswith("s"):
                out.append(str(int(span.total_seconds())).zfill(len(unit)))
            elif unit.startswith("$"):
                out.append(text[1:].split("-")[0])
            if unit[:1] in ("h", "m", "s"):
                last_code = unit[:1]  # "[h]:mm": the "mm" after elapsed hours is minutes
            continue
        elif text.startswith("y"):
            out.append(str(moment.year) if len(text) > 2 else f"{moment.year % 100:02d}")
        elif text.startswith("d"):
            n = len(text)
            out.append(
                _DAYS[moment.weekday()]
                if n >= 4
                else _DAYS[moment.weekday()][:3]
                if n == 3
                else f"{moment.day:0{n}d}"
            )
        elif text.startswith("h"):
            hour = moment.hour % 12 or 12 if twelve else moment.hour
            out.append(f"{hour:0{min(len(text), 2)}d}")
        elif text.startswith("m"):
            later = [t for kk, t in tokens[k + 1 :] if kk == "code" and t[0] in "ymdhs"]
            minute = last_code.startswith("h") or (bool(later) and later[0].startswith("s"))
            n = len(text)
            if minute and n <= 2:
                out.append(f"{moment.minute:0{n}d}")
            elif n >= 5:
                out.append(_MONTHS[moment.month - 1][0])
            elif n == 4:
                out.append(_MONTHS[moment.month - 1])
            elif n == 3:
                out.append(_MONTHS[moment.month - 1][:3])
            else:
                out.append(f"{moment.month:0{n}d}")
        elif text.startswith("s"):
            out.append(f"{moment.second:0{min(len(text), 2)}d}")
        elif text == "." and decimals:
            frac = f"{moment.microsecond / 1e6:.{decimals}f}"[1:]
            out.append(frac)
        elif text == "0" and decimals:
            continue  # digits of the fraction, written with the "."
        else:
            out.append(text)
        if kind == "code" and text[0] in "ymdhs":
            last_code = text
    return "".join(out)


def _place_int(whole: str, tokens: list[tuple[str, str]], grouping: bool) -> str:
    """The integer digits set into the integer part's placeholders, right to left."""
    places = [i for i, (k, t) in enumerate(tokens) if k == "code" and t in "0#?"]
    if grouping and whole:
        whole = f"{int(whole):,}"
    digits = list(whole)
    out = ["" if (k, t) == ("code", ",") else t for k, t in tokens]
    for n, i in enumerate(reversed(places)):
        if n == len(places) - 1:  # the first placeholder takes every digit left over
            out[i] = "".join(digits) or {"0": "0", "#": "", "?": " "}[tokens[i][1]]
        elif digits:
            out[i] = digits.pop()
        else:
            out[i] = {"0": "0", "#": "", "?": " "}[tokens[i][1]]
    return "".join(out)


def _place_frac(frac: str, tokens: list[tuple[str, str]]) -> str:
    """The fraction digits set into the fraction's placeholders, left to right; '#' drops
    a trailing zero, '?' shows it as a space."""
    places = [i for i, (k, t) in enumerate(tokens) if k == "code" and t in "0#?"]
    keep = len(places)
    while keep and tokens[places[keep - 1]][1] != "0" and frac[keep - 1] == "0":
        keep -= 1
    out = ["" if (k, t) == ("code", ",") else t for k, t in tokens]
    for n, i in enumerate(places):
        out[i] = frac[n] if n < keep else (" " if tokens[i][1] == "?" else "")
    return "".join(out)


def _format_number(value: float, tokens: list[tuple[str, str]], signed: bool) -> str | None:
    import math
    from decimal import ROUND_HALF_UP, Decimal

    codes = [t for k, t in tokens if k == "code"]
    if "@" in codes or ("lit", "/") in tokens:
        return None  # text sections and fractions: General
    if not any(t in "0#?" for t in codes):
        return "".join(t for k, t in tokens if k == "lit")  # a section of text only
    # [$€-407] is a currency symbol; other brackets (colours, conditions) show nothing.
    tokens = [
        ("lit", t[1:].split("-")[0]) if k == "bracket" and t[:1] == "$" else (k, t)
        for k, t in tokens
        if k != "bracket" or t[:1] == "$"
    ]
    exp_at = next((i for i, (k, t) in enumerate(tokens) if k == "code" and t in "eE"), None)
    mantissa = tokens if exp_at is None else tokens[:exp_at]
    exponent = [] if exp_at is None else tokens[exp_at + 1 :]
    dot = next((i for i, tok in enumerate(mantissa) if tok == ("code", ".")), None)
    int_tokens = mantissa if dot is None else mantissa[:dot]
    frac_tokens = [] if dot is None else mantissa[dot + 1 :]
    int_places = [i for i, (k, t) in enumerate(int_tokens) if k == "code" and t in "0#?"]
    # Commas after the last integer placeholder scale by 1000; between placeholders, group.
    # So do commas after the last decimal placeholder ("#.000,,"M"": millions).
    scale = 0
    if int_places:
        scale = sum(1 for k, t in int_tokens[int_places[-1] + 1 :] if (k, t) == ("code", ","))
    frac_places = [i for i, (k, t) in enumerate(frac_tokens) if k == "code" and t in "0#?"]
    if frac_places:
        scale += sum(1 for k, t in frac_tokens[frac_places[-1] + 1 :] if (k, t) == ("code", ","))
    grouping = (
        any((k, t) == ("code", ",") for k, t in int_tokens[int_places[0] : int_places[-1]])
        if int_places
        else False
    )
    percent = codes.count("%")
    number = abs(value) * (100**percent) / (1000**scale)
    exp = 0
    if exp_at is not None and number:
        exp = math.floor(math.log10(number)) - max(len(int_places) - 1, 0)
        number = number / 10**exp
    n_frac = sum(1 for k, t in frac_tokens if k == "code" and t in "0#?")
    rounded = Decimal(repr(number)).quantize(Decimal(1).scaleb(-n_frac), rounding=ROUND_HALF_UP)
    if exp_at is not None and rounded >= 10 ** max(len(int_places), 1):
        exp += 1  # 9.999E+02 rounds to 10.00: one more power of ten
        rounded = (rounded / 10).quantize(Decimal(1).scaleb(-n_frac), rounding=ROUND_HALF_UP)
    whole, _, frac = f"{rounded:f}".partition(".")
    whole = whole.lstrip("0")
    text = _place_int(whole, int_tokens, grouping)
    if dot is not None:
        text += "." + _place_frac(frac.ljust(n_frac, "0"), frac_tokens)
    if exp_at is not None:
        sign = "-" if exp < 0 else ("+" if ("lit", "+") in exponent[:1] else "")
        width = sum(1 for k, t in exponent if k == "code" and t in "0#?")
        rest = [(k, t) for k, t in exponent if not (k == "code" and t in "0#?")]
        rest = rest[1:] if rest[:1] in ([("lit", "+")], [("lit", "-")]) else rest
        text += tokens[exp_at][1].upper() + sign + str(abs(exp)).zfill(width)
        text += "".join(t for k, t in rest if k == "lit")
    negative = signed and value < 0 and rounded != 0
    return ("-" if negative else "") + text


def excel_cell_text(value: object, number_format: str | None) -> str:
    """A spreadsheet cell's value as the reader sees it under its number format.

    Percent (0.025 under ``0.0%`` -> ``2.5%``), dates and times (``h:mm AM/PM`` ->
    ``6:15 AM``), currency, thousands separators, scaling, scientific notation, literal
    text and the positive;negative;zero sections are rendered as Excel renders them;
    a format this does not know (fractions, digits split by literals) gives the value
    as Excel's General format writes it, never an error.
    """
    import datetime as dt

    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return value
    fmt = _LOCALE_FORMATS.get(number_format or "", number_format or "General")
    sections = _sections(fmt)
    is_number = isinstance(value, int | float)
    section, signed = sections[0], True
    if is_number:
        number = float(value)  # type: ignore[arg-type]
        conditional = _conditional_section(sections, number)
        if conditional is not None:
            section, signed = conditional
        elif number < 0 and len(sections) >= 2:
            section, signed = sections[1], False
        elif number == 0 and len(sections) >= 3:
            section = sections[2]
    tokens = _tokens(section)
    codes = {t[0] for k, t in tokens if k == "code"}
    brackets = [t.lower() for k, t in tokens if k == "bracket"]
    is_date = bool(codes & set("ymdhs")) or any(b[:1] in "hms" for b in brackets)
    try:
        if is_date:
            text = _format_date(value, tokens)
        elif is_number and not _is_general(section):
            text = _format_number(float(value), tokens, signed)  # type: ignore[arg-type]
        else:
            text = None
    except (ArithmeticError, ValueError, OverflowError, IndexError):
        text = None
    if text is not None:
        return text.strip()
    if is_number and not signed:  # a negative section that says General: no minus sign
        value = abs(value)  # type: ignore[arg-type]
    if isinstance(value, int):
        return str(value)
    if is_number:
        return _general(float(value))  # type: ignore[arg-type]
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return str(value)
