"""Full rebuild for a model change, beside the live table, then an atomic switch."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.states import State

from common.settings import Settings
from corpusflow.approval import RunRejected
from flows.refresh import ended_unapproved, run_refresh


@flow(name="corpusflow-reindex", log_prints=False)
def reindex_flow(
    source: str,
    settings_json: str,
    force_delete: bool = False,
    eval_path: str | None = None,
    eval_margin: float = 0.02,
    eval_mode: str = "hybrid",
) -> dict[str, Any] | State[Any]:
    """Build (or resume building) the table of the configured model from the parse cache,
    validate it, optionally check retrieval quality against the live table on a question
    set, and make it active. The previous table stays for rollback.

    The quality check is the engine's retrieval check (``check.*`` settings); ``eval_path``,
    ``eval_margin`` and ``eval_mode`` (``corpusflow reindex --eval/--margin/--mode``) set it
    for this run."""
    settings = Settings.model_validate_json(settings_json)
    if eval_path:
        check = {"questions": eval_path, "margin": eval_margin, "mode": eval_mode}
        settings = settings.model_copy(update={"check": settings.check.model_copy(update=check)})
    try:
        report = run_refresh(source, settings, force_delete, activate=True, kind="reindex")
    except RunRejected as exc:
        return ended_unapproved(exc)
    return report.to_dict()
