"""corpusflow: batch ingestion of document corpora into versioned LanceDB tables.

The stage packages (``parsers``, ``chunking``, ``embedding``, ``storage``,
``sources``) do the work; ``flows`` wires them into Prefect flows; this package
holds the refresh engine that runs them, the search API and the CLI.
"""

from common.settings import Settings, load_settings

__version__ = "0.1.0"

__all__ = ["Settings", "__version__", "load_settings", "search"]


def search(
    query: str, settings: Settings | None = None, k: int = 5, mode: str = "hybrid"
) -> list[dict[str, object]]:
    """Top-k chunks for ``query`` from the active table (see corpusflow.api for filters)."""
    from corpusflow.api import search as _search

    return _search(query, settings=settings or load_settings(), k=k, mode=mode)  # type: ignore[arg-type]
