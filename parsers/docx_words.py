"""Word documents with their words as the reader sees them.

docling's Word backend (DOCX, and DOC/RTF, which it converts to DOCX with LibreOffice)
loses words in two places:

- **Inline formatting splits words.** A paragraph's runs are grouped by formatting and
  every group becomes its own inline item with its whitespace stripped; the Markdown
  serializer then joins the items with spaces. "Foobar" with "oob" in bold comes out as
  ``F **oob** a **r**``: neither search nor a reader finds the word. Here a boundary
  between two groups that falls inside a word (a letter or digit on both sides, no
  whitespace between) joins the groups into one item: the word stays whole and the
  emphasis that would have split it is dropped. Groups separated by whitespace or
  punctuation keep their own formatting.
- **Ruby (phonetic guides) drops the base text.** A ``w:ruby`` run holds the base text
  ("東京") in ``w:rubyBase`` and the reading ("とうきょう") in ``w:rt``; python-docx reads
  neither, so a document set in ruby comes out empty. Each ruby is replaced by its base
  runs before docling reads the document (the reading, small type above the line, is left
  out like the reader's eye leaves it out).

- **Moved text (tracked changes) is dropped.** A move recorded with tracked changes holds
  the text at its new place in ``w:moveTo`` (and the old place in ``w:moveFrom``); docling
  reads the runs of an insertion (``w:ins``) but not of a move, so the moved text was in
  neither place. Each ``w:moveTo`` is replaced by its runs (the document as it reads with
  its changes accepted, as insertions are read and deletions left out).

``WordsDocxBackend`` is docling's own backend with those three steps added; everything else
(structure, lists, tables, hidden text) is docling's.
"""

from __future__ import annotations

from typing import Any

from docling.backend.msword_backend import MsWordDocumentBackend

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def _unwrap_ruby(root: Any) -> int:
    """Replace every ruby run under ``root`` by the runs of its base text; returns how many."""
    count = 0
    for ruby in list(root.iter(f"{{{_W}}}ruby")):
        run = ruby.getparent()
        if run is None or run.tag != f"{{{_W}}}r" or run.getparent() is None:
            continue
        base = ruby.find(f"{{{_W}}}rubyBase")
        parent = run.getparent()
        position = parent.index(run)
        parent.remove(run)
        for offset, base_run in enumerate(list(base) if base is not None else []):
            parent.insert(position + offset, base_run)
        count += 1
    return count


def _unwrap_moves(root: Any) -> int:
    """Replace every ``w:moveTo`` holding content under ``root`` by that content (the
    empty marker in a paragraph mark's properties stays); returns how many."""
    count = 0
    for move in list(root.iter(f"{{{_W}}}moveTo")):
        parent = move.getparent()
        if parent is None or len(move) == 0 or parent.tag == f"{{{_W}}}rPr":
            continue
        position = parent.index(move)
        parent.remove(move)
        for offset, child in enumerate(list(move)):
            parent.insert(position + offset, child)
        count += 1
    return count


def _inside_word(before: str, after: str) -> bool:
    return bool(before) and bool(after) and before[-1].isalnum() and after[0].isalnum()


def join_split_words(elements: list[Any], paragraph_text: str) -> list[Any]:
    """Join consecutive (text, format, hyperlink) groups whose boundary lies inside a word.

    ``elements`` are docling's stripped groups in paragraph order; ``paragraph_text`` is
    the paragraph's text as written, which tells whether whitespace separated two groups.
    A joined group keeps its format only where all its parts had the same one.
    """
    out: list[Any] = []
    cursor = 0
    previous_end = -1
    for text, fmt, link in elements:
        start = paragraph_text.find(text, cursor) if text else -1
        if start >= 0:
            cursor = start + len(text)
        adjoining = start >= 0 and start == previous_end
        if (
            out
            and adjoining
            and link is None
            and out[-1][2] is None
            and _inside_word(out[-1][0], text)
        ):
            prev_text, prev_fmt, _ = out[-1]
            out[-1] = (prev_text + text, prev_fmt if prev_fmt == fmt else None, None)
        else:
            out.append((text, fmt, link))
        previous_end = cursor if start >= 0 else -1
    return out


class WordsDocxBackend(MsWordDocumentBackend):
    """docling's Word backend with whole words across formatting runs, ruby base text and
    moved text."""

    @staticmethod
    def load_msword_file(*args: Any, **kwargs: Any) -> Any:
        docx_obj = MsWordDocumentBackend.load_msword_file(*args, **kwargs)
        if docx_obj is not None:
            for part in docx_obj.part.package.iter_parts():
                element = getattr(part, "_element", None)
                if element is not None:
                    _unwrap_ruby(element)
                    _unwrap_moves(element)
        return docx_obj

    def _get_paragraph_elements(self, paragraph: Any) -> Any:
        elements = super()._get_paragraph_elements(paragraph)
        if len(elements) < 2:
            return elements
        return join_split_words(elements, self._get_paragraph_text(paragraph))
