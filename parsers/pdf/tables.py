"""Tables from a PDF's text layer and vector graphics, without models.

Two kinds of evidence are used, strongest first:

- ruled tables: the thin strokes and rectangle edges a PDF draws as cell
  borders (read with pypdfium2) form a grid; words are placed in its cells, and
  a border missing between two neighbouring cells makes them one spanning cell;
- tables without vertical borders (unruled, or booktabs-style with horizontal
  rules only): rows of short text fragments whose gaps line up into the same
  empty vertical corridors over several consecutive rows.

Every detector is conservative, because a false table breaks paragraphs apart:
it needs at least two rows and two columns, several filled cells, and cells
that read like cells (a few words), not like paragraphs.

Coordinates are PDF points with a top-left origin (``parsers.pdf.primitives``).
``page_tables`` runs both detectors over one text-layer page.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from parsers.models import ParseWarning
from parsers.pdf.primitives import (
    LARGER,
    MARKER,
    DisjointSets,
    Word,
    cluster,
    cluster_values,
    is_cjk,
    is_mono_face,
    is_rtl,
    join_pieces,
    visual_to_logical,
    walk_objects,
)

# A stroke at most this thick (points) is a rule, not a filled area. Table
# borders are hairlines (0.1-1.5 pt); a thicker bar is decoration.
_RULE_MAX_THICKNESS = 2.5
# Rules shorter than this are glyph parts, underline dashes or tick marks.
_RULE_MIN_LENGTH = 6.0
# Boundaries closer than this are one border (double rules, the two edges of a
# thin filled rectangle, rounding in the producer).
_SNAP = 2.5
# More distinct border lines than this on a page (after joining the segments of
# each line) is a drawing: a plot's ticks and grid, a map, a plan.
_MAX_RULES = 1500


@dataclass(frozen=True, slots=True)
class Rule:
    """An axis-aligned border segment: y (horizontal) or x (vertical) and its extent."""

    horizontal: bool
    pos: float
    start: float
    end: float


@dataclass(slots=True)
class Cell:
    row: int
    col: int
    row_span: int
    col_span: int
    text: str


@dataclass(slots=True)
class Table:
    page_no: int
    left: float
    top: float
    right: float
    bottom: float
    n_rows: int
    n_cols: int
    cells: list[Cell] = field(default_factory=list)
    header_rows: int = 1

    def contains(self, x: float, y: float, tol: float = 1.0) -> bool:
        return self.left - tol <= x <= self.right + tol and self.top - tol <= y <= self.bottom + tol

    def grid(self) -> list[list[str]]:
        """Row-major text grid, a spanning cell's text repeated in every slot it covers."""
        out = [["" for _ in range(self.n_cols)] for _ in range(self.n_rows)]
        for c in self.cells:
            for r in range(c.row, c.row + c.row_span):
                for k in range(c.col, c.col + c.col_span):
                    out[r][k] = c.text
        return out


# --------------------------------------------------------------------------- #
# Vector graphics (pypdfium2)
# --------------------------------------------------------------------------- #


def _is_rectangle(obj: Any) -> bool:
    """A path that outlines an upright rectangle: straight segments only, corners on
    two x and two y values (a diagonal line, an arrow or a curve is not a box)."""
    import pypdfium2.raw as pdfium_c

    n = pdfium_c.FPDFPath_CountSegments(obj)
    if n < 4 or n > 6:
        return False
    xs: list[float] = []
    ys: list[float] = []
    for i in range(n):
        seg = pdfium_c.FPDFPath_GetPathSegment(obj, i)
        if pdfium_c.FPDFPathSegment_GetType(seg) == pdfium_c.FPDF_SEGMENT_BEZIERTO:
            return False
        x, y = ctypes.c_float(), ctypes.c_float()
        if not pdfium_c.FPDFPathSegment_GetPoint(seg, ctypes.byref(x), ctypes.byref(y)):
            return False
        xs.append(x.value)
        ys.append(y.value)
    return len(cluster_values(xs, 0.5)) == 2 and len(cluster_values(ys, 0.5)) == 2


