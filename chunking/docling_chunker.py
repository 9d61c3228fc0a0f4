"""docling-core's HybridChunker with our tokenizer, imported without transformers.

``docling_core.transforms.chunker`` imports its HuggingFace tokenizer wrapper, which
imports transformers (and with it torch and scikit-learn: ~10 s of CPU) if it can. We
never use that wrapper: the chunker gets ``ChunkerTokenizer`` over the model's own
tokenizer (embedding.tokenizer), so the chunker package is imported through
``common.imports.import_without``.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

from common.imports import import_without
from embedding.tokenizer import Tokenizer


def chunker_module() -> Any:
    """docling-core's hybrid_chunker module (imported once, without transformers)."""
    return import_without("docling_core.transforms.chunker.hybrid_chunker", "transformers")


# The smallest window semchunk is asked for. HybridChunker shrinks a section's window
# by its overflow until the headings leave almost nothing (1 token seen with a long
# Korean heading path at 64-token chunks); semchunk then recurses without end on one
# character that encodes to two tokens (RecursionError). A window this size holds any
# character; HybridChunker still sees the overflow, goes on shrinking its own count
# and drops the headings from that chunk once they fill it, as it was written to.
MIN_SEGMENT_TOKENS = 8


def top_left_header(item: Any) -> str:
    """The text of a table's top-left cell when it is a column header, else "".

    docling-core's triplet serializer writes each row as "row key, column = value": the
    row key is the row's first cell and the columns are named by the header row, so the
    header of the first column ("Name", "SKU", a spreadsheet's line item that the
    reader took for a header) appears in no triplet and would be lost to the index. A
    one-column table comes out as "first value = next value": its header is lost too."""
    grid = item.data.grid
    if not grid or not grid[0]:
        return ""
    cell = grid[0][0]
    return str(cell.text or "").strip() if cell.column_header else ""


@functools.cache
def _serializer_provider() -> Any:
    """docling-core's chunking serializers, its table serializer keeping the top-left
    header (``top_left_header``): written once before the table's triplets, unless the
    triplets hold it already."""
    chunker_module()
    from docling_core.transforms.chunker import hierarchical_chunker as hc
    from docling_core.transforms.serializer.common import create_ser_result

    class KeyedTripletTableSerializer(hc.TripletTableSerializer):
        def serialize(self, *, item: Any, doc_serializer: Any, doc: Any, **kwargs: Any) -> Any:
            res = super().serialize(item=item, doc_serializer=doc_serializer, doc=doc, **kwargs)
            key = top_left_header(item)
            if not key or not res.text or key in res.text:
                return res
            return create_ser_result(text=f"{key}. {res.text}", span_source=[res])

    class KeyedDocSerializer(hc.ChunkingDocSerializer):
        table_serializer: Any = KeyedTripletTableSerializer()

    class KeyedSerializerProvider(hc.ChunkingSerializerProvider):
        def get_serializer(self, doc: Any) -> Any:
            return KeyedDocSerializer(doc=doc)

    return KeyedSerializerProvider()


@functools.cache
def _chunker_class() -> type:
    base = chunker_module().HybridChunker
    # What it warns then is expected here, and its message holds the whole chunk.
    warnings.filterwarnings(
        "ignore", message="Headers and captions for this chunk", category=UserWarning
    )

    class FlooredHybridChunker(base):  # type: ignore[valid-type,misc]
        def segment(self, doc_chunk: Any, available_length: int, doc_serializer: Any) -> Any:
            return super().segment(
                doc_chunk, max(available_length, MIN_SEGMENT_TOKENS), doc_serializer
            )

    return FlooredHybridChunker


def hybrid_chunker(**kwargs: Any) -> Any:
    """docling-core's ``HybridChunker(**kwargs)``, its windows floored at
    ``MIN_SEGMENT_TOKENS``, its tables keeping their top-left header; pass
    ``tokenizer=chunker_tokenizer(...)``."""
    kwargs.setdefault("serializer_provider", _serializer_provider())
    return _chunker_class()(**kwargs)


def as_doc_chunk(chunk: Any) -> Any:
    """A chunk the HybridChunker yielded, as docling-core's ``DocChunk``."""
    chunker_module()
    from docling_core.transforms.chunker.hierarchical_chunker import DocChunk

    return DocChunk.model_validate(chunk)


@functools.cache
def _tokenizer_class() -> type:
    chunker_module()
    from docling_core.transforms.chunker.tokenizer.base import BaseTokenizer
    from pydantic import ConfigDict

    class ChunkerTokenizer(BaseTokenizer):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        tokenizer: Any
        max_tokens: int

        def count_tokens(self, text: str) -> int:
            return len(self.tokenizer.encode(text))

        def get_max_tokens(self) -> int:
            return self.max_tokens

        def get_tokenizer(self) -> Any:
            return self.tokenizer

    return ChunkerTokenizer


def chunker_tokenizer(tokenizer: Tokenizer, max_tokens: int) -> Any:
    """docling-core's tokenizer interface over ``tokenizer`` (counts without special
    tokens, as its HuggingFace wrapper does; semchunk gets ``tokenizer`` itself)."""
    return _tokenizer_class()(tokenizer=tokenizer, max_tokens=max_tokens)
