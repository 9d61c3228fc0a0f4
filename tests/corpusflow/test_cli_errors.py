"""The CLI's one error boundary (corpusflow.cli.ErrorBoundary): every command turns every
error into one line on stderr, ``error: MESSAGE``, and the exit status of
``corpusflow.cli.exit_code``: 2 when the command cannot run as given, 1 when it ran and
failed. Never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from common.errors import ConfigurationError, StorageFullError
from corpusflow import cli
from corpusflow.api import MODES
from storage.lease import LeaseHeldError

COMMANDS = typer.main.get_command(cli.app).commands  # type: ignore[attr-defined]

# (error raised inside the command, exit status, the line on stderr)
ERRORS: list[tuple[Exception, int, str]] = [
    (ValueError("bad value for k"), 2, "error: bad value for k"),
    (
        ConfigurationError("check.questions: no such file"),
        2,
        "error: check.questions: no such file",
    ),
    (LookupError("no active table"), 2, "error: no active table"),
    (KeyError("no collection 'x'"), 2, "error: no collection 'x'"),
    (FileNotFoundError("/nowhere"), 2, "error: /nowhere"),
    (LeaseHeldError("another run holds the lease"), 1, "error: another run holds the lease"),
    (StorageFullError("the database is out of space"), 1, "error: the database is out of space"),
    (RuntimeError("something\nbroke"), 1, "error: RuntimeError: something broke"),
]


def _args(name: str) -> list[str]:
    """The command with a placeholder for each required argument and option."""
    args = [name]
    for param in COMMANDS[name].params:
        if not param.required:
            continue
        if param.param_type_name == "argument":
            args.append("x")
        else:
            args += [param.opts[0], "x"]
    return args


def _inject(monkeypatch: pytest.MonkeyPatch, name: str, error: Exception) -> None:
    """Make ``name`` raise ``error`` inside the command, past argument parsing."""

    def boom(*a: Any, **k: Any) -> Any:
        raise error

    if name == "formats":  # the one command that needs no settings: fail reading the table
        import parsers.formats

        class Table:
            def __iter__(self) -> Any:
                raise error

        monkeypatch.setattr(parsers.formats, "FORMATS", Table())
    else:
        monkeypatch.setattr(cli, "configure_environment", boom)


def test_the_table_covers_every_command() -> None:
    assert set(COMMANDS) >= {"ingest", "search", "eval", "status", "formats", "parse"}
    for name in COMMANDS:
        assert _args(name)[0] == name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_error_of_every_command_is_one_line_and_one_exit_code(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    for error, code, line in ERRORS:
        with monkeypatch.context() as m:
            _inject(m, name, error)
            result = runner.invoke(cli.app, _args(name))
        out = result.stdout + result.stderr
        assert result.exit_code == code, (name, error, out)
        assert result.stderr.splitlines() == [line], (name, error, out)
        assert "Traceback" not in out
        assert cli.exit_code(error) == code


def test_search_with_a_bad_argument_exits_2_with_one_line(tmp_path: Path) -> None:
    """No injection: an unknown search mode, the real code path, on an empty database."""
    result = CliRunner().invoke(
        cli.app, ["search", "anything", "--db", str(tmp_path / "db"), "--mode", "fuzzy"]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"error: --mode must be one of {', '.join(MODES)}"]


def test_usage_errors_keep_typers_own_message() -> None:
    result = CliRunner().invoke(cli.app, ["search"])  # QUERY missing
    assert result.exit_code == 2
    assert "Missing argument 'QUERY'" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