def _is_visible(obj: Any) -> bool:
    """Does the path put ink on a white page? Not when it is neither filled nor
    stroked, nor when it is only filled with white (the backdrop of a figure)."""
    import pypdfium2.raw as pdfium_c

    fill_mode, stroke = ctypes.c_int(), ctypes.c_int()
    if not pdfium_c.FPDFPath_GetDrawMode(obj, ctypes.byref(fill_mode), ctypes.byref(stroke)):
        return True
    if stroke.value:
        return True
    if fill_mode.value == pdfium_c.FPDF_FILLMODE_NONE:
        return False
    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    if not pdfium_c.FPDFPageObj_GetFillColor(
        obj, ctypes.byref(r), ctypes.byref(g), ctypes.byref(b), ctypes.byref(a)
    ):
        return True
    return a.value > 0 and min(r.value, g.value, b.value) < 250


def page_rules(page: Any) -> list[Rule]:
    """Border segments of a pdfium page, top-left origin, in points."""
    import pypdfium2.raw as pdfium_c

    height = page.get_height()
    out: list[Rule] = []
    for obj, _kind, bounds, _scale in walk_objects(page, {pdfium_c.FPDF_PAGEOBJ_PATH}):
        left, bottom, right, top = bounds
        w, h = right - left, top - bottom
        # Too short to be a rule either way; only then ask pdfium how it is drawn.
        if max(w, h) < _RULE_MIN_LENGTH or not _is_visible(obj):
            continue
        y0, y1 = height - top, height - bottom  # to a top-left origin
        if h <= _RULE_MAX_THICKNESS and w >= _RULE_MIN_LENGTH:
            out.append(Rule(True, (y0 + y1) / 2, left, right))
        elif w <= _RULE_MAX_THICKNESS and h >= _RULE_MIN_LENGTH:
            out.append(Rule(False, (left + right) / 2, y0, y1))
        elif w >= _RULE_MIN_LENGTH and h >= _RULE_MIN_LENGTH and _is_rectangle(obj):
            # A rectangle (cell shading or a drawn box): its four edges.
            out += [
                Rule(True, y0, left, right),
                Rule(True, y1, left, right),
                Rule(False, left, y0, y1),
                Rule(False, right, y0, y1),
            ]
    return out


# --------------------------------------------------------------------------- #
# Shared helpers
# --------------------------------------------------------------------------- #


def join_words(words: Sequence[Word]) -> str:
    """Words of one cell as text: visual lines top to bottom; inside a line, stream
    order, or right to left for a right-to-left line (producers write Arabic and
    Hebrew words in visual order, left to right, as often as in reading order)."""
    if not words:
        return ""
    rows: list[list[Word]] = []
    for w in sorted(words, key=lambda w: w.cy):
        if rows:
            last = rows[-1]
            ref = statistics.median(x.cy for x in last)
            hr = statistics.median(x.height for x in last)
            h = min(w.height, hr)
            # A small glyph in the row's band, down to its descenders (an underscore, a
            # low comma), is of the row however far its centre sits from the letters'.
            inside = (
                w.height <= hr
                and w.top >= min(x.top for x in last) - 0.4 * hr
                and w.bottom <= max(x.bottom for x in last) + 0.4 * hr
            )
            if abs(w.cy - ref) <= 0.5 * h or inside:
                last.append(w)
                continue
        rows.append([w])

    def pieces(row: list[Word]) -> list[str]:
        """The row's words in reading order; words that touch at an underscore
        ("DATABASE", "_", "URL": a browser's runs of one identifier) are one piece. Only
        there: Korean word spaces can be narrower than the gap this allows."""
        if is_rtl(" ".join(w.text for w in row)):
            return [w.text for w in visual_to_logical(row, lambda w: w.text, lambda w: w.cx)]
        out: list[str] = []
        prev: Word | None = None
        for w in sorted(row, key=lambda w: w.order):
            if prev is not None and (w.text.startswith("_") or out[-1].endswith("_")):
                h = max(w.height, prev.height)
                touching = -0.05 * h <= w.left - prev.right <= 0.1 * h
            else:
                touching = False
            if touching:
                out[-1] += w.text.strip()
            else:
                out.append(w.text)
            prev = w
        return out

    return join_pieces(piece for row in rows for piece in pieces(row))


def _cell_like(texts: Sequence[str]) -> bool:
    """Filled cells that read like table cells: a few words each, not paragraphs."""
    filled = [t for t in texts if t.strip()]
    if len(filled) < 4:
        return False
    # A CJK character counts as a word (as word processors count them): Chinese prose
    # has no spaces, so splitting on spaces alone read a paragraph as one "word".
    n_words = [len(t.split()) + sum(1 for ch in t if is_cjk(ch)) for t in filled]
    # A cell of a real table rarely holds a paragraph; a "table" whose cells
    # average more than ~two lines of prose is a boxed text layout.
    return statistics.mean(n_words) <= 20 and max(n_words) <= 80


