"""``parsers.isolation.keep_warm``: a closed pool's child serves the next pool of the same
process with the same settings and environment, never one that differs, and is stopped
when keeping is switched off."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from common.settings import ParseSettings
from parsers import ParserPool, isolation


def pid_parse(path: Path, settings: ParseSettings, metadata: dict[str, Any]) -> Any:
    """The real parser, with the parsing process's pid in the Markdown."""
    import dataclasses

    from parsers.registry import parse_file

    doc = parse_file(path, settings, {})
    return dataclasses.replace(doc, markdown=f"{doc.markdown}\n\npid={os.getpid()}\n")


TARGET = f"{__name__}:pid_parse"


def _pid(pool: ParserPool, doc: Path) -> int:
    markdown = pool.parse(doc).markdown
    assert "Some text." in markdown
    return int(markdown.rsplit("pid=", 1)[1].split()[0])


@pytest.fixture()
def keep() -> Iterator[None]:
    previous = isolation.keep_warm(0)  # no spare from another test
    isolation.keep_warm(120)
    yield
    isolation.keep_warm(previous)


@pytest.mark.usefixtures("keep")
def test_a_spare_serves_only_a_pool_like_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nSome text.\n")
    settings = ParseSettings(timeout_s=240, workers=1)
    with ParserPool(settings, target=TARGET) as pool:
        first = _pid(pool, doc)
    assert psutil.pid_exists(first)  # kept, not stopped
    with ParserPool(settings, target=TARGET) as pool:
        assert _pid(pool, doc) == first  # the same process served the next pool

    # Other settings, or another environment (which a child inherits when spawned): a
    # fresh child each, the spare untouched.
    with ParserPool(ParseSettings(timeout_s=241, workers=1), target=TARGET) as pool:
        other_settings = _pid(pool, doc)
    monkeypatch.setenv("CORPUSFLOW_TEST_SPARE_ENV", "1")
    with ParserPool(settings, target=TARGET) as pool:
        other_env = _pid(pool, doc)
    monkeypatch.delenv("CORPUSFLOW_TEST_SPARE_ENV")
    assert len({first, other_settings, other_env}) == 3
    # At most two spares: the oldest (the first child) was stopped for the third.
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == "zombie"

    isolation.keep_warm(0)  # off: every spare is stopped
    for pid in (other_settings, other_env):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


@pytest.mark.usefixtures("keep")
def test_a_dead_spare_is_replaced(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nSome text.\n")
    settings = ParseSettings(timeout_s=240, workers=1)
    with ParserPool(settings, target=TARGET) as pool:
        first = _pid(pool, doc)
    proc = psutil.Process(first)
    proc.kill()
    proc.wait(timeout=60)
    with ParserPool(settings, target=TARGET) as pool:
        second = _pid(pool, doc)
    assert second != first
