"""Plain-text families as Markdown that keeps their structure, read by docling's MD backend.

- Markdown: YAML front matter goes to metadata; the fields a reader is shown (subtitle,
  author, abstract, description, summary) are also put at the top of the text, and the
  title and all its other text fields are when the body has none, so that a file holding
  only front matter is not dropped as empty.
- reStructuredText: underlined (and overlined) section titles become headings,
  levels in order of first appearance as in docutils; directives keep their text.
- Org: ``*`` outline headings, ``#+TITLE``, tables and source blocks.
- JSON, NDJSON/JSON lines, YAML: nested keys become headings, scalar fields
  ``key: value`` items, a list of flat records a table (so it is linearised
  row by row like any other table).
- Jupyter notebooks: Markdown cells as they are, code cells as fenced blocks in the
  kernel's language, their text outputs (streams, results; Markdown when a cell
  produced it) as blocks after them; images and HTML that has a text form are left out.
- XML: elements with children become headings (tag, plus an id/name/title
  attribute), leaf elements ``tag: text`` items. Parsed with entity expansion,
  DTD loading and network access off.

The registry hands these backends a UTF-8 file (``parsers.textcodec`` decoded it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from parsers.backend import TableBackend
from parsers.errors import Category, ParseError
from parsers.models import BackendResult

if TYPE_CHECKING:
    from common.settings import ParseSettings
    from parsers.formats import FormatSpec

_MAX_LEVEL = 6


# A reader: (decoded text, path) -> (Markdown, metadata, warnings).
_Reader = Callable[[str, Path], tuple[str, dict[str, Any], list[str]]]


def _read_markdown(text: str, path: Path) -> tuple[str, dict[str, Any], list[str]]:
    front = front_matter(text)
    if front is not None:
        meta, body = front
        return front_matter_markdown(meta, body) + body, meta, []
    return text, {}, []


def _read_rst(text: str, path: Path) -> tuple[str, dict[str, Any], list[str]]:
    return rst_to_markdown(text), {}, []


def _read_org(text: str, path: Path) -> tuple[str, dict[str, Any], list[str]]:
    markdown, title = org_to_markdown(text)
    return markdown, ({"title": title} if title else {}), []


def _read_json(text: str, path: Path) -> tuple[str, dict[str, Any], list[str]]:
    return _structured_to_markdown(_load(text, "json"), path.stem), {}, []


def _read_notebook(text: str, path: Path) -> tuple[str, dict[str, Any], list[str]]:
    return notebook_to_markdown(_load(text, "json"), path.stem)


def _read_yaml(text: str, path: Path) -> tuple[str, dict[str, Any], list[str]]:
    return _structured_to_markdown(_load(text, "yaml"), path.stem), {}, []


def _read_ndjson(text: str, path: Path) -> tuple[str, dict[str, Any], list[str]]:
    records, warnings = _ndjson(text)
    return _structured_to_markdown(records, path.stem), {}, warnings


def _read_xml(text: str, path: Path) -> tuple[str, dict[str, Any], list[str]]:
    return xml_to_markdown(path.read_bytes()), {}, []


_READERS: dict[str, _Reader] = {
    "markdown": _read_markdown,
    "rst": _read_rst,
    "org": _read_org,
    "json": _read_json,
    "notebook": _read_notebook,
    "yaml": _read_yaml,
    "ndjson": _read_ndjson,
    "xml": _read_xml,
}


class TextBackend(TableBackend):
    """Structured text as Markdown for docling's Markdown reader.

    Options: ``reader`` (``markdown``, ``rst``, ``org``, ``json``, ``notebook``, ``yaml``,
    ``ndjson``, ``xml``), ``parser`` (the name the result carries; ``text-<format>`` by default).
    """

    name = "parsers.text_backend:parse"

    def parse(self, path: Path, spec: FormatSpec, settings: ParseSettings) -> BackendResult:
        reader = _READERS.get(spec.option("reader"))
        if reader is None:
            raise ParseError(Category.UNSUPPORTED, f"text backend does not handle {spec.fmt}")
        text = path.read_text(encoding="utf-8", errors="replace")
        markdown, meta, warnings = reader(text, path)
        from parsers.docling_backend import convert_markdown

        result = convert_markdown(markdown, path.stem)
        result.parser = spec.option("parser", f"text-{spec.fmt}")
        result.metadata.update(meta)
        for w in warnings:
            result.warn(spec.fmt, w)
        return result


BACKEND = TextBackend()


# -- Markdown --------------------------------------------------------------------------

_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)


def front_matter(text: str) -> tuple[dict[str, Any], str] | None:
    """YAML front matter of Markdown (``---`` ... ``---`` at the top) and the rest.

    None when there is none or it is not a YAML mapping (then the text is kept as is).
    """
    import yaml

    match = _FRONT.match(text)
    if match is None:
        return None
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    if not isinstance(meta, dict):
        return None
    # Dates and other YAML-typed values are kept as their ISO text (metadata is JSON).
    return json.loads(json.dumps(meta, default=str)), text[match.end() :]


# Front matter fields that a rendered document shows its reader (pandoc's title block,
# the summary a site generator prints): they are text of the document, not only data.
# The title is the document's title (chunk context) already; it is a heading of the
# text only when the body has none.
_SHOWN = ("subtitle", "author", "authors", "abstract", "description", "summary")


def _strings(value: Any) -> list[str]:
    """The text in a front matter value: strings and numbers, in lists and mappings."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if value is None or isinstance(value, bool):
        return []
    text = str(value).strip()
    return [text] if text else []