# --------------------------------------------------------------------------- #
# Ruled tables
# --------------------------------------------------------------------------- #


def _merge_collinear(rules: Sequence[Rule]) -> list[Rule]:
    """Join segments on the same line that touch or overlap (a border drawn per cell)."""
    out: list[Rule] = []
    for horizontal in (True, False):
        group = sorted((r for r in rules if r.horizontal == horizontal), key=lambda r: r.pos)
        # Snap each position to the mean of its cluster (positions within _SNAP).
        clusters = cluster(group, lambda r: r.pos, _SNAP)
        snapped = sorted(
            (sum(x.pos for x in c) / len(c), r.start, r.end) for c in clusters for r in c
        )
        for pos, start, end in snapped:
            last = out[-1] if out else None
            if (
                last is not None
                and last.horizontal == horizontal
                and last.pos == pos
                and start <= last.end + _SNAP
            ):
                out[-1] = Rule(horizontal, pos, last.start, max(last.end, end))
            else:
                out.append(Rule(horizontal, pos, start, end))
    return out


def _components(rules: Sequence[Rule]) -> list[list[Rule]]:
    """Groups of rules connected by crossings or touching ends."""
    sets = DisjointSets(len(rules))
    hs = [i for i, r in enumerate(rules) if r.horizontal]
    vs = [i for i, r in enumerate(rules) if not r.horizontal]
    for i in hs:
        h = rules[i]
        for j in vs:
            v = rules[j]
            if (
                h.start - _SNAP <= v.pos <= h.end + _SNAP
                and v.start - _SNAP <= h.pos <= v.end + _SNAP
            ):
                sets.union(i, j)
    return [[rules[i] for i in group] for group in sets.groups()]


def _covered(rules: Sequence[Rule], pos: float, lo: float, hi: float) -> bool:
    """Is there a rule at pos covering most of [lo, hi]?"""
    need = 0.5 * (hi - lo)
    total = 0.0
    for r in rules:
        if abs(r.pos - pos) <= _SNAP:
            total += max(0.0, min(r.end, hi) - max(r.start, lo))
    return total >= need


def _grid_table(
    page_no: int,
    words: Sequence[Word],
    xs: list[float],
    ys: list[float],
    v_rules: Sequence[Rule],
    h_rules: Sequence[Rule],
) -> Table | None:
    """Place words into the grid xs × ys; missing borders merge cells into spans."""

    # Drop rows and columns that hold no word: spacing strips, double borders.
    def occupied(cuts: list[float], across: list[float], rows: bool) -> list[float]:
        """``cuts`` without the boundaries of empty strips (an empty strip joins the next);
        ``across`` bounds the other axis."""
        keep = [cuts[0]]
        for i in range(1, len(cuts)):
            lo, hi = keep[-1], cuts[i]
            has = any(
                lo <= (w.cy if rows else w.cx) < hi
                and across[0] <= (w.cx if rows else w.cy) <= across[-1]
                for w in words
            )
            if has or i == len(cuts) - 1:
                keep.append(hi)
        return keep

    ys = occupied(ys, xs, rows=True)
    xs = occupied(xs, ys, rows=False)
    n_rows, n_cols = len(ys) - 1, len(xs) - 1
    if n_rows < 2 or n_cols < 2:
        return None

    # Union neighbouring grid slots that no border separates.
    sets = DisjointSets(n_rows * n_cols)
    for r in range(n_rows):
        for c in range(n_cols):
            if c + 1 < n_cols and not _covered(v_rules, xs[c + 1], ys[r], ys[r + 1]):
                sets.union(r * n_cols + c, r * n_cols + c + 1)
            if r + 1 < n_rows and not _covered(h_rules, ys[r + 1], xs[c], xs[c + 1]):
                sets.union(r * n_cols + c, (r + 1) * n_cols + c)
    spans: list[list[tuple[int, int]]] = []
    for group in sets.groups():
        slots = [divmod(i, n_cols) for i in group]
        rows = {r for r, _ in slots}
        cols = {c for _, c in slots}
        if len(slots) == len(rows) * len(cols):
            spans.append(slots)
        else:  # not a rectangle: keep the slots apart
            spans += [[s] for s in slots]

    buckets: dict[tuple[int, int], list[Word]] = {}
    for w in words:
        if not (xs[0] <= w.cx <= xs[-1] and ys[0] <= w.cy <= ys[-1]):
            continue
        r = max(i for i in range(n_rows) if ys[i] <= w.cy) if w.cy >= ys[0] else 0
        c = max(i for i in range(n_cols) if xs[i] <= w.cx) if w.cx >= xs[0] else 0
        buckets.setdefault((r, c), []).append(w)

    cells: list[Cell] = []
    for slots in spans:
        r0 = min(r for r, _ in slots)
        c0 = min(c for _, c in slots)
        r1 = max(r for r, _ in slots)
        c1 = max(c for _, c in slots)
        inside = [w for s in slots for w in buckets.get(s, [])]
        cells.append(Cell(r0, c0, r1 - r0 + 1, c1 - c0 + 1, join_words(inside)))
    # The whole grid one cell, or every cell spanning a full row: a box, not a table.
    if all(c.col_span == n_cols for c in cells) or all(c.row_span == n_rows for c in cells):
        return None
    if not _cell_like([c.text for c in cells]):
        return None
    filled_rows = {r for c in cells if c.text for r in range(c.row, c.row + c.row_span)}
    if len(filled_rows) < 2:
        return None
    cells.sort(key=lambda c: (c.row, c.col))
    # A top-row cell spanning several columns heads a group of sub-headers in
    # the rows below it: the header then reaches as deep as the top-row cells do.
    top = [c for c in cells if c.row == 0]
    header = 1
    if any(c.col_span > 1 for c in top):
        header = min(max(c.row_span for c in top), n_rows - 1)
    return Table(page_no, xs[0], ys[0], xs[-1], ys[-1], n_rows, n_cols, cells, header)


