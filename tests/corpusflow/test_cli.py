"""The CLI contract, through the installed console script."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The console script installed beside this interpreter (PATH may not include the venv).
_BESIDE = Path(sys.executable).parent / "corpusflow"
EXE = str(_BESIDE) if _BESIDE.exists() else shutil.which("corpusflow")


def _cli(
    *args: str, cwd: Path | None = None, check: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    assert EXE, "corpusflow console script is not installed"
    proc = subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=600,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("command", ["ingest", "parse", "search", "status", "retry-failed"])
def test_every_command_has_help(command: str) -> None:
    out = _cli(command, "--help").stdout
    assert "Usage" in out


def test_parse_prints_markdown(samples_dir: Path) -> None:
    out = _cli("parse", str(samples_dir / "travel_policy.docx")).stdout
    assert "# Travel and Expense Policy" in out or "Travel and Expense Policy" in out
    assert "| Tier 1" in out


def test_parse_reports_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.pdf"
    bad.write_bytes(b"%PDF-1.4 nonsense")
    proc = _cli("parse", str(bad), check=False)
    assert proc.returncode == 1
    assert "[corrupt]" in proc.stderr


@pytest.mark.slow
def test_ingest_search_status(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "db"
    out = _cli("ingest", str(corpus), "--db", str(db)).stdout
    assert "chunks written" in out and "elapsed" in out
    hits = json.loads(
        _cli("search", "who handles payroll questions", "--db", str(db), "-k", "2", "--json").stdout
    )
    assert hits[0]["path"] == "onboarding.html"
    assert {"score", "path", "heading_path", "page_numbers", "text"} <= set(hits[0])
    info = json.loads(_cli("status", "--db", str(db), "--json").stdout)
    assert info["documents"] == {"indexed": 7}
    assert info["model"]["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_unloadable_model_is_a_clear_error(corpus: Path, tmp_path: Path) -> None:
    proc = _cli(
        "ingest", str(corpus), "--db", str(tmp_path / "db"), "--model", "bge-m3", check=False
    )
    assert proc.returncode == 2
    assert "BAAI/bge-m3" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_source_is_a_clear_error(tmp_path: Path) -> None:
    proc = _cli("ingest", str(tmp_path / "nope"), "--db", str(tmp_path / "db"), check=False)
    assert proc.returncode != 0
    assert "source directory not found" in proc.stderr


def test_chunks_command_shows_what_is_embedded(samples_dir: Path) -> None:
    rows = json.loads(_cli("chunks", str(samples_dir / "travel_policy.docx"), "--json").stdout)
    hotel = next(r for r in rows if "CNY" in r["text"])
    assert hotel["heading_path"][-1] == "Hotel Limits"
    assert hotel["context"].startswith("Travel and Expense Policy")
    assert hotel["parent_id"] and hotel["n_tokens"] <= 256


@pytest.mark.usefixtures("prefect_server")
def test_one_exit_code_for_a_held_lease(tmp_path: Path) -> None:
    """Every command that writes exits 1 when another run holds the collection's lease
    (rollback used to exit 2 and maintain 1), with the same message."""
    from prefect.settings import PREFECT_API_URL

    from storage import write_lease

    db = tmp_path / "db"
    db.mkdir()
    # maintain is a flow: on the session's server, not an ephemeral API of its own
    # (~9 s of CPU to start, which is not what this test is about).
    api = {"PREFECT_API_URL": str(PREFECT_API_URL.value())}
    with write_lease(str(db), "default"):
        for command in (["rollback"], ["maintain"], ["retire"]):
            proc = _cli(*command, "--db", str(db), check=False, **api)
            assert proc.returncode == 1, (command, proc.stdout + proc.stderr)
            assert "is being written by another run" in proc.stderr
