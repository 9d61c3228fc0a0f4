"""Process set-up done once by the CLI before Prefect is imported."""

from __future__ import annotations

import os


def configure_environment() -> None:
    """Quiet, offline-safe defaults; anything the user set explicitly wins."""
    defaults = {
        # Prefect without a server: an ephemeral API on SQLite in PREFECT_HOME.
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "ERROR",
        # The ephemeral API's default 20 s start-up budget is too tight on a busy 2-core box.
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        # Never reach for the Hugging Face Hub at run time.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
