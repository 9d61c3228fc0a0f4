"""Nothing a run starts outlives it: SIGKILL of the CLI or of a flow process, on a machine
the test loads itself, leaves no descendant (parser children, the ephemeral API and its
watchdog, LibreOffice); and the parser's memory cap counts the whole tree under a child."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from common.errors import Category
from common.settings import ParseSettings, load_settings
from parsers import ParseError, ParserPool

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux"
)

_BESIDE = Path(sys.executable).parent / "corpusflow"
_MARK = "CORPUSFLOW_TEST_KILL_MARK"
# After the SIGKILL, every descendant must be gone within this margin. The mechanisms are
# the kernel's parent-death signal (immediate) and a reaper that scans /proc (well under
# a second idle); the margin is wide so that it holds with 2 busy processes per core.
_GONE_WITHIN_S = 15.0
_LOAD_MAX_S = 180.0  # the busy loops end by themselves after this, whatever happens
_LOAD_LEAD_S = 2.0  # how long the machine is saturated before the kill
_BUSY = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end: pass\n"


class BusyMachine:
    """Two busy-loop processes per core, started by ``load()`` (bounded in time), killed
    when the test ends. Started just before the kill, not for the run's whole start-up:
    the kill and the clean-up after it are what must hold under load, and loading the
    machine for minutes would cost the suite minutes of CPU."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def load(self) -> None:
        n = 2 * (os.cpu_count() or 2)
        self.procs = [
            subprocess.Popen([sys.executable, "-S", "-c", _BUSY, str(_LOAD_MAX_S)])
            for _ in range(n)
        ]
        time.sleep(_LOAD_LEAD_S)  # a fixed lead, not an event: the scheduler's queue fills

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()


@pytest.fixture()
def busy_machine() -> Iterator[BusyMachine]:
    busy = BusyMachine()
    try:
        yield busy
    finally:
        busy.stop()


def _marked(mark: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``mark``: every descendant
    of a process started with it, wherever it was reparented, whatever it named itself."""
    needle = f"{_MARK}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            found.append(int(entry))
    return found


def _names(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            out.append(f"{pid}:{p.name()}:{' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            pass
    return out


def _wait_alive(pids: list[int], within_s: float) -> list[int]:
    """The pids still alive (not zombies) after waiting up to ``within_s`` for them."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(procs, timeout=within_s)
    left = []
    for p in alive:
        with contextlib.suppress(psutil.Error):
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(p.pid)
    return left


def _wait_gone(mark: str, within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while True:
        left = _marked(mark)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _wait_for(proc: subprocess.Popen[Any], want: Any, timeout_s: float = 480) -> list[str]:
    """Poll the descendants' command lines until ``want(lines)`` holds."""
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = []
        for p in parent.children(recursive=True):
            try:
                lines.append(" ".join(p.cmdline()))
            except psutil.Error:
                continue
        if want(lines):
            return lines
        assert proc.poll() is None, f"the run ended before {want.__doc__} (seen: {lines})"
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"never saw {want.__doc__}")


def _soffice(lines: list[str]) -> bool:
    """LibreOffice converting a legacy file"""
    return any("soffice" in c for c in lines)


def _parser_child(lines: list[str]) -> bool:
    """a parser child"""
    return any("multiprocessing.spawn" in c for c in lines)


def _legacy_corpus(corpus: Path, shared_corpus: Path) -> None:
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) is not installed: scripts/system_deps.sh")
    for ext in ("doc", "ppt", "xls"):
        shutil.copy(shared_corpus / ext / f"legacy_sample.{ext}", corpus / f"legacy.{ext}")


