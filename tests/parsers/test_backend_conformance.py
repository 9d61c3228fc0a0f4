"""Every registered parser backend through the conformance suite (parsers.testing),
and the format table's invariants: one table and
fingerprints unchanged by the move to the Backend protocol."""

from __future__ import annotations

from pathlib import Path

from common.settings import ParseSettings
from parsers import parser_fingerprints
from parsers.backend import backends
from parsers.formats import FORMATS, FormatSpec
from parsers.testing import BackendConformance
from tests.helpers.format_samples import sample_file


class _Samples(BackendConformance):
    def sample(self, spec: FormatSpec, tmp_path: Path) -> Path | None:
        return sample_file(spec, tmp_path)


class TestDoclingBackend(_Samples):
    backend_target = "parsers.docling_backend:BACKEND"


class TestTextBackend(_Samples):
    backend_target = "parsers.text_backend:BACKEND"


class TestUnstructuredBackend(_Samples):
    backend_target = "parsers.unstructured_backend:BACKEND"


class TestPdfBackend(_Samples):
    backend_target = "parsers.pdf:PDF"


class TestImageBackend(_Samples):
    backend_target = "parsers.pdf:IMAGE"


class TestDrawingBackend(_Samples):
    backend_target = "parsers.drawing:DRAWING"


def test_every_backend_of_the_table_has_a_conformance_class() -> None:
    tested = {cls.backend_target for cls in _Samples.__subclasses__()}
    assert set(backends()) == tested


def test_every_format_is_read_by_some_backend() -> None:
    covered = set().union(*(b.supported_formats() for b in backends().values()))
    assert covered == {spec.fmt for spec in FORMATS}


