"""Full rebuild for a model change, beside the live table, then an atomic switch."""

from __future__ import annotations

from typing import Any

from prefect import flow

from corpusflow.settings import Settings
from flows.refresh import run_refresh


@flow(name="corpusflow-reindex", log_prints=False)
def reindex_flow(source: str, settings_json: str, force_delete: bool = False) -> dict[str, Any]:
    """Build (or resume building) the table of the configured model from the parse cache,
    validate it, and make it active. The previous table stays for rollback."""
    settings = Settings.model_validate_json(settings_json)
    report = run_refresh(source, settings, force_delete, activate=True, kind="reindex")
    return report.to_dict()
