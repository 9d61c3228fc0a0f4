"""parsers: one file in, one ParsedDocument (structured Markdown + provenance) out.

``parse_file`` parses in this process (trusted input, tests, ``corpusflow parse``);
``ParserPool`` parses in killable child processes with a wall-clock timeout and a
memory cap (the refresh flow always uses it). Heavy libraries (docling, rapidocr,
unstructured) are imported only inside the backend modules.
"""

from parsers.errors import ParseError
from parsers.models import PARSER_VERSION, ParsedDocument, parser_fingerprint

__all__ = [
    "PARSER_VERSION",
    "ParseError",
    "ParsedDocument",
    "ParserPool",
    "parse_file",
    "parser_fingerprint",
]


def __getattr__(name: str) -> object:
    if name == "parse_file":
        from parsers.registry import parse_file

        return parse_file
    if name == "ParserPool":
        from parsers.isolation import ParserPool

        return ParserPool
    raise AttributeError(name)