# Fingerprints on main before the Backend protocol (default settings; the PDF one with
# the offline path and OCR off, which no machine's models change): the move must not
# re-parse anyone's corpus.
_BEFORE = {
    "asciidoc": "943a6625bc74370e",
    "csv": "f86b6fefe625b023",
    "doc": "0a6f8eb5ae806d62",
    "docx": "6c9e76d80fa746b7",
    "eml": "1c69785538a46796",
    "epub": "c79eb5f6ba3a9f9a",
    "heic": "c56c2decd641b26b",
    "html": "4d8faf75c2c8f621",
    "image": "a76d98da176ba5da",
    "json": "38cedb30427fa275",
    "latex": "919e7f51dcbbe279",
    "md": "8f449600d3de54c8",
    "mhtml": "0a20ba397439be5a",
    "msg": "c2c31d75678b98d7",
    "ndjson": "274d562ffeeb1638",
    "odp": "7f17011710459d8d",
    "ods": "750d2264366a0804",
    "odt": "13a0bce47b9ef863",
    "org": "31ea3cc2dbcc935d",
    "ppt": "7ad7890ad2558d1d",
    "pptx": "d1223703aebebc50",
    "rst": "2e48b8212fa6753e",
    "rtf": "542f4aeb92c972c4",
    "tsv": "a58eaa54354b5458",
    "txt": "b343b512242fe6a2",
    "vtt": "30d9ca4817a3360c",
    "xls": "72c54e15e9a6b82a",
    "xlsx": "c143d3ee86f3a207",
    "xml": "17f572e1bddcdb07",
    "yaml": "0647cf2b013502a5",
}
# Moved on purpose by issue #36 (tables continued on the next page are joined: PDF format
# version 3 and parse.join_continued_tables in the PDF backend's fingerprint); it was
# "bcf97a4d0441c86b". Every other format's fingerprint stays as it was.
# Moved again by issue #32 (fewer false headings: PDF format version 4); it was
# "051e83cfde3700b0". Moved again by issue #32 (a side heading is no table cell for what
# shares its row in the next text column: PDF format version 5); it was "279df43ddaf72576".
# Moved again by issue #32 (diagram labels, page numbers, formulas, bold lines of a paragraph
# and numbered list items are not headings: PDF format version 6); it was "2abe98a9b393f99f".
# Moved again by issue #32 (outline titles where their bookmarks point, a thin text layer
# kept beside OCR of its pictures: PDF format version 7); it was "7407bcc6859fd17d".
# Moved again by issue #32 (short lines the writer broke are paragraphs, headings over
# tables, identifiers whole in cells: PDF format version 8); it was "7e7ef928cd1dde5a".
# Moved again by issue #32 (a space where Chinese meets Latin with a gap on the page, a
# short line above a longer one ends its paragraph: PDF format version 9); it was
# "321d8abae84ae376". Moved again by issue #32 (the body is the prose, not the code
# listings: PDF format version 10); it was "cff94893f394bfa4". Moved again by issue #32 (a
# run of Latin letters too long for a word takes pdfium's spaces: PDF format version 11); it
# was "18bc7dfbe6a5dc6b". Moved again by issue #32 (bold lines a contents list names are the
# level the outline leaves out: PDF format version 12); it was "cadf2a78924aa58a". Moved again
# by issue #32 (a glyph mapped to all its forms is one character: PDF format version 13); it
# was "3eead295c465626a". Moved again by issue #32 (labelled lines are items of their own:
# PDF format version 14); it was "e3a7afd8582b1bce". Moved again by issue #32 (a size step in
# one face starts a block: PDF format version 15); it was "bc351870038aa615".
_BEFORE_PDF_OFFLINE_NO_OCR = "cd675f02f2beaf55"
# Moved on purpose by issue #32 (the text a viewer shows: Word headers, footers, notes and
# altChunk parts; PowerPoint layout/master shapes, SmartArt and speaker notes): docx, doc
# and rtf are format version 3, pptx and ppt version 2. They were docx "2797dd42a8191db4",
# doc "440b23a4a4882d23", rtf "419a6a7e0ad05749", pptx "c52430583ec26ac0" and ppt
# "22ab044ea13ae670".
# Moved on purpose by issue #32 (the stored number kept after a shown text that hides it,
# "3% (0.025)"): xlsx and xls format version 4. They were xlsx "ba07a9d925ef2452" and xls
# "32dd779ff90f03ff".
# Moved on purpose by issue #32 (Outlook .msg headers RFC 2047-decoded, empty recipients
# left out): msg format version 2. It was "060c1b28865a14c2".
# Moved on purpose by issue #32 (SmartArt on slide layouts and masters; OLE Packager and
# Acrobat objects read as the files they hold): docx 5, doc 5, rtf 5, pptx 4, ppt 4. They
# were docx "7ab89e61f9623bcd", doc "9d94c76a26665bb9", rtf "3fb9e6ebab2c3afa", pptx
# "0ceee87d45263063" and ppt "fcbba5918141542d".
# Moved on purpose by issue #32 (the front matter fields a reader is shown are text, and all
# of it when the body has none: pandoc's fb2/meta.markdown was `empty`): md format version 2.
# It was "2f86751ff04996cd".
# Moved on purpose by issue #32 (pandoc's test files: text moved with tracked changes read at
# its new place, docx/doc/rtf format version 6; OpenDocument list headers read, odt format
# version 2). They were docx "6923cca0de8155ee", doc "3bd41e41d60b8ddc", rtf
# "3313419b2b301479" and odt "b912a3befcb5fe5e".
# Moved on purpose by issue #32 (a slide's footer placeholder text read once per deck):
# pptx and ppt format version 5. They were pptx "5bacbbfbbda3d670" and ppt "25b01a5ba530cc34".

# Moved on purpose by issue #32 (Apache POI's test-data: table rows inside content controls
# read): docx, doc and rtf format version 7. They were docx "60e0ca42cb41a5b8", doc
# "e9db82ae61a41b56" and rtf "2bbc45ee749f76e1".
# Moved on purpose by issue #32 (conditional number formats, "[>999]#,"K""): xlsx and xls
# format version 5. They were xlsx "bb880e4b841e7bd3" and xls "43d37b9528849820".


def test_parser_fingerprints_did_not_move() -> None:
    now = parser_fingerprints(ParseSettings()).by_format
    assert {fmt: now[fmt] for fmt in _BEFORE} == _BEFORE
    offline = parser_fingerprints(ParseSettings(pdf_pipeline="offline", ocr=False))
    assert offline.of("pdf") == _BEFORE_PDF_OFFLINE_NO_OCR
