"""Re-indexing proportional to the edit: a one-paragraph change to a long document
re-embeds only that section's chunks, keeps every other chunk id, and the embedding
cache holds one model's vectors by text, cleaned by maintenance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from common.settings import Settings, load_settings
from corpusflow.engine import InProcessExecutor, RefreshEngine
from storage import Store
from storage.maintenance import evict_embeddings
from storage.schema import embed_key
from tests.helpers.counting import CountingEmbedder, count_embedders
from tests.helpers.invariants import assert_nothing_lost
from tests.helpers.long_manual import heading, long_manual


@pytest.fixture()
def counting(monkeypatch: pytest.MonkeyPatch) -> list[CountingEmbedder]:
    return count_embedders(monkeypatch)


def _settings(db: Path) -> Settings:
    return load_settings(
        None,
        {
            "storage": {"db": str(db)},
            "run": {"progress": False},
            "chunk": {"max_tokens": 64},
        },
    )


def _rows(store: Store) -> dict[str, dict[str, Any]]:
    active = store.pointer.active()
    assert active is not None
    cols = ["chunk_id", "heading_path", "text", "embed_key", "embed_text"]
    return {r["chunk_id"]: r for r in store.read_columns(active.chunk_table, cols).to_pylist()}


def test_an_edit_re_embeds_only_its_section(
    tmp_path: Path, counting: list[CountingEmbedder]
) -> None:
    src, db = tmp_path / "src", tmp_path / "db"
    src.mkdir()
    manual = src / "manual.md"
    manual.write_text(long_manual())
    (src / "other.md").write_text("# Other\n\nA second document that no edit touches.\n")
    settings = _settings(db)

    first = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    store = Store(str(db))
    before = _rows(store)
    assert first.new == 2 and first.failed == 0
    assert len(before) >= 300
    assert counting[-1].texts and len(counting[-1].texts) == first.embedded == len(before)
    assert first.embed_cache_hits == 0

    edited_heading = heading(17)
    manual.write_text(long_manual(edited=(17, 2)))
    second = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    after = _rows(store)
    assert second.changed == 1 and second.unchanged == 1 and second.failed == 0
    in_section = [r for r in after.values() if r["heading_path"][-1] == edited_heading]
    encoded = counting[-1].texts
    # Encoder inputs: only chunks of the edited section, at least the edited one.
    assert 1 <= len(encoded) <= len(in_section)
    assert all("torque it to 14 Nm (revised)" in t for t in encoded)
    assert second.embedded == len(encoded)
    assert second.embed_cache_hits == len(after) - len(encoded) - 1  # minus other.md's chunk
    # Every chunk id outside the edited section is unchanged, with the same text.
    outside = {cid for cid, r in before.items() if r["heading_path"][-1] != edited_heading}
    assert outside <= set(after)
    assert all(after[c]["text"] == before[c]["text"] for c in outside)
    assert all(r["embed_key"] == embed_key(r["embed_text"]) for r in after.values())
    assert_nothing_lost(settings, str(src))

    # The cache keeps the old text's vector until maintenance evicts unreferenced keys.
    active = store.pointer.active()
    assert active is not None
    cache = store.caches.embeddings(store.chunks.suffix_of(active.chunk_table), 0)
    assert cache.count() == len(before) + len(encoded)
    stale = {r["embed_key"] for r in before.values()} - {r["embed_key"] for r in after.values()}
    assert stale  # the old paragraph's text
    evicted = evict_embeddings(store)
    assert sum(evicted.values()) == len(stale)
    assert cache.count() == len({r["embed_key"] for r in after.values()})

    # Unchanged source, third run: nothing embedded, no model loaded at all.
    loaded = len(counting)
    third = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    assert third.unchanged == 2 and third.embedded == 0 and len(counting) == loaded


class EchoLLM:
    """An OpenAI-compatible endpoint on loopback that answers every context request with
    a context derived from the chunk it was asked about, and counts requests."""

    def __init__(self) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.asked: list[str] = []
        echo = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                chunk = prompt.split("<chunk>\n", 1)[1].split("\n</chunk>", 1)[0]
                echo.asked.append(chunk)
                words = " ".join(chunk.split()[:6])
                answer = {"choices": [{"message": {"content": f"Context of: {words}"}}]}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def test_an_edit_asks_the_llm_only_for_its_section(
    tmp_path: Path, counting: list[CountingEmbedder]
) -> None:
    """With LLM contexts, a context is keyed by chunk, section and outline: the edit of one
    paragraph asks again only for the chunks of that section's parent window."""
    llm = EchoLLM()
    src, db = tmp_path / "src", tmp_path / "db"
    src.mkdir()
    manual = src / "manual.md"
    manual.write_text(long_manual())
    settings = load_settings(
        None,
        {
            "storage": {"db": str(db)},
            "run": {"progress": False},
            "chunk": {"max_tokens": 64, "contextual": "llm"},
            "llm": {"base_url": llm.url, "max_concurrency": 2},
        },
    )
    try:
        first = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
        store = Store(str(db))
        before = _rows(store)
        assert first.failed == 0 and len(before) >= 300
        assert len(llm.asked) == len(before)  # one request per chunk

        manual.write_text(long_manual(edited=(40, 1)))
        llm.asked.clear()
        second = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
        after = _rows(store)
        assert second.changed == 1 and second.failed == 0
        section = [r for r in after.values() if r["heading_path"][-1] == heading(40)]
        # Requests: the edited section's chunks only (its parent window holds them all).
        assert 1 <= len(llm.asked) <= len(section)
        assert set(llm.asked) <= {r["text"] for r in section}
        assert len(counting[-1].texts) <= len(section)
        assert second.embedded == len(counting[-1].texts)
        outside = {c for c, r in before.items() if r["heading_path"][-1] != heading(40)}
        assert outside <= set(after)
        assert all(after[c]["embed_text"] == before[c]["embed_text"] for c in outside)
    finally:
        llm.server.shutdown()