def front_matter_markdown(meta: dict[str, Any], body: str) -> str:
    """Markdown for the front matter fields a reader is shown, to go before ``body``.

    Subtitle, authors, abstract, description and summary become paragraphs. When the body
    has no text at all, the title becomes a heading and every other field with text a
    ``key: value`` line as well: a file of front matter alone is a document with text,
    never an empty one.
    """
    keys = {str(k).lower(): k for k in meta}
    parts = [s for name in _SHOWN if name in keys for s in _strings(meta[keys[name]])]
    if not body.strip():
        title = " ".join(_strings(meta.get(keys["title"]))) if "title" in keys else ""
        shown = {keys[n] for n in (*_SHOWN, "title") if n in keys}
        rest = [(k, "; ".join(_strings(v))) for k, v in meta.items() if k not in shown]
        parts = ([f"# {title}"] if title else []) + parts + [f"{k}: {t}" for k, t in rest if t]
    return "".join(f"{p}\n\n" for p in parts)


# -- reStructuredText ------------------------------------------------------------------

_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+<>:._!$%&,;?@\\/|])\1{2,}\s*$")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_+")
_RST_ROLE = re.compile(r":[\w:+-]+:`([^`]+)`")
_RST_DIRECTIVE = re.compile(r"^\.\.\s+([\w:+-]+)::\s*(.*)$")


