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
    ``MIN_SEGMENT_TOKENS``; pass ``tokenizer=chunker_tokenizer(...)``."""
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