# A table nested in a cell sits a cell's padding inside the cell's borders: its own
# side borders run parallel to the outer ones, this close, over part of their length.
_CELL_PADDING = 12.0


def _without_nested_grids(hs: list[Rule], vs: list[Rule]) -> tuple[list[Rule], list[Rule]]:
    """The rules of a grid without those of tables drawn inside its cells.

    A nested table's borders join the outer table's rules into one drawing, and its
    columns would become columns of the whole table, the outer cells above and below
    them spanning (their text repeated in every column). Its box is found by its two
    side borders: each runs beside a longer outer border, within a cell's padding, over
    the same rows. The rules inside that box are dropped; its words stay in the outer
    cell, as one cell's text."""
    boxes: list[tuple[float, float, float, float]] = []

    def inset(v: Rule) -> bool:
        return any(
            u is not v
            and 0 < abs(u.pos - v.pos) <= _CELL_PADDING
            and u.start <= v.start + _SNAP
            and u.end >= v.end - _SNAP
            and (u.end - u.start) - (v.end - v.start) >= 2 * _SNAP
            for u in vs
        )

    sides = sorted((v for v in vs if inset(v)), key=lambda v: v.pos)
    for a, b in itertools.combinations(sides, 2):
        if abs(a.start - b.start) <= _SNAP and abs(a.end - b.end) <= _SNAP:
            boxes.append((a.pos, min(a.start, b.start), b.pos, max(a.end, b.end)))
    if not boxes:
        return hs, vs

    def inside(r: Rule) -> bool:
        for left, top, right, bottom in boxes:
            # A rule's position runs across its direction, its extent along it.
            across, along = ((top, bottom), (left, right))
            if not r.horizontal:
                across, along = along, across
            if (
                across[0] - _SNAP <= r.pos <= across[1] + _SNAP
                and r.start >= along[0] - _SNAP
                and r.end <= along[1] + _SNAP
            ):
                return True
        return False

    return [h for h in hs if not inside(h)], [v for v in vs if not inside(v)]


