"""flows: Prefect flows and tasks only; every step calls a stage package or corpusflow.pipeline."""
