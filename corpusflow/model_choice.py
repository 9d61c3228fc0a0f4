"""Which embedding model a run uses, and the checks made before any flow starts."""

from __future__ import annotations

import json

from common.errors import ConfigurationError
from common.settings import Settings
from embedding import ModelSpec
from sources import open_source
from storage import Store


def choose_model(settings: Settings, store: Store) -> ModelSpec:
    """The configured model; when none is configured, the active table's model (or the
    default preset, embedding.presets.DEFAULT_MODEL)."""
    from embedding import resolve_model

    embed = settings.embed
    if embed.model is None:
        active = store.pointer.active()
        if active is not None:
            prior = json.loads(active.model_json)
            embed = embed.model_copy(
                update={
                    "model": prior["name"],
                    "max_length": embed.max_length or prior["max_length"],
                }
            )
    return resolve_model(embed)


def preflight(source: str, settings: Settings) -> ModelSpec:
    """Fail fast, before any flow starts, on a missing source, an unloadable model or an
    LLM context provider without an endpoint."""
    open_source(source, settings.source).check()
    if settings.chunk.contextual == "llm" and not settings.llm.base_url:
        raise ConfigurationError(
            "chunk.contextual='llm' needs llm.base_url (CORPUSFLOW_LLM__BASE_URL), an "
            "OpenAI-compatible API root such as http://127.0.0.1:8080/v1"
        )
    return choose_model(settings, Store.from_settings(settings.storage))