def find_ruled_tables(page_no: int, words: Sequence[Word], rules: Sequence[Rule]) -> list[Table]:
    """Tables whose cells are delimited by drawn borders."""
    merged = _merge_collinear(rules)
    if len(merged) > _MAX_RULES:
        return []  # a drawing (chart, map, plan), not a page of tables
    tables: list[Table] = []
    for comp in _components(merged):
        hs, vs = _without_nested_grids(
            [r for r in comp if r.horizontal], [r for r in comp if not r.horizontal]
        )
        if not hs or not vs:
            continue
        left = min([h.start for h in hs] + [v.pos for v in vs])
        right = max([h.end for h in hs] + [v.pos for v in vs])
        top = min([v.start for v in vs] + [h.pos for h in hs])
        bottom = max([v.end for v in vs] + [h.pos for h in hs])
        if right - left < 3 * _RULE_MIN_LENGTH or bottom - top < 2 * _RULE_MIN_LENGTH:
            continue
        xs = cluster_values([left, right, *(v.pos for v in vs)], _SNAP)
        ys = cluster_values([top, bottom, *(h.pos for h in hs)], _SNAP)
        inside = [w for w in words if left <= w.cx <= right and top <= w.cy <= bottom]
        if len(inside) < 4:
            continue
        # Borders at the outside are implied: the table's box closes the grid.
        table = _grid_table(page_no, inside, xs, ys, vs, hs)
        if table is not None:
            tables.append(table)
    return _drop_nested(tables)


def _drop_nested(tables: list[Table]) -> list[Table]:
    """Of overlapping tables (a grid inside a drawn frame), keep the larger one."""
    out: list[Table] = []
    for t in sorted(tables, key=lambda t: -(t.right - t.left) * (t.bottom - t.top)):
        if any(
            t.left < o.right and o.left < t.right and t.top < o.bottom and o.top < t.bottom
            for o in out
        ):
            continue
        out.append(t)
    return out


# A gap wider than about one em between words on a row separates table cells:
# word spaces are a quarter to a half em, even in loosely justified lines.
_CELL_GAP = 1.0
# Cells of a table found from alignment alone hold a few words; anything wordier
# is prose laid out in columns, a list with hanging markers, or a form.
_ALIGNED_MEAN_WORDS = 4.0
_ALIGNED_MAX_WORDS = 10
# A section number of two or more levels ("1.3", "2.4.1."): LaTeX sets it a quad
# before the heading's title, so the heading reads as a row of two cells.
_SUBSECTION_NUMBER = re.compile(r"\d{1,2}(?:\.\d{1,2}){1,4}\.?")


@dataclass(slots=True)
class _Row:
    words: list[Word]
    top: float
    bottom: float
    height: float
    segments: list[list[Word]]


def _visual_rows(words: Sequence[Word]) -> list[_Row]:
    """Words grouped into rows by vertical position, each row split into segments
    at gaps wider than a word space."""
    groups: list[list[Word]] = []
    sum_cy = sum_h = 0.0  # running sums of the current group
    for w in sorted(words, key=lambda w: w.cy):
        if groups:
            g = groups[-1]
            ref, h = sum_cy / len(g), min(w.height, sum_h / len(g))
            if abs(w.cy - ref) <= 0.4 * h:
                g.append(w)
                sum_cy += w.cy
                sum_h += w.height
                continue
        groups.append([w])
        sum_cy, sum_h = w.cy, w.height
    rows: list[_Row] = []
    for g in groups:
        g.sort(key=lambda w: w.left)
        h = statistics.median(w.height for w in g)
        segs: list[list[Word]] = [[g[0]]]
        for w in g[1:]:
            if w.left - segs[-1][-1].right > _CELL_GAP * h:
                segs.append([w])
            else:
                segs[-1].append(w)
        rows.append(_Row(g, min(w.top for w in g), max(w.bottom for w in g), h, segs))
    return rows


def _corridors(rows: Sequence[_Row], left: float, right: float, allow: int) -> list[float]:
    """x positions of vertical white corridors crossing the rows (column separators).

    A corridor is an x range that no segment covers in any row, except in at most
    ``allow`` rows (a header cell spanning several columns).
    """
    h = statistics.median(r.height for r in rows)
    events: list[tuple[float, int]] = []
    for r in rows:
        for seg in r.segments:
            events += [(seg[0].left, 1), (seg[-1].right, -1)]
    events.sort()
    # Coverage as pieces (x0, x1, rows covering), then maximal runs of pieces
    # covered by at most `allow` rows.
    pieces: list[tuple[float, float, int]] = []
    depth = 0
    x_prev = left
    for x, d in events:
        if x > x_prev:
            pieces.append((x_prev, x, depth))
        depth += d
        x_prev = max(x_prev, x)
    cuts: list[float] = []
    run: list[tuple[float, float, int]] = []
    for piece in [*pieces, (right, right, len(rows) + 1)]:
        if piece[2] <= allow and left < piece[0] and piece[1] < right:
            run.append(piece)
            continue
        if run and run[-1][1] - run[0][0] >= 0.5 * h:
            clear = [p for p in run if p[2] == 0]
            best = max(clear, key=lambda p: p[1] - p[0]) if clear else None
            if best is not None and best[1] - best[0] >= 0.25 * h:
                cuts.append((best[0] + best[1]) / 2)
            else:
                cuts.append((run[0][0] + run[-1][1]) / 2)
        run = []
    return cuts


