"""Which password opens a document (``parse.passwords``): the first rule whose glob
matches the document's source path, read from the environment variable the rule names."""

from __future__ import annotations

import os
from collections.abc import Mapping

from common.errors import ConfigurationError
from common.settings import ParseSettings
from sources.local import glob_match


def check_password_rules(settings: ParseSettings, environ: Mapping[str, str] = os.environ) -> None:
    """Raise ConfigurationError, before any document is parsed, for a rule whose
    environment variable is not set."""
    unset = [r.password_env for r in settings.passwords if not environ.get(r.password_env)]
    if unset:
        raise ConfigurationError(
            "parse.passwords names environment variables that are not set: "
            + ", ".join(sorted(set(unset)))
            + " (set them in the environment of the run, or remove their rules)"
        )


def password_for(
    rel_path: str, settings: ParseSettings, environ: Mapping[str, str] = os.environ
) -> str | None:
    for rule in settings.passwords:
        if glob_match(rel_path, rule.match):
            return environ.get(rule.password_env) or None
    return None
