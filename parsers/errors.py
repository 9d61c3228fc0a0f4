"""Parse errors: a categorised DocumentError raised for one file."""

from common.errors import Category, DocumentError


class ParseError(DocumentError):
    """A file could not be parsed; ``category`` says why."""


__all__ = ["Category", "ParseError"]