def _stream_split(rows: Sequence[_Row], cuts: Sequence[float]) -> float | None:
    """A cut with all words on one side before all words on the other in the content
    stream: two page columns (or two pages of a spread) side by side, whose lines
    merely share baselines. A table's rows interleave its columns in the stream."""
    words = [w for r in rows for w in r.words]
    for cut in cuts:
        a = [w.order for w in words if w.cx < cut]
        b = [w.order for w in words if w.cx >= cut]
        if a and b and (max(a) < min(b) or max(b) < min(a)):
            return cut
    return None


def _aligned_table(page_no: int, rows: list[_Row], depth: int = 0) -> list[Table]:
    left = min(r.segments[0][0].left for r in rows)
    right = max(r.segments[-1][-1].right for r in rows)
    allow = 1 if len(rows) >= 4 else 0
    cuts = _corridors(rows, left, right, allow)
    n_cols = len(cuts) + 1
    if n_cols < 2 or n_cols > 20:
        return []
    split = _stream_split(rows, cuts)
    if split is not None:
        if depth >= 4:
            return []
        words = [w for r in rows for w in r.words]
        return [
            t
            for part in ([w for w in words if w.cx < split], [w for w in words if w.cx >= split])
            for t in find_aligned_tables(page_no, part, depth=depth + 1)
        ]
    words = [w for r in rows for w in r.words]
    if sum(len(w.text) for w in words if is_mono_face(w.font)) * 2 > sum(
        len(w.text) for w in words
    ):
        # Preformatted text: code and listings align with spaces; keep them as text.
        return []
    table = _aligned_grid(page_no, rows, cuts)
    if table is not None and _is_list(table):
        return []
    return [table] if table is not None else []


def _is_list(table: Table) -> bool:
    """A first column of nothing but bullets or numbers: a list with hanging markers."""
    first = [c.text for c in table.cells if c.col == 0 and c.text]
    return bool(first) and all(MARKER.match(t) for t in first)


def _aligned_grid(page_no: int, rows: list[_Row], cuts: list[float]) -> Table | None:
    left = min(r.segments[0][0].left for r in rows)
    right = max(r.segments[-1][-1].right for r in rows)
    n_cols = len(cuts) + 1
    bounds = [left - 1, *cuts, right + 1]

    def col_of(x: float) -> int:
        return max(i for i in range(n_cols) if bounds[i] <= x)

    # Cells per row: each segment goes to the columns it covers.
    grid: list[dict[int, tuple[int, list[Word]]]] = []
    for r in rows:
        cells: dict[int, tuple[int, list[Word]]] = {}
        for seg in r.segments:
            c0, c1 = col_of(seg[0].left), col_of(seg[-1].right)
            if c0 in cells:
                prev_span, prev_words = cells[c0]
                cells[c0] = (max(prev_span, c1 - c0 + 1), prev_words + seg)
            else:
                cells[c0] = (c1 - c0 + 1, list(seg))
        grid.append(cells)

    # A row that only continues cells of the row above (a wrapped cell: empty
    # first column, tight leading, nothing in a column the row above left empty)
    # joins that row.
    gaps = [b.top - a.bottom for a, b in itertools.pairwise(rows)]
    typical_gap = statistics.median(gaps) if gaps else 0.0
    merged: list[dict[int, tuple[int, list[Word]]]] = []
    for i, cells in enumerate(grid):
        if (
            merged
            and 0 not in cells
            and set(cells) <= set(merged[-1])
            and gaps[i - 1] < min(0.6 * rows[i].height, 0.75 * typical_gap)
        ):
            for c, (span, ws) in cells.items():
                span0, ws0 = merged[-1][c]
                merged[-1][c] = (max(span0, span), ws0 + ws)
            continue
        merged.append(dict(cells))

    texts = [join_words(ws) for cells in merged for _, ws in cells.values()]
    n_words = [len(t.split()) for t in texts if t]
    if not n_words or statistics.mean(n_words) > _ALIGNED_MEAN_WORDS:
        return None
    if max(n_words) > _ALIGNED_MAX_WORDS:
        return None
    full_rows = sum(1 for cells in merged if len(cells) >= 2)
    if full_rows < 3 or full_rows * 2 < len(merged):
        return None
    used = {c for cells in merged for c in cells}
    if any(sum(1 for cells in merged if c in cells) < 2 for c in range(n_cols)) or len(used) < 2:
        return None
    out: list[Cell] = []
    for ri, cells in enumerate(merged):
        taken: set[int] = set()
        for c in sorted(cells):
            if c in taken:
                continue
            span, ws = cells[c]
            span = max(1, min(span, n_cols - c))
            taken.update(range(c, c + span))
            out.append(Cell(ri, c, 1, span, join_words(ws)))
    top = min(r.top for r in rows)
    bottom = max(r.bottom for r in rows)
    return Table(page_no, left - 1, top - 1, right + 1, bottom + 1, len(merged), n_cols, out, 1)


