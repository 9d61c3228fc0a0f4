"""Deployments: the nightly refresh, a retry of the last failures, a parameterised
reindex and weekly maintenance.

``build_deployments`` makes them in code (``corpusflow serve`` runs them in-process
with no extra infrastructure); infra/prefect.yaml declares the same four for a
Prefect server with a work pool. Each deployment allows one active run at a time,
so two refreshes of one index never overlap (the write lease is the second guard).
"""

from __future__ import annotations

from typing import Any

from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

from common.settings import Settings
from flows.maintenance import maintain_flow
from flows.refresh import refresh_flow
from flows.reindex import reindex_flow

NIGHTLY_CRON = "0 2 * * *"
WEEKLY_MAINTENANCE_CRON = "0 4 * * 0"


def _one_at_a_time() -> ConcurrencyLimitConfig:
    # A refresh that finds the previous one still running is cancelled, not queued:
    # tomorrow's run picks up whatever today's missed.
    return ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW)


def build_deployments(
    source: str,
    settings: Settings,
    cron: str = NIGHTLY_CRON,
    maintenance_cron: str = WEEKLY_MAINTENANCE_CRON,
) -> list[Any]:
    name = settings.storage.collection
    settings_json = settings.model_dump_json()
    return [
        refresh_flow.to_deployment(
            name=f"nightly-refresh-{name}",
            cron=cron,
            parameters={"source": source, "settings_json": settings_json},
            concurrency_limit=_one_at_a_time(),
            description=f"Incremental refresh of collection {name!r} from {source}",
            tags=["corpusflow", name],
        ),
        refresh_flow.to_deployment(
            name=f"retry-failed-{name}",
            parameters={
                "source": source,
                "settings_json": settings_json,
                "only_failed": True,
                "pages": True,
            },
            concurrency_limit=_one_at_a_time(),
            description=(
                f"Retry the documents of collection {name!r} that failed (quarantined ones "
                "too) and the missing pages of partial ones (only those pages are parsed "
                "again; pages=false leaves them): run it from the UI after fixing what made "
                "them fail"
            ),
            tags=["corpusflow", name],
        ),
        reindex_flow.to_deployment(
            name=f"reindex-{name}",
            parameters={"source": source, "settings_json": settings_json},
            concurrency_limit=_one_at_a_time(),
            description="Full rebuild for a model change: run with settings_json naming the new model",
            tags=["corpusflow", name],
        ),
        maintain_flow.to_deployment(
            name=f"maintain-{name}",
            cron=maintenance_cron,
            parameters={"settings_json": settings_json},
            concurrency_limit=_one_at_a_time(),
            description="Compaction, index upkeep and version cleanup",
            tags=["corpusflow", name],
        ),
    ]
