"""Contextual retrieval (Anthropic's method) through an OpenAI-compatible chat endpoint.

For every chunk the model writes a short context that situates it in its document;
the context is prefixed to the embedded and keyword-indexed text. A request carries
the document's outline (title and headings: the first, identical part of every request
for that document, so servers with prompt caching, llama.cpp's ``cache_prompt`` or
hosted prefix caches, pay for it once), then the chunk's section (its parent window)
and the chunk. Contexts are cached by exactly that input (chunk, section, outline,
prompt version, model): re-runs and embedding-model upgrades never ask again, and an
edit re-asks only for the chunks of the edited section. The trade-off (the model no
longer reads the whole document; a heading edit changes the outline and so re-asks
every chunk of the document) is in docs/architecture.md.

Retries (tenacity, exponential backoff) cover 429, 5xx, timeouts and connection
errors only; any other failure fails the document with category ``context``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from common.errors import (
    Category,
    ConfigurationError,
    DocumentError,
    TransientError,
    is_transient,
)
from common.settings import LLMSettings
from parsers.models import ParsedDocument

# Bump with any change to the request layout below (it is part of every cache key and of
# the chunker fingerprint, so cached contexts of another layout are never reused).
TEMPLATE_VERSION = "2"
SYSTEM = "You write short contexts that situate a chunk within its document, for search retrieval."
OUTLINE_TEMPLATE = "<document_outline>\n{outline}\n</document_outline>"
CHUNK_TEMPLATE = (
    "Here is the section of the document that holds the chunk\n<section>\n{section}\n</section>\n"
    "Here is the chunk we want to situate within the whole document\n<chunk>\n{chunk}\n</chunk>\n"
    "Please give a short succinct context to situate this chunk within the overall document for "
    "the purposes of improving search retrieval of the chunk. Answer only with the succinct "
    "context and nothing else."
)


def outline_of(parsed: ParsedDocument, max_chars: int) -> str:
    """The document's title and Markdown headings, in order (cut to ``max_chars``)."""
    lines = [f"Title: {parsed.title}"] if parsed.title else []
    lines += [ln.strip() for ln in parsed.markdown.splitlines() if ln.lstrip().startswith("#")]
    return "\n".join(lines)[:max_chars]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ContextCache(Protocol):
    """Persistent cache of generated contexts (storage implements it)."""

    def get_many(self, keys: Sequence[str]) -> Mapping[str, str]: ...

    def put_many(self, items: Mapping[str, str]) -> None: ...


def _usage(body: Any, payload: dict[str, Any], answer: Any) -> int:
    """Tokens one answered request cost: the server's ``usage.total_tokens`` (or prompt +
    completion), else the characters sent and received / 4."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if isinstance(usage, dict):
        total = usage.get("total_tokens")
        if isinstance(total, int) and total > 0:
            return total
        parts = [usage.get("prompt_tokens"), usage.get("completion_tokens")]
        if all(isinstance(p, int) for p in parts):
            return int(sum(parts))  # type: ignore[arg-type]
    sent = sum(len(str(m["content"])) for m in payload["messages"])
    return (sent + len(str(answer))) // 4 + 1


class LLMContextualizer:
    """Contextualizer backed by an OpenAI-compatible /chat/completions endpoint."""

    def __init__(self, settings: LLMSettings, cache: ContextCache | None = None) -> None:
        if not settings.base_url:
            raise ConfigurationError(
                "chunk.contextual='llm' needs llm.base_url (CORPUSFLOW_LLM__BASE_URL), an "
                "OpenAI-compatible API root such as http://127.0.0.1:8080/v1"
            )
        self.settings = settings
        self.cache = cache
        self.calls = 0  # requests sent (tests and benchmarks read it)
        # Tokens of answered requests (prompt + completion) as the server's ``usage``
        # reports them, else ~4 characters a token: the run's LLM spend (run.max_llm_tokens).
        self.tokens = 0
        self._lock = threading.Lock()
        headers = {}
        key = os.environ.get(settings.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self.client = httpx.Client(
            base_url=settings.base_url.rstrip("/"), headers=headers, timeout=settings.timeout_s
        )

    def cache_key(self, outline: str, section: str, chunk_text: str) -> str:
        """Keyed by exactly what the request carries, so only a changed input asks again."""
        s = self.settings
        parts = (_sha(chunk_text), _sha(section), _sha(outline), TEMPLATE_VERSION)
        blob = "|".join((*parts, s.prompt_version, s.model))
        return _sha(blob)

    def _section(self, section: str) -> str:
        # ~4 characters per token is close enough to bound the request size.
        return section[: self.settings.max_document_tokens * 4]

    def _ask(self, outline: str, section: str, chunk: str) -> str:
        payload: dict[str, Any] = {
            "model": self.settings.model,
            "temperature": 0,
            "max_tokens": self.settings.context_max_tokens,
            "cache_prompt": True,  # llama.cpp server: reuse the shared document prefix
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": OUTLINE_TEMPLATE.format(outline=outline)},
                {"role": "user", "content": CHUNK_TEMPLATE.format(section=section, chunk=chunk)},
            ],
        }
        for attempt in Retrying(
            retry=retry_if_exception(is_transient),
            stop=stop_after_attempt(self.settings.max_attempts),
            wait=wait_exponential(multiplier=0.5, max=20),
            reraise=True,
        ):
            with attempt:
                with self._lock:
                    self.calls += 1
                resp = self.client.post("/chat/completions", json=payload)
                if resp.status_code == 429 or resp.status_code >= 500:
                    raise TransientError(f"HTTP {resp.status_code}")
                if resp.status_code >= 400:
                    raise DocumentError(
                        Category.CONTEXT,
                        f"LLM endpoint refused the request: HTTP {resp.status_code} {resp.text[:200]}",
                    )
                try:
                    body = resp.json()
                    text = body["choices"][0]["message"]["content"]
                except (ValueError, KeyError, IndexError, TypeError) as exc:
                    raise DocumentError(
                        Category.CONTEXT, f"malformed LLM response: {resp.text[:200]}"
                    ) from exc
                used = _usage(body, payload, text)
                with self._lock:
                    self.tokens += used
                return " ".join(str(text).split())
        raise AssertionError("unreachable")  # pragma: no cover

    def contexts(
        self, parsed: ParsedDocument, pieces: Sequence[tuple[str, tuple[str, ...], str]]
    ) -> list[str]:
        outline = outline_of(parsed, self.settings.max_document_tokens * 4)
        sections = [self._section(section) for _t, _h, section in pieces]
        keys = [
            self.cache_key(outline, sections[i], text) for i, (text, _h, _s) in enumerate(pieces)
        ]
        cached = dict(self.cache.get_many(keys)) if self.cache is not None else {}
        todo = [(i, pieces[i][0]) for i, k in enumerate(keys) if k not in cached]
        if todo:
            try:
                with ThreadPoolExecutor(max_workers=self.settings.max_concurrency) as pool:
                    answers = list(
                        pool.map(lambda it: self._ask(outline, sections[it[0]], it[1]), todo)
                    )
            except DocumentError:
                raise
            except Exception as exc:
                raise DocumentError(
                    Category.CONTEXT,
                    f"LLM endpoint failed after retries: {type(exc).__name__}: {exc}",
                ) from exc
            fresh = {keys[i]: answer for (i, _t), answer in zip(todo, answers, strict=True)}
            if self.cache is not None:
                self.cache.put_many(fresh)
            cached.update(fresh)
        return [cached[k] for k in keys]
