"""docling-core's HybridChunker with our tokenizer, imported without transformers.

``docling_core.transforms.chunker`` imports its HuggingFace tokenizer wrapper, which
imports transformers (and with it torch and scikit-learn: ~10 s of CPU) if it can. We
never use that wrapper: the chunker gets ``ChunkerTokenizer`` over the model's own
tokenizer (embedding.tokenizer), so the chunker package is imported through
``common.imports.import_without``.
"""

from __future__ import annotations

import functools
from typing import Any

from common.imports import import_without
from embedding.tokenizer import Tokenizer


def chunker_module() -> Any:
    """docling-core's hybrid_chunker module (imported once, without transformers)."""
    return import_without("docling_core.transforms.chunker.hybrid_chunker", "transformers")


def hybrid_chunker(**kwargs: Any) -> Any:
    """``HybridChunker(**kwargs)``; pass ``tokenizer=chunker_tokenizer(...)``."""
    return chunker_module().HybridChunker(**kwargs)


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