def rst_to_markdown(text: str) -> str:
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    styles: list[tuple[str, bool]] = []
    i = 0

    def level(style: tuple[str, bool]) -> int:
        if style not in styles:
            styles.append(style)
        return min(styles.index(style) + 1, _MAX_LEVEL)

    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        after = lines[i + 2] if i + 2 < len(lines) else ""
        over = _ADORNMENT.match(line)
        if over and nxt.strip() and _ADORNMENT.match(after) and after.strip()[0] == line.strip()[0]:
            out += ["", "#" * level((line.strip()[0], True)) + " " + nxt.strip(), ""]
            i += 3
            continue
        under = _ADORNMENT.match(nxt)
        if (
            line.strip()
            and not line.startswith((" ", "\t"))
            and not _ADORNMENT.match(line)
            and under
            and len(nxt.strip()) >= len(line.strip())
        ):
            out += ["", "#" * level((nxt.strip()[0], False)) + " " + line.strip(), ""]
            i += 2
            continue
        directive = _RST_DIRECTIVE.match(line.strip())
        if directive:
            name, arg = directive.groups()
            if name in ("code-block", "code", "sourcecode"):
                out.append("```")
                i += 1
                block: list[str] = []
                while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                    block.append(lines[i].strip())
                    i += 1
                out += [*_strip_blank(block), "```"]
                continue
            if arg and name not in ("image", "figure", "include", "toctree", "meta"):
                out.append(arg)
            elif name in ("note", "warning", "tip", "important", "attention", "caution"):
                out.append(f"**{name.capitalize()}:**")
            i += 1
            continue
        if line.strip().startswith(".. "):  # comments and link targets
            i += 1
            continue
        line = _RST_LINK.sub(r"\1", line)
        line = _RST_ROLE.sub(r"`\1`", line)
        out.append(line.replace("``", "`").rstrip())
        i += 1
    return "\n".join(out)


def _strip_blank(block: list[str]) -> list[str]:
    while block and not block[-1]:
        block.pop()
    return block


# -- Org -------------------------------------------------------------------------------

_ORG_HEADING = re.compile(r"^(\*+)\s+(?:(?:TODO|DONE|NEXT|WAITING)\s+)?(.*?)(?:\s+:[\w:@]+:)?\s*$")
_ORG_SEPARATOR = re.compile(r"^\s*\|[-+]+\|?\s*$")
_ORG_LINK = re.compile(r"\[\[([^\]]+)\](?:\[([^\]]+)\])?\]")


def org_to_markdown(text: str) -> tuple[str, str]:
    """(Markdown, document title from ``#+TITLE``)."""
    out: list[str] = []
    title = ""
    in_block = False
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip()
        upper = line.strip().upper()
        if upper.startswith("#+BEGIN_"):
            in_block = True
            out.append("```")
            continue
        if upper.startswith("#+END_"):
            in_block = False
            out.append("```")
            continue
        if in_block:
            out.append(line)
            continue
        if upper.startswith("#+TITLE:"):
            title = line.split(":", 1)[1].strip()
            out += [f"# {title}", ""]
            continue
        if line.startswith("#+") or line.startswith("# "):
            continue
        heading = _ORG_HEADING.match(line)
        if heading:
            depth = len(heading.group(1)) + (1 if title else 0)
            out += ["", "#" * min(depth, _MAX_LEVEL) + " " + heading.group(2), ""]
            continue
        if _ORG_SEPARATOR.match(line):
            cells = line.strip().strip("|").split("+")
            out.append("|" + "|".join("---" for _ in cells) + "|")
            continue
        line = _ORG_LINK.sub(lambda m: m.group(2) or m.group(1), line)
        out.append(line)
    return "\n".join(out), title


# -- JSON / YAML -----------------------------------------------------------------------


def _load(text: str, fmt: str) -> Any:
    try:
        if fmt == "json":
            return _json_values(text)
        import yaml

        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        return docs[0] if len(docs) == 1 else docs
    except (ValueError, RecursionError) as exc:
        raise ParseError(Category.CORRUPT, f"invalid {fmt.upper()}: {exc}"[:500]) from exc
    except Exception as exc:  # yaml.YAMLError and friends
        raise ParseError(Category.CORRUPT, f"invalid {fmt.upper()}: {exc}"[:500]) from exc


def _json_values(text: str) -> Any:
    """One JSON value, or a list of the values of a JSON stream: concatenated values
    (``{..}{..}``), whitespace- or newline-separated, as loggers and exports write them."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise
        first = exc
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    text = text.lstrip("\ufeff")
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos == len(text):
            return values
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{first}; as a JSON stream: {exc}") from exc
        values.append(value)


# -- Jupyter notebooks ---------------------------------------------------------------


def _lines(value: Any) -> str:
    """A notebook's multi-line string: a list of lines or one string."""
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return "" if value is None else str(value)


