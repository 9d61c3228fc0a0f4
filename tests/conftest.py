"""Shared fixtures. Everything runs offline: no hub downloads, no Prefect telemetry."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_PREFECT_HOME = tempfile.mkdtemp(prefix="corpusflow-prefect-")
# The Prefect database of the test session goes with it (a run left ~5 MB per session).
atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)
for key, value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_HOME": _PREFECT_HOME,
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_LOGGING_LEVEL": "ERROR",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
}.items():
    os.environ[key] = value
# Tests never read the developer's own settings.
for key in [k for k in os.environ if k.startswith("CORPUSFLOW_")]:
    del os.environ[key]
# The suite's pipeline tests run on the bundled MiniLM, whose paths (NumPy encoder first,
# torch after) and figures they check; a test of the default model (use-m3,
# tests/embedding/test_multilingual.py) or of the settings' defaults clears this.
os.environ["CORPUSFLOW_EMBED__MODEL"] = "minilm"

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "corpus"
SHARED = REPO.parent / "shared" / "corpus" / "docling"


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared/corpus is not present")
    return SHARED


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """A private, writable copy of the bundled sample corpus."""
    dst = tmp_path / "corpus"
    shutil.copytree(SAMPLES, dst)
    return dst


@pytest.fixture(scope="session")
def tiny_bgem3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers.tiny_models import build_tiny_bgem3

    return build_tiny_bgem3(tmp_path_factory.mktemp("tiny-bgem3"))


@pytest.fixture(scope="session", autouse=True)
def warm_parsers() -> Iterator[None]:
    """The suite's refreshes hand their parser child to the next pool of this process with
    the same settings and environment (``parsers.isolation.keep_warm``) instead of spawning
    one that imports docling again (~6 s of CPU per refresh that parses). pytest's own
    per-test variable is left out of the comparison, or no test would find a spare."""
    from parsers import isolation

    isolation.keep_warm(300, ignore_env={"PYTEST_CURRENT_TEST"})
    yield
    isolation.keep_warm(0)


@pytest.fixture()
def cold_parsers() -> Iterator[None]:
    """For a test that counts the parser processes a run starts and stops."""
    from parsers import isolation

    previous = isolation.keep_warm(0)
    yield
    isolation.keep_warm(previous)


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[None]:
    """One ephemeral Prefect API (SQLite in a temp dir) for the flow tests."""
    from prefect.testing.utilities import prefect_test_harness

    # A limit, not a wait: ~20 s idle, but this fixture's set-up took 132 s with the
    # 2-core machine at load ~14, close to the 120 s this had (past it, every Prefect
    # test of the session errors).
    with prefect_test_harness(server_startup_timeout=300):
        yield


@pytest.fixture(scope="session")
def minilm_tokenizer():  # type: ignore[no-untyped-def]
    from common.settings import EmbedSettings
    from embedding import load_embedder

    return load_embedder(EmbedSettings(model="minilm")).tokenizer()
