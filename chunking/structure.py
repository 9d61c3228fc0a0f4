"""Structure-aware chunking with docling-core's HybridChunker, plus parents and context."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from chunking.docling_chunker import (
    as_doc_chunk,
    chunker_module,
    chunker_tokenizer,
    hybrid_chunker,
)
from chunking.language import detect_languages
from chunking.models import Chunk, ChunkSet, Contextualizer, Parent, stable_id
from common.errors import ConfigurationError
from common.settings import ChunkSettings
from embedding.tokenizer import Tokenizer
from parsers.models import ParsedDocument

_SENTENCE = re.compile(r"(.+?[.!?。！？])(\s|$)", re.S)


class TokenCounter:
    """Counts tokens with the embedding model's own tokenizer."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` (original characters) within ``max_tokens``."""
        offsets = self.tokenizer.offsets(text)
        if len(offsets) <= max_tokens:
            return text
        return text[: offsets[max_tokens - 1][1]].rstrip()


def warm_up() -> None:
    """Import docling-core's chunker and load the language profiles now (~2 s of CPU),
    so the first document does not wait for them."""
    chunker_module()
    detect_languages(["warm-up"])


def _first_sentence(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    match = _SENTENCE.match(text)
    sentence = match.group(1) if match else text
    return sentence[:limit]


def _context_budget(max_tokens: int, settings: ChunkSettings) -> int:
    if settings.contextual == "none":
        return 0
    return max(16, min(96, max_tokens // 4))


def deterministic_context(
    title: str, headings: tuple[str, ...], section_text: str, chunk_text: str = ""
) -> str:
    """Title + heading path + the section's first sentence: a context with no LLM.

    The sentence is left out when the chunk itself contains it.
    """
    parts = [title.strip()] if title.strip() else []
    crumbs = [h for h in headings if h.strip() and h.strip() != title.strip()]
    if crumbs:
        parts.append(" > ".join(crumbs))
    summary = _first_sentence(section_text)
    head = ". ".join(parts)
    if summary and summary not in head and summary not in " ".join(chunk_text.split()):
        return f"{head}. {summary}" if head else summary
    return head


class DeterministicContext:
    """Title + heading path + the section's first sentence; no LLM, works offline."""

    def contexts(
        self, parsed: ParsedDocument, pieces: Sequence[tuple[str, tuple[str, ...], str]]
    ) -> list[str]:
        return [deterministic_context(parsed.title, h, parent, text) for text, h, parent in pieces]


def chunk_document(
    parsed: ParsedDocument,
    doc_id: str,
    tokenizer: Tokenizer,
    max_tokens: int,
    settings: ChunkSettings,
    contextualizer: Contextualizer | None = None,
) -> ChunkSet:
    """Children within ``max_tokens`` (embed text included) and their parent sections.

    ``contextualizer`` writes the context prefixes (default: DeterministicContext when
    ``settings.contextual`` is "deterministic"; required for "llm").
    """
    counter = TokenCounter(tokenizer)
    budget = _context_budget(max_tokens, settings)
    if settings.strategy == "fixed":
        no_headings: tuple[str, ...] = ()
        no_pages: tuple[int, ...] = ()
        pieces = [
            (text, no_headings, no_pages)
            for text in fixed_windows(
                parsed.markdown, counter, max_tokens - budget, settings.overlap_tokens
            )
        ]
        return _assemble(
            parsed, doc_id, pieces, counter, max_tokens, budget, settings, contextualizer
        )
    # Headings are carried in heading_path and the context prefix; the chunker's
    # own limit leaves room for the prefix so the embedded text fits the model.
    # repeat_table_header stays off: its table path looks for a Markdown header, but
    # the chunking serializer writes tables as "row, column = value" triplets, which
    # carry their column names already. With it on, a table larger than a chunk came
    # out as "| - |" plus pieces cut mid-row, and a long table went through a token
    # search over the whole remaining text for every piece (minutes for a 2,000-row
    # CSV at 160 tokens). semchunk splits the triplet text at its sentence ends.
    chunker = hybrid_chunker(
        tokenizer=chunker_tokenizer(tokenizer, max_tokens - budget),
        merge_peers=settings.merge_peers,
        repeat_table_header=False,
    )
    doc = parsed.to_docling()
    order = {item.self_ref: idx for idx, (item, _level) in enumerate(doc.iterate_items())}
    placed: list[tuple[int, str, tuple[str, ...], tuple[int, ...]]] = []
    for base_chunk in chunker.chunk(dl_doc=doc):
        dchunk = as_doc_chunk(base_chunk)
        text = dchunk.text.strip()
        if not text:
            continue
        headings = tuple(h.strip() for h in (dchunk.meta.headings or []) if h and h.strip())
        # Text before the first heading belongs to the document itself.
        headings = headings or ((parsed.title,) if parsed.title else ())
        pages = _pages(dchunk.meta.doc_items)
        first = min((order.get(i.self_ref, 0) for i in dchunk.meta.doc_items), default=0)
        placed.append((first, text, headings, pages))
    placed += _bare_headings(doc, placed)
    placed.sort(key=lambda p: p[0])  # stable: chunks of one item keep their order
    raw = [(text, headings, pages) for _o, text, headings, pages in placed]
    if not raw and parsed.markdown.strip():
        # Nothing the chunker keeps (e.g. only pictures with alt text): the Markdown
        # itself, so a document with text is never left without chunks.
        title = (parsed.title,) if parsed.title else ()
        raw = [
            (w, title, ()) for w in fixed_windows(parsed.markdown, counter, max_tokens - budget, 0)
        ]
    # HybridChunker counts text + headings; we embed context + text, so recheck.
    fixed: list[tuple[str, tuple[str, ...], tuple[int, ...]]] = []
    for text, headings, pages in raw:
        if counter.count(text) > max_tokens - budget:
            fixed.extend(
                (piece, headings, pages)
                for piece in _split_tokens(text, counter, max_tokens - budget)
            )
        else:
            fixed.append((text, headings, pages))

    return _assemble(parsed, doc_id, fixed, counter, max_tokens, budget, settings, contextualizer)


def _pages(items: Sequence[Any]) -> tuple[int, ...]:
    return tuple(sorted({p.page_no for item in items for p in getattr(item, "prov", [])}))


def _bare_headings(
    doc: Any, placed: Sequence[tuple[int, str, tuple[str, ...], tuple[int, ...]]]
) -> list[tuple[int, str, tuple[str, ...], tuple[int, ...]]]:
    """Headings no chunk carries (HybridChunker keeps headings only as metadata of
    the text under them): a heading-only document, title-only slides, a heading
    with nothing below it. Each becomes a chunk of its own, in document order, so
    a document with any text is never left without chunks and no title is lost."""
    from docling_core.types.doc import SectionHeaderItem, TitleItem

    carried = {h for _o, _t, headings, _p in placed for h in headings}
    texts = " ".join(t for _o, t, _h, _p in placed)
    out: list[tuple[int, str, tuple[str, ...], tuple[int, ...]]] = []
    for idx, (item, _level) in enumerate(doc.iterate_items()):
        if not isinstance(item, TitleItem | SectionHeaderItem):
            continue
        text = " ".join(item.text.split())
        if text and text not in carried and text not in texts:
            out.append((idx, text, (text,), _pages([item])))
            carried.add(text)
    return out


def fixed_windows(text: str, counter: TokenCounter, size: int, overlap: int) -> list[str]:
    """Consecutive windows of ``size`` tokens (``overlap`` shared), cut at token offsets."""
    offsets = counter.tokenizer.offsets(text)
    step = max(1, size - min(overlap, size - 1))
    out = []
    for start in range(0, len(offsets), step):
        window = offsets[start : start + size]
        piece = text[window[0][0] : window[-1][1]].strip()
        if piece:
            out.append(piece)
        if start + size >= len(offsets):
            break
    return out


def _assemble(
    parsed: ParsedDocument,
    doc_id: str,
    fixed: list[tuple[str, tuple[str, ...], tuple[int, ...]]],
    counter: TokenCounter,
    max_tokens: int,
    budget: int,
    settings: ChunkSettings,
    contextualizer: Contextualizer | None,
) -> ChunkSet:
    """Parents, contexts and ids for the (text, headings, pages) pieces of a document."""
    # Parents: consecutive children of one section, up to parent_max_tokens each
    # (or each child its own parent when parents are off).
    sections: list[list[int]] = []
    for idx, (_text, headings, _pages) in enumerate(fixed):
        if settings.parents and sections and fixed[sections[-1][-1]][1] == headings:
            sections[-1].append(idx)
        else:
            sections.append([idx])
    parent_of: dict[int, Parent] = {}
    parents: list[Parent] = []
    # Ids depend on the document, heading path, text and occurrence (the n-th identical
    # piece under the same headings), never on the position: an edit in one section
    # leaves the ids of every other section unchanged.
    seen: dict[tuple[object, ...], int] = {}

    def occurrence(*key: object) -> int:
        n = seen.get(key, 0)
        seen[key] = n + 1
        return n

    for members in sections:
        window: list[int] = []
        used = 0
        windows: list[list[int]] = []
        for idx in members:
            n = counter.count(fixed[idx][0])
            if window and used + n > settings.parent_max_tokens:
                windows.append(window)
                window, used = [], 0
            window.append(idx)
            used += n
        if window:
            windows.append(window)
        for win in windows:
            text = "\n\n".join(fixed[i][0] for i in win)
            headings = fixed[win[0]][1]
            pages = tuple(sorted({p for i in win for p in fixed[i][2]}))
            parent = Parent(
                parent_id=stable_id(
                    doc_id, "parent", headings, text, occurrence("parent", headings, text)
                ),
                doc_id=doc_id,
                text=text,
                heading_path=headings,
                page_numbers=pages,
            )
            parents.append(parent)
            for i in win:
                parent_of[i] = parent

    contexts = [""] * len(fixed)
    if budget:
        if contextualizer is None:
            if settings.contextual != "deterministic":
                raise ConfigurationError(
                    f"chunk.contextual={settings.contextual!r} needs a context provider"
                )
            contextualizer = DeterministicContext()
        raw_contexts = contextualizer.contexts(
            parsed,
            [(text, headings, parent_of[i].text) for i, (text, headings, _p) in enumerate(fixed)],
        )
        contexts = [counter.truncate(c, budget) for c in raw_contexts]
    langs = detect_languages([text for text, _h, _p in fixed])
    children: list[Chunk] = []
    for pos, (text, headings, pages) in enumerate(fixed):
        parent = parent_of[pos]
        context, n_tokens = _fit_context(contexts[pos], text, counter, max_tokens)
        children.append(
            Chunk(
                chunk_id=stable_id(doc_id, headings, text, occurrence("chunk", headings, text)),
                doc_id=doc_id,
                parent_id=parent.parent_id,
                position=pos,
                text=text,
                context=context,
                heading_path=headings,
                page_numbers=pages,
                n_tokens=n_tokens,
                lang=langs[pos],
            )
        )
    return ChunkSet(children=tuple(children), parents=tuple(parents))


def _fit_context(
    context: str, text: str, counter: TokenCounter, max_tokens: int
) -> tuple[str, int]:
    """``context`` cut so that context + "\n\n" + text fits ``max_tokens``, and the
    joined text's token count: the two counted apart can fit while the joined text
    does not (a SentencePiece tokenizer spends tokens on the blank line and
    re-segments across the join)."""
    while context:
        n = counter.count(f"{context}\n\n{text}")
        if n <= max_tokens:
            return context, n
        keep = counter.count(context) - (n - max_tokens)
        shorter = counter.truncate(context, keep).strip() if keep > 0 else ""
        context = shorter if len(shorter) < len(context) else ""
    return "", counter.count(text)


def _split_tokens(text: str, counter: TokenCounter, max_tokens: int) -> list[str]:
    """Last resort for an over-long piece: split at sentence ends, then at token windows."""
    pieces: list[str] = []
    current = ""
    for sentence in re.split(r"(?<=[.!?。！？])\s+", text):
        candidate = f"{current} {sentence}".strip()
        if counter.count(candidate) <= max_tokens:
            current = candidate
            continue
        if current:
            pieces.append(current)
        if counter.count(sentence) <= max_tokens:
            current = sentence
        else:
            ids = counter.tokenizer.encode(sentence)
            for start in range(0, len(ids), max_tokens):
                pieces.append(counter.tokenizer.decode(ids[start : start + max_tokens]))
            current = ""
    if current:
        pieces.append(current)
    return [p for p in pieces if p.strip()]