def _fence(body: str, info: str = "") -> str:
    """``body`` as a fenced block whose fence no line of it can close."""
    longest = max((len(m) for m in re.findall(r"^[ \t]*(`{3,})", body, re.M)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body.rstrip()}\n{fence}"


def _cell_output(output: dict[str, Any]) -> tuple[str, str]:
    """(text, kind) of one code-cell output: kind ``markdown`` for a Markdown result,
    ``text`` otherwise, ``""`` when it has no text form (an image alone)."""
    kind = output.get("output_type")
    if kind == "stream":
        return _lines(output.get("text")), "text"
    if kind == "error":
        trace = "\n".join(_lines(line) for line in output.get("traceback") or [])
        # Tracebacks carry ANSI colour codes.
        trace = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", trace)
        return trace or f"{output.get('ename', '')}: {output.get('evalue', '')}", "text"
    data = output.get("data") or {}
    if not isinstance(data, dict):
        return "", ""
    if not data and output.get("text"):  # nbformat 3 keeps a result's text here
        return _lines(output.get("text")), "text"
    if "text/markdown" in data:
        return _lines(data["text/markdown"]), "markdown"
    if "text/plain" in data:
        return _lines(data["text/plain"]), "text"
    return "", ""


def notebook_to_markdown(value: Any, title: str) -> tuple[str, dict[str, Any], list[str]]:
    """A Jupyter notebook (nbformat 4, or 3 with worksheets) as Markdown; JSON that is not
    a notebook is rendered as JSON. Returns (Markdown, metadata, warnings)."""
    if not isinstance(value, dict) or not (
        isinstance(value.get("cells"), list) or isinstance(value.get("worksheets"), list)
    ):
        return _structured_to_markdown(value, title), {}, ["not a Jupyter notebook: read as JSON"]
    cells = value.get("cells")
    if cells is None:  # nbformat 3
        sheets = value.get("worksheets") or []
        cells = [c for ws in sheets if isinstance(ws, dict) for c in ws.get("cells") or []]

    def mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
        found = parent.get(key)
        return found if isinstance(found, dict) else {}

    meta = mapping(value, "metadata")
    language = str(
        mapping(meta, "language_info").get("name")
        or mapping(meta, "kernelspec").get("language")
        or ""
    )
    out: list[str] = []
    images = 0
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        source = _lines(cell.get("source", cell.get("input")))
        kind = cell.get("cell_type")
        if kind == "markdown" or kind == "heading":  # v3 heading cells
            level = int(cell.get("level") or 0)
            out.append(f"{'#' * min(level, _MAX_LEVEL)} {source}" if level else source)
        elif kind == "code":
            if source.strip():
                out.append(_fence(source, language))
            for output in cell.get("outputs") or []:
                if not isinstance(output, dict):
                    continue
                text, how = _cell_output(output)
                if not text.strip():
                    data = output.get("data") or {}
                    images += any(str(k).startswith("image/") for k in data)
                    continue
                out.append(text if how == "markdown" else _fence(text))
        elif source.strip():  # raw cells
            out.append(source)
    warnings = [f"{images} image output(s) without text left out"] if images else []
    found: dict[str, Any] = {"notebook_language": language} if language else {}
    return "\n\n".join(part for part in out if part.strip()) + "\n", found, warnings


def _ndjson(text: str) -> tuple[list[Any], list[str]]:
    records: list[Any] = []
    bad: list[int] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            bad.append(no)
            records.append(line.strip())  # kept as text: never lose a line
    warnings = [f"lines {bad[:20]} are not JSON; kept as text"] if bad else []
    return records, warnings


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _fmt(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return " ".join(str(value).split())


def _cell(value: Any) -> str:
    return _fmt(value).replace("|", "\\|")


def _structured_to_markdown(value: Any, title: str) -> str:
    out: list[str] = [f"# {title}", ""]
    _render(value, 1, out)
    return "\n".join(out)


def _render(value: Any, level: int, out: list[str]) -> None:
    """Markdown for ``value`` under a heading of ``level`` (already written)."""
    if isinstance(value, dict):
        nested = []
        for key, item in value.items():
            if _scalar(item):
                out.append(f"- {_fmt(key)}: {_fmt(item)}")
            elif isinstance(item, list) and all(_scalar(v) for v in item):
                out.append(f"- {_fmt(key)}: {', '.join(_fmt(v) for v in item)}")
            else:
                nested.append((key, item))
        for key, item in nested:
            out += ["", "#" * min(level + 1, _MAX_LEVEL) + f" {_fmt(key)}", ""]
            _render(item, level + 1, out)
        out.append("")
    elif isinstance(value, list):
        if value and all(
            isinstance(v, dict) and all(_scalar(x) for x in v.values()) for v in value
        ):
            _table(value, out)
        else:
            for idx, item in enumerate(value, 1):
                if _scalar(item):
                    out.append(f"- {_fmt(item)}")
                    continue
                out += ["", "#" * min(level + 1, _MAX_LEVEL) + f" Item {idx}", ""]
                _render(item, level + 1, out)
            out.append("")
    else:
        out += [_fmt(value), ""]


def _table(records: list[dict[str, Any]], out: list[str]) -> None:
    columns: list[str] = []
    for rec in records:
        columns += [str(k) for k in rec if str(k) not in columns]
    out += ["", "| " + " | ".join(_cell(c) for c in columns) + " |"]
    out.append("|" + "|".join("---" for _ in columns) + "|")
    for rec in records:
        row = {str(k): v for k, v in rec.items()}
        out.append("| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |")
    out.append("")


# -- XML -------------------------------------------------------------------------------

_NAME_ATTRS = ("title", "name", "id", "key", "label")


def xml_to_markdown(data: bytes) -> str:
    from lxml import etree

    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, recover=True
    )
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise ParseError(Category.CORRUPT, f"invalid XML: {exc}"[:500]) from exc
    if root is None:
        raise ParseError(Category.CORRUPT, "invalid XML: no root element")
    out: list[str] = [f"# {_heading(root)}", ""]
    _xml_children(root, 1, out)
    return "\n".join(out)


def _local(tag: Any) -> str:
    return str(tag).rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _heading(elem: Any) -> str:
    name = _local(elem.tag)
    for attr in _NAME_ATTRS:
        if elem.get(attr):
            return f"{name}: {' '.join(elem.get(attr).split())}"
    return name


def _texts(chunks: Iterable[str | None]) -> str:
    return " ".join(" ".join(c.split()) for c in chunks if c and c.strip())


def _xml_children(elem: Any, level: int, out: list[str]) -> None:
    own = _texts([elem.text])
    if own:
        out += [own, ""]
    attrs = [(k, v) for k, v in elem.attrib.items() if _local(k) not in _NAME_ATTRS]
    for key, val in attrs:
        out.append(f"- @{_local(key)}: {_fmt(val)}")
    for child in elem:
        if not isinstance(child.tag, str):  # comments, processing instructions
            if child.tail and child.tail.strip():
                out += [_texts([child.tail]), ""]
            continue
        if len(child) == 0:
            text = _texts([child.text])
            child_attrs = ", ".join(f"{_local(k)}={v}" for k, v in child.attrib.items())
            label = _local(child.tag) + (f" ({child_attrs})" if child_attrs else "")
            if text or child_attrs:
                out.append(f"- {label}: {text}" if text else f"- {label}")
        else:
            out += ["", "#" * min(level + 1, _MAX_LEVEL) + f" {_heading(child)}", ""]
            _xml_children(child, level + 1, out)
        tail = _texts([child.tail])
        if tail:
            out += ["", tail, ""]
    out.append("")