def find_aligned_tables(page_no: int, words: Sequence[Word], depth: int = 0) -> list[Table]:
    """Tables without vertical borders: columns from gaps aligned over several rows.

    A run of consecutive rows split into several segments, with at most one
    unsplit row between two split ones, whose gaps line up into common white
    corridors, with short cells.
    """
    if len(words) < 6:
        return []
    rows = _visual_rows(words)
    runs: list[list[_Row]] = []
    current: list[_Row] = []
    pending: list[_Row] = []  # one unsplit row that may sit inside a table
    for r in rows:
        close = bool(current) and r.top - (pending or current)[-1].bottom <= 2.0 * r.height
        if len(r.segments) >= 2:
            if current and close:
                current += [*pending, r]
            else:
                if len(current) >= 3:
                    runs.append(current)
                current = [r]
            pending = []
        elif current and close and not pending:
            pending = [r]
        else:
            if len(current) >= 3:
                runs.append(current)
            current, pending = [], []
    if len(current) >= 3:
        runs.append(current)
    runs = [run for run in map(_without_edge_headings, runs) if len(run) >= 3]
    return [t for run in runs for t in _aligned_table(page_no, run, depth)]


def _row_size(row: _Row) -> float:
    """The points a row is set at (its words' median), else its glyph-box height."""
    sizes = [w.pt for w in row.words if w.pt > 0]
    return statistics.median(sizes) if sizes else row.height


def _without_edge_headings(run: list[_Row]) -> list[_Row]:
    """The run without the section headings at its top and bottom edges: a heading set
    just above or below a table (pandoc's longtable under "1.3 Parameters") lines up
    with its columns as a two-cell row ("1.3" a quad before the title), or is set
    larger than every row of the table. A table whose first column numbers its rows
    ("1.1", "1.2", ...) keeps them: the number starts rows inside the run too."""

    def numbered(row: _Row) -> bool:
        return len(row.segments) == 2 and bool(
            _SUBSECTION_NUMBER.fullmatch(join_words(row.segments[0]))
        )

    size = statistics.median(_row_size(r) for r in run)

    def heading(row: _Row) -> bool:
        return numbered(row) or _row_size(row) > size * LARGER

    start, end = 0, len(run)
    while start < end and heading(run[start]):
        start += 1
    while end > start and heading(run[end - 1]):
        end -= 1
    if any(numbered(r) for r in run[start:end]):
        return run  # numbered rows inside the table: its first column, not headings
    return run[start:end]


def page_tables(
    page_no: int, words: Sequence[Word], rules: Sequence[Rule]
) -> tuple[list[Table], list[ParseWarning]]:
    """Tables of one text-layer page: drawn grids first, then aligned columns among the
    words outside them. The text layer (``parsers.pdf.textlayer``) runs it on each page
    as docling reads it, with that page's borders (``page_rules``), so no page's words
    are kept for it."""
    try:
        found = find_ruled_tables(page_no, words, rules)
        rest = [w for w in words if not any(t.contains(w.cx, w.cy) for t in found)]
        found += find_aligned_tables(page_no, rest)
    except Exception as exc:  # a table missed is text kept: never lose the document
        return [], [ParseWarning("pdf-tables", f"table detection: {exc!r}", page_no)]
    return found, []
