"""Full rebuild for a model change, beside the live table, then an atomic switch."""

from __future__ import annotations

from typing import Any

from prefect import flow

from corpusflow.settings import Settings
from embedding import Embedder, load_embedder
from flows.refresh import Gate, run_refresh
from storage import Store


def eval_gate(questions_path: str, margin: float, mode: str, settings: Settings) -> Gate:
    """A gate that runs the question set on the active and the candidate table."""
    from corpusflow.api import Filters, Searcher, spec_from_json
    from corpusflow.evaluate import evaluate, gate, load_questions

    questions = load_questions(questions_path)

    def check(
        store: Store, active: dict[str, Any], target: str, embedder: Embedder
    ) -> tuple[bool, str]:
        old_embedder = load_embedder(settings.embed, spec_from_json(active["model_json"]))
        old = Searcher(store, active["chunk_table"], active["parent_table"], old_embedder)
        new = Searcher(store, target, store.parent_table_name(store.suffix_of(target)), embedder)
        # The gate judges the whole table, restricted documents included (audited override).
        every = Filters(all_groups=True)
        old_r = evaluate(
            questions,
            lambda q, n: old.search(q, k=n, mode=mode, filters=every),  # type: ignore[arg-type]
            k=5,
        )
        new_r = evaluate(
            questions,
            lambda q, n: new.search(q, k=n, mode=mode, filters=every),  # type: ignore[arg-type]
            k=5,
        )
        return gate(old_r, new_r, margin)

    return check


@flow(name="corpusflow-reindex", log_prints=False)
def reindex_flow(
    source: str,
    settings_json: str,
    force_delete: bool = False,
    eval_path: str | None = None,
    eval_margin: float = 0.02,
    eval_mode: str = "hybrid",
) -> dict[str, Any]:
    """Build (or resume building) the table of the configured model from the parse cache,
    validate it, optionally check retrieval quality against the live table on a question
    set, and make it active. The previous table stays for rollback."""
    settings = Settings.model_validate_json(settings_json)
    check = eval_gate(eval_path, eval_margin, eval_mode, settings) if eval_path else None
    report = run_refresh(source, settings, force_delete, activate=True, kind="reindex", gate=check)
    return report.to_dict()
