"""sources: where documents come from, listed as a stream of SourceFile records."""

from sources.base import Source, open_source
from sources.local import LocalSource, SourceFile, doc_id_for, glob_match

__all__ = ["LocalSource", "Source", "SourceFile", "doc_id_for", "glob_match", "open_source"]
