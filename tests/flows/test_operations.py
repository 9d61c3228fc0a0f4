"""Operations: deployments, a real Prefect server run read back through the API, retries."""

import contextlib
import importlib
import inspect
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from common.settings import load_settings
from flows.deployments import NIGHTLY_CRON, build_deployments
from tests.helpers.servers import free_port, wait_until_up

REPO = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "corpusflow")


def test_deployments_built_in_code(tmp_path: Path) -> None:
    settings = load_settings(None, {"storage": {"db": str(tmp_path / "db"), "collection": "hb"}})
    refresh, retry, reindex, maintain = build_deployments("/data/corpus", settings)
    assert refresh.name == "nightly-refresh-hb"
    assert [s.schedule.cron for s in refresh.schedules] == [NIGHTLY_CRON]
    assert refresh.parameters["source"] == "/data/corpus"
    assert load_settings(None).model_validate_json(refresh.parameters["settings_json"]) == settings
    assert refresh.concurrency_limit == 1
    assert retry.name == "retry-failed-hb" and not retry.schedules
    assert retry.parameters["only_failed"] is True and retry.parameters["pages"] is True
    assert not reindex.schedules and reindex.concurrency_limit == 1
    assert maintain.schedules and set(maintain.parameters) == {"settings_json"}


def test_prefect_yaml_matches_the_flows() -> None:
    spec = yaml.safe_load((REPO / "infra" / "prefect.yaml").read_text())
    names = {d["name"] for d in spec["deployments"]}
    assert names == {"nightly-refresh", "retry-failed", "reindex", "maintain"}
    for dep in spec["deployments"]:
        module, func = dep["entrypoint"].split(":")
        flow = getattr(importlib.import_module(module.removesuffix(".py").replace("/", ".")), func)
        params = inspect.signature(flow.fn).parameters
        assert set(dep["parameters"]) <= set(params), dep["name"]
        required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
        assert required <= set(dep["parameters"]), dep["name"]
        load_settings(None).model_validate_json(dep["parameters"]["settings_json"])
        assert dep["concurrency_limit"]["limit"] == 1
        for sched in dep.get("schedules", []):
            assert len(sched["cron"].split()) == 5


@contextlib.contextmanager
def _prefect_server(home: Path, **env_extra: str) -> Iterator[str]:
    """A real `prefect server start` on a free port with its own home; yields the API URL."""
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    env.update(env_extra)
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "prefect"),
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        wait_until_up(f"{url}/health", 240, "prefect server")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _prefect_server(tmp_path_factory.mktemp("prefect-home")) as url:
        yield url


@pytest.mark.slow
def test_failed_documents_visible_through_the_prefect_api(
    prefect_api: str, corpus: Path, tmp_path: Path
) -> None:
    for p in corpus.iterdir():
        if p.name not in {"travel_policy.docx", "release_notes.md"}:
            p.unlink()
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.7\ntruncated")
    (corpus / "drawing.dwg").write_bytes(b"AC1032" + b"\0\x01\x02" * 64)  # no backend reads it
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    proc = subprocess.run(
        [CLI, "ingest", str(corpus), "--db", str(tmp_path / "db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "broken.pdf" in proc.stdout and "drawing.dwg" in proc.stdout

    client = httpx.Client(base_url=prefect_api, timeout=30)
    flow_runs = client.post("/flow_runs/filter", json={}).json()
    assert len(flow_runs) == 1 and flow_runs[0]["state_type"] == "COMPLETED"
    task_runs = client.post("/task_runs/filter", json={}).json()
    states = {t["name"]: t["state_type"] for t in task_runs}
    assert states["parse-broken.pdf"] == "FAILED"
    assert states["parse-drawing.dwg"] == "FAILED"
    assert states["parse-travel_policy.docx"] == "COMPLETED"
    failed = next(t for t in task_runs if t["name"] == "parse-broken.pdf")
    assert "corrupt" in (failed["state"]["message"] or "")
    artifacts = client.post(
        "/artifacts/filter", json={"artifacts": {"key": {"any_": ["failed-documents-default"]}}}
    ).json()
    assert artifacts, "failed-documents artifact missing"
    table = artifacts[0]["data"]
    text = table if isinstance(table, str) else str(table)
    assert "broken.pdf" in text and "corrupt" in text and "unsupported" in text
    summary = client.post(
        "/artifacts/filter", json={"artifacts": {"key": {"any_": ["refresh-summary-default"]}}}
    ).json()
    assert summary and "| new |" in summary[0]["data"]


def test_serve_help_lists_schedule_options() -> None:
    out = subprocess.run(
        [CLI, "serve", "--help"], capture_output=True, text=True, timeout=120
    ).stdout
    assert "--cron" in out and "--maintenance-cron" in out
    assert shutil.which("prefect") or (Path(sys.executable).parent / "prefect").exists()


def test_compose_keeps_secrets_out_of_the_repository() -> None:
    """No password in the compose file, the API and UI behind basic authentication, the
    worker authenticating, and the env file holding the secrets ignored by git."""
    compose = yaml.safe_load((REPO / "infra" / "docker-compose.yml").read_text())
    services = compose["services"]
    db_env = services["postgres"]["environment"]
    assert db_env["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    server_env = services["prefect-server"]["environment"]
    assert server_env["PREFECT_SERVER_API_AUTH_STRING"].startswith("${PREFECT_AUTH_STRING:?")
    assert "${POSTGRES_PASSWORD:?" in server_env["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert services["worker"]["environment"]["PREFECT_API_AUTH_STRING"].startswith(
        "${PREFECT_AUTH_STRING:?"
    )
    assert all(p.startswith("127.0.0.1:") for p in services["prefect-server"]["ports"])
    text = (REPO / "infra" / "docker-compose.yml").read_text()
    assert "PASSWORD: prefect" not in text and "prefect:prefect@" not in text
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "infra/.env"], cwd=REPO, capture_output=True
    )
    assert ignored.returncode == 0, "infra/.env must be git-ignored"
    example = (REPO / "infra" / "env.example").read_text()
    assert "POSTGRES_PASSWORD=" in example and "PREFECT_AUTH_STRING=" in example


@pytest.mark.slow
def test_server_with_basic_auth_refuses_anonymous_clients(tmp_path: Path) -> None:
    """What the compose file turns on: the server's auth string; a client without the
    matching PREFECT_API_AUTH_STRING is refused, one with it is served."""
    with _prefect_server(tmp_path, PREFECT_SERVER_API_AUTH_STRING="ops:s3cret-pass") as url:
        anonymous = httpx.post(f"{url}/flows/filter", json={}, timeout=30)
        assert anonymous.status_code == 401
        wrong = httpx.post(f"{url}/flows/filter", json={}, auth=("ops", "nope"), timeout=30)
        assert wrong.status_code == 401
        ok = httpx.post(f"{url}/flows/filter", json={}, auth=("ops", "s3cret-pass"), timeout=30)
        assert ok.status_code == 200
