"""Parse targets that fail on purpose, for tests of the run around the parser.

``ParserPool(settings, target="tests.helpers.parse_faults:<name>")`` runs one of these in the
killable child instead of ``parsers.registry.parse_file``; ``hanging_pool`` makes every pool a
run opens use one, so a flow run meets the fault where a real file would cause it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

HANGS_ON = "travel_policy.docx"


def hang_on_travel_policy(path: Path, settings: Any, metadata: dict[str, Any]) -> Any:
    """Never returns for travel_policy.docx (as a parser stuck in a loop would); the real
    parser for every other file."""
    if Path(path).name == HANGS_ON:
        time.sleep(3600)
    from parsers.registry import parse_file

    return parse_file(path, settings, metadata)


def hanging_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ParserPool the run opens parses with ``hang_on_travel_policy``."""
    import parsers

    real = parsers.ParserPool

    class HangingPool(real):  # type: ignore[misc, valid-type]
        def __init__(self, settings: Any, target: str = "", warm_up: bool = True) -> None:
            super().__init__(settings, target or f"{__name__}:hang_on_travel_policy", warm_up)

    monkeypatch.setattr(parsers, "ParserPool", HangingPool)
