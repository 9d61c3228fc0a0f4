"""parsers: one file in, one ParsedDocument (structured Markdown + provenance) out.

``parse_file`` parses in this process (trusted input, tests); ``ParserPool``
parses in killable child processes with a wall-clock timeout and a memory cap
(the refresh flow and ``corpusflow parse`` use it). Heavy libraries (docling,
rapidocr, pypdfium2) are imported only inside the functions that use them.
"""

from parsers.errors import ParseError
from parsers.fingerprint import format_reads, parser_fingerprints
from parsers.isolation import ParserPool
from parsers.models import PARSER_VERSION, ParsedDocument, ParserFingerprints
from parsers.registry import parse_file

__all__ = [
    "PARSER_VERSION",
    "ParseError",
    "ParsedDocument",
    "ParserFingerprints",
    "ParserPool",
    "format_reads",
    "parse_file",
    "parser_fingerprints",
]