@pytest.mark.slow
def test_killed_cli_leaves_no_process_behind_on_a_busy_machine(
    corpus: Path, tmp_path: Path, busy_machine: BusyMachine
) -> None:
    """SIGKILL of ``corpusflow ingest`` (as an OOM killer would) while its ephemeral API,
    the API's watchdog, this process's reaper and its parser children run: all of them die. (LibreOffice: the flow-process test below.)"""
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(
        {
            "PREFECT_HOME": str(tmp_path / "prefect"),
            "CORPUSFLOW_RUN__EPHEMERAL_API_MIN_DOCUMENTS": "1",
            _MARK: mark,
        }
    )
    proc = subprocess.Popen(
        [str(_BESIDE), "ingest", str(corpus), "--db", str(tmp_path / "db")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def everything(lines: list[str]) -> bool:
        """the API server, its watchdog and a parser child"""
        return (
            any("uvicorn" in c for c in lines)
            and any(" -S -c" in c and "signal.pause" in c for c in lines)
            and _parser_child(lines)
        )

    _wait_for(proc, everything)
    busy_machine.load()
    assert proc.poll() is None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _wait_gone(mark, _GONE_WITHIN_S)
    assert not left, _names(left)


# Run as a Prefect flow-run process would be: the flow function is this process's main.
_FLOW_PROCESS = """
import sys
from flows.refresh import refresh_flow
refresh_flow(sys.argv[1], sys.argv[2])
"""


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_server")
def test_killed_flow_process_leaves_no_process_behind_on_a_busy_machine(
    shared_corpus: Path, tmp_path: Path, busy_machine: BusyMachine
) -> None:
    """A flow run in its own process, reporting to a Prefect server (as a Prefect worker
    or ``corpusflow serve`` starts one), SIGKILLed while LibreOffice converts a legacy
    file: its parser children and LibreOffice die."""
    from prefect.settings import PREFECT_API_URL

    corpus = tmp_path / "legacy"  # legacy files only: LibreOffice runs from the first
    corpus.mkdir()
    _legacy_corpus(corpus, shared_corpus)
    settings = load_settings(None, {"storage": {"db": str(tmp_path / "db")}})
    mark = uuid.uuid4().hex
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), _MARK: mark}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", _FLOW_PROCESS, str(corpus), settings.model_dump_json()],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for(proc, _parser_child)
    busy_machine.load()  # before LibreOffice is seen: a conversion takes ~1 s idle
    _wait_for(proc, _soffice)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _wait_gone(mark, _GONE_WITHIN_S)
    assert not left, _names(left)


@pytest.mark.slow
def test_flow_called_directly_leaves_no_ephemeral_api_behind(
    corpus: Path, tmp_path: Path, busy_machine: BusyMachine
) -> None:
    """``refresh_flow(...)`` called as a plain Python function with no ``PREFECT_API_URL``:
    Prefect starts its own ephemeral API server (uvicorn) before the flow body runs. That
    process, SIGKILLed with the API and a parser child up, leaves neither behind (the API
    carries the process's lifeline tag, which ``import flows`` puts in its environment)."""
    settings = load_settings(None, {"storage": {"db": str(tmp_path / "db")}})
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update({"PREFECT_HOME": str(tmp_path / "prefect"), _MARK: mark})
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", _FLOW_PROCESS, str(corpus), settings.model_dump_json()],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def api_and_parser(lines: list[str]) -> bool:
        """Prefect's ephemeral API server and a parser child"""
        return any("uvicorn" in c for c in lines) and _parser_child(lines)

    _wait_for(proc, api_and_parser)
    busy_machine.load()
    assert proc.poll() is None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _wait_gone(mark, _GONE_WITHIN_S)
    assert not left, _names(left)


# Parse targets for ParserPool(target=...): run in the spawned children.


def soffice_parse(path: Path, settings: ParseSettings, metadata: dict[str, Any]) -> Any:
    """The real parser, reporting its pid first (the test kills this child mid-parse)."""
    from parsers.registry import parse_file

    Path(metadata["pid_file"]).write_text(str(os.getpid()))
    return parse_file(path, settings, {})


