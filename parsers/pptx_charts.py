"""PowerPoint charts as complete data tables.

docling's PowerPoint backend turns a native chart into a picture carrying the
chart's data as a table (categories down, one column per series) with the
chart title as its caption. Several things a reader needs are lost on the way:

- scatter and bubble charts: the X values (each point keeps only its Y) and
  the bubble sizes;
- multi-level category axes: only the innermost labels ("Q1", "Q1", ...), not
  the groups they belong to ("2023", "2024");
- axis titles other than the category axis ("Installed units", "Efficiency %");
- a chart title linked to a cell (``c:strRef``): python-pptx reads only rich
  text, and its reader even replaces the link with an empty title.

``ChartPptxBackend`` keeps docling's backend and replaces its two chart
readers, so every chart stays where docling puts it (its slide, its position
among the slide's shapes, inside groups) and only its table and caption get
richer. The tables are built with ``parsers.tables`` like every other table.
Anything unexpected in a chart part falls back to docling's own reading.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docling.backend.mspowerpoint_backend import MsPowerpointDocumentBackend
from docling.backend.utils.charts import MAX_CHART_TABLE_CELLS

from parsers.tables import table_data

if TYPE_CHECKING:
    from docling_core.types.doc import TableData

_log = logging.getLogger(__name__)

_C = "http://schemas.openxmlformats.org/drawingml/2006/chart"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_NS = {"c": _C, "a": _A}
# Plot types whose points are (x, y[, size]) pairs instead of category values.
_XY_PLOTS = frozenset({"scatterChart", "bubbleChart"})
# Axis elements of a plot area; a plot names the ones it is drawn against by c:axId.
_AXES = ("catAx", "dateAx", "valAx", "serAx")


@dataclass(frozen=True, slots=True)
class _Cell:
    row: int
    col: int
    text: str
    row_span: int = 1
    col_span: int = 1


@functools.lru_cache(maxsize=32)
def _compiled(expr: str) -> Any:
    from lxml import etree

    return etree.XPath(expr, namespaces=_NS)


def _xp(el: Any, expr: str) -> list[Any]:
    """XPath with our prefixes (python-pptx's elements bring their own xpath signature)."""
    return list(_compiled(expr)(el))


def _local(el: Any) -> str:
    tag = el.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _number_text(value: str) -> str:
    """A cached value as a reader expects it: '120' not '120.0', '0.6' not '0.59999999999999998'."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return format(number, ".15g")


def _points(container: Any) -> list[str]:
    """The cached points of a c:cat/c:val/c:xVal/c:yVal/c:bubbleSize (or one c:lvl), by index.

    The list is as long as the highest cached index, not the declared count: a
    reference to a whole sheet column declares a million points for a handful.
    """
    if container is None:
        return []
    found: dict[int, str] = {}
    for pt in container.iterfind(".//c:pt", _NS):
        try:
            idx = int(pt.get("idx", ""))
        except ValueError:
            continue
        if idx >= 0:
            found[idx] = _number_text(pt.findtext("c:v", default="", namespaces=_NS))
    if not found:
        return []
    return [found.get(i, "") for i in range(max(found) + 1)]


def _text_of(tx: Any) -> str:
    """Text of a c:tx (or c:title/c:tx): rich paragraphs, else the linked cell's cached text."""
    if tx is None:
        return ""
    paragraphs = ["".join(_xp(p, ".//a:t/text()")).strip() for p in _xp(tx, "./c:rich/a:p")]
    text = " ".join(p for p in paragraphs if p)
    if not text:
        text = " ".join(v.strip() for v in _xp(tx, "./c:strRef//c:v/text()") if v.strip())
    if not text:
        text = (tx.findtext("c:v", default="", namespaces=_NS) or "").strip()
    return " ".join(text.split())


def _title_text(owner: Any) -> str:
    """Title of a c:chart or an axis element ('' when it has none)."""
    return _text_of(owner.find("c:title/c:tx", _NS))


def _series_name(ser: Any) -> str:
    return _text_of(ser.find("c:tx", _NS))


def _plot_axes(plot_area: Any, plot: Any) -> list[Any]:
    """The axis elements a plot is drawn against, in the plot's c:axId order."""
    by_id = {}
    for axis in plot_area:
        if _local(axis) in _AXES:
            ax_id = axis.find("c:axId", _NS)
            if ax_id is not None:
                by_id[ax_id.get("val")] = axis
    ids = [el.get("val") for el in plot.iterfind("c:axId", _NS)]
    return [by_id[i] for i in ids if i in by_id]


def _series(plot: Any) -> list[Any]:
    def order(ser: Any) -> int:
        el = ser.find("c:order", _NS)
        try:
            return int(el.get("val")) if el is not None else 0
        except (TypeError, ValueError):
            return 0

    return sorted(plot.iterfind("c:ser", _NS), key=order)


def _category_levels(ser: Any) -> list[list[str]]:
    """Category labels of a series, one list per level, outermost first.

    A multi-level axis caches one c:lvl per level, innermost first; a group
    label sits at the index of its first category and covers the following
    ones until the next label.
    """
    cat = ser.find("c:cat", _NS)
    if cat is None:
        return []
    levels = _xp(cat, ".//c:multiLvlStrCache/c:lvl")
    if not levels:
        return [_points(cat)]
    leaf = _points(levels[0])
    out = []
    for lvl in reversed(levels[1:]):
        sparse = _points(lvl)
        filled, current = [], ""
        for i in range(len(leaf)):
            if i < len(sparse) and sparse[i]:
                current = sparse[i]
            filled.append(current)
        out.append(filled)
    return [*out, leaf]


def _trim(rows: list[list[str]], n_cols: int) -> list[list[str]]:
    """Drop trailing empty rows and cap the table at MAX_CHART_TABLE_CELLS cells."""
    while rows and not any(rows[-1]):
        rows.pop()
    cap = max(1, MAX_CHART_TABLE_CELLS // max(n_cols, 1))
    if len(rows) > cap:
        _log.warning("chart table truncated from %d to %d rows", len(rows), cap)
        rows = rows[:cap]
    return rows


def _grid(header: Sequence[str], rows: list[list[str]]) -> TableData | None:
    n_cols = len(header)
    rows = _trim(rows, n_cols)
    if not rows or n_cols == 0:
        return None
    cells = [_Cell(0, c, text) for c, text in enumerate(header)]
    for r, row in enumerate(rows, start=1):
        cells += [_Cell(r, c, row[c] if c < len(row) else "") for c in range(n_cols)]
    return table_data(cells, len(rows) + 1, n_cols, header_rows=1)


def _column(values: list[str], n: int) -> list[str]:
    return values + [""] * (n - len(values))


@dataclass(slots=True)
class ChartReading:
    """A chart read from its XML part: the table plus the caption text."""

    table: TableData | None
    caption: str


def _category_chart(
    plot_area: Any, plots: list[Any], leaf_labels: list[str] | None
) -> ChartReading:
    levels: list[list[str]] = []
    corner, notes = "", []
    columns: list[tuple[str, list[str]]] = []
    for plot in plots:
        axes = _plot_axes(plot_area, plot)
        sers = _series(plot)
        if not levels and sers:
            levels = _category_levels(sers[0])
            if levels and leaf_labels is not None and len(leaf_labels) >= len(levels[-1]):
                # docling's reading of the same labels, with date serials as ISO 8601 dates
                levels[-1] = [str(label) for label in leaf_labels[: len(levels[-1])]]
            cat_axes = [a for a in axes if _local(a) in ("catAx", "dateAx")]
            corner = _title_text(cat_axes[0]) if cat_axes else ""
        for axis in axes:
            title = _title_text(axis)
            if _local(axis) == "valAx" and title and f"Value axis: {title}" not in notes:
                notes.append(f"Value axis: {title}")
        columns += [(_series_name(s), _points(s.find("c:val", _NS))) for s in sers]
    if not columns:
        return ChartReading(None, "; ".join(notes))
    n = max([len(v) for _, v in columns] + [len(lv) for lv in levels])
    label_cols = [_column(lv, n) for lv in levels] or [[""] * n]
    header = [""] * (len(label_cols) - 1) + [corner] + [name for name, _ in columns]
    rows = [
        [col[i] for col in label_cols] + [_column(v, n)[i] for _, v in columns] for i in range(n)
    ]
    return ChartReading(_grid(header, rows), "; ".join(notes))


def _xy_chart(plot_area: Any, plots: list[Any]) -> ChartReading:
    """Scatter and bubble plots: X, Y (and bubble size) of every point."""
    x_title = y_title = ""
    series: list[tuple[str, list[str], list[str], list[str] | None]] = []
    for plot in plots:
        axes = _plot_axes(plot_area, plot)
        if len(axes) >= 2:
            x_title = x_title or _title_text(axes[0])
            y_title = y_title or _title_text(axes[1])
        bubble = _local(plot) == "bubbleChart"
        for ser in _series(plot):
            xs = _points(ser.find("c:xVal", _NS))
            ys = _points(ser.find("c:yVal", _NS))
            sizes = _points(ser.find("c:bubbleSize", _NS)) if bubble else None
            series.append((_series_name(ser) or f"Series {len(series) + 1}", xs, ys, sizes))
    if not series:
        return ChartReading(None, "")
    n = max(max(len(xs), len(ys), len(sz or [])) for _, xs, ys, sz in series)
    shared_x = all(xs == series[0][1] for _, xs, _, _ in series) and bool(series[0][1])
    header: list[str] = []
    columns: list[list[str]] = []
    if shared_x:
        header.append(x_title or "X")
        columns.append(_column(series[0][1], n))
    for name, xs, ys, sizes in series:
        if not shared_x:
            header.append(f"{name} ({x_title or 'X'})")
            columns.append(_column(xs, n))
        header.append(name if shared_x else f"{name} ({y_title or 'Y'})")
        columns.append(_column(ys, n))
        if sizes is not None:
            header.append(f"{name} (size)")
            columns.append(_column(sizes, n))
    rows = [[col[i] for col in columns] for i in range(n)]
    notes = [f"Y axis: {y_title}"] if y_title and shared_x else []
    return ChartReading(_grid(header, rows), "; ".join(notes))


def read_chart(chart_space: Any, leaf_labels: list[str] | None = None) -> ChartReading:
    """Table and caption of one chart part (``c:chartSpace``).

    ``leaf_labels`` are the innermost category labels as docling read them
    (with date serials turned into dates); they replace the raw cached ones.
    """
    chart = chart_space.find("c:chart", _NS)
    plot_area = chart.find("c:plotArea", _NS) if chart is not None else None
    if chart is None or plot_area is None:
        return ChartReading(None, "")
    plots = [el for el in plot_area if _local(el).endswith("Chart")]
    xy = [p for p in plots if _local(p) in _XY_PLOTS]
    if xy and len(xy) == len(plots):
        reading = _xy_chart(plot_area, xy)
    else:
        reading = _category_chart(plot_area, [p for p in plots if p not in xy], leaf_labels)
    title = _title_text(chart)
    caption = title
    if reading.caption:
        caption = f"{title} ({reading.caption})" if title else reading.caption
    return ChartReading(reading.table, caption)


class ChartPptxBackend(MsPowerpointDocumentBackend):
    """docling's PowerPoint backend, with charts read in full (see the module docstring)."""

    @staticmethod
    def _chart_title_text(chart: Any) -> str | None:
        try:
            return read_chart(chart.element).caption or None
        except Exception as exc:  # never lose the slide over a chart
            _log.warning("chart caption: %s; using docling's reading", exc)
            return MsPowerpointDocumentBackend._chart_title_text(chart)

    def _chart_to_table_data(self, chart: Any, plots: list[Any]) -> TableData | None:
        try:
            leaf = None
            category_plots = [p for p in plots if _local(p) not in _XY_PLOTS]
            if category_plots:
                axis = self._category_axis(chart, category_plots[0])
                leaf = self._category_labels(chart, axis, category_plots[0])
            table = read_chart(chart.element, leaf).table
        except Exception as exc:  # never lose the slide over a chart
            _log.warning("chart data: %s; using docling's reading", exc)
            table = None
        if table is None:
            return super()._chart_to_table_data(chart, plots)
        return table