def grandchild_hog_parse(path: Path, settings: ParseSettings, metadata: dict[str, Any]) -> Any:
    """Starts a grandchild in its own session (as docling starts soffice) that grows in
    steps of 64 MiB up to ``metadata['mib']``, and waits for it."""
    grow = (
        "import os, sys, time\nkeep = []\n"
        "open(sys.argv[2], 'w').write(str(os.getpid()))\n"
        "while len(keep) * 64 < int(sys.argv[1]):\n"
        "    keep.append(b'x' * (64 << 20))\n    time.sleep(0.05)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", grow, str(metadata["mib"]), metadata["pid_file"]],
        start_new_session=True,
    )
    proc.wait()
    raise AssertionError("the grandchild should have been killed with this parser")


def test_memory_cap_counts_a_grandchild_in_its_own_session(tmp_path: Path) -> None:
    """A parser child whose grandchild (own session, like soffice) outgrows the cap is
    killed as ``out_of_memory``, the grandchild with it; the next file still parses."""
    cap_mib = 700
    pid_file = tmp_path / "grandchild.pid"
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nSome text.\n")
    settings = ParseSettings(timeout_s=240, memory_limit_mb=cap_mib, workers=1)
    with ParserPool(settings, target=f"{__name__}:grandchild_hog_parse", warm_up=False) as pool:
        with pytest.raises(ParseError) as err:
            pool.parse(doc, {"mib": 2 * cap_mib, "pid_file": str(pid_file)})
        assert err.value.category == Category.OUT_OF_MEMORY, err.value.message
        used = int(err.value.message.split("used ")[1].split(" MiB")[0])
        assert used > cap_mib
        grandchild = int(pid_file.read_text())
        # Killed before it reached its target: the cap, not the grandchild, ended it.
        assert used < 2 * cap_mib + 600, used
        # SIGKILLed with the child; a process of ~700 MiB takes a moment to go away.
        assert not _wait_alive([grandchild], _GONE_WITHIN_S)
    with ParserPool(ParseSettings(timeout_s=240, workers=1)) as pool:
        assert "Some text." in pool.parse(doc).markdown


def test_soffice_dies_with_its_parser_child(tmp_path: Path, shared_corpus: Path) -> None:
    """A parser child SIGKILLed from outside (the OOM killer) while LibreOffice converts a
    legacy file: the pool reports ``crashed`` and LibreOffice, reparented to init by
    then, is killed too."""
    if not shutil.which("soffice"):
        pytest.skip("LibreOffice (soffice) is not installed: scripts/system_deps.sh")
    pid_file = tmp_path / "child.pid"
    settings = ParseSettings(timeout_s=240, workers=1)

    attempts = 5  # a conversion can end before it is seen; the next one is
    for _ in range(attempts):
        with ParserPool(settings, target=f"{__name__}:soffice_parse") as pool:
            pid_file.unlink(missing_ok=True)
            result: dict[str, Any] = {}

            def parse(pool: ParserPool = pool, result: dict[str, Any] = result) -> None:
                try:
                    result["doc"] = pool.parse(
                        shared_corpus / "doc" / "legacy_sample.doc", {"pid_file": str(pid_file)}
                    )
                except ParseError as exc:
                    result["error"] = exc

            thread = threading.Thread(target=parse)
            thread.start()
            office: list[psutil.Process] = []
            while thread.is_alive() and not office:
                if pid_file.exists() and pid_file.read_text():
                    with_children = psutil.Process(int(pid_file.read_text()))
                    try:
                        office = [
                            p
                            for p in with_children.children(recursive=True)
                            if "soffice" in p.name() or "oosplash" in p.name()
                        ]
                    except psutil.Error:
                        office = []
                time.sleep(0.01)
            if not office:
                thread.join()
                continue
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            thread.join(timeout=120)
            assert not thread.is_alive()
            assert result["error"].category == Category.CRASHED, result
            left = _wait_alive([p.pid for p in office], _GONE_WITHIN_S)
            assert not left, _names(left)
            return
    pytest.fail(f"LibreOffice was never seen running in {attempts} conversions")
