"""Know before you spend (issue 35): `corpusflow plan` prices the refresh plan from the
rates runs record, and the run.max_* budgets stop a run cleanly, the next run finishing
the rest with nothing lost. Real ingests into tmp LanceDB directories, in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from common.settings import Settings, load_settings
from corpusflow.engine import InProcessExecutor, RefreshEngine
from corpusflow.estimate import preview
from storage import Store
from tests.helpers.invariants import assert_nothing_lost

TOP_KEYS = {
    "documents",
    "mb",
    "by_format",
    "pages",
    "chunks",
    "to_embed",
    "embed_tokens",
    "embedding",
    "llm",
    "cpu_s",
    "wall_s",
    "parallelism",
    "cost",
    "priors",
    "rate_runs",
    "budget_stop",
}


def _settings(db: Path, **over: Any) -> Settings:
    base: dict[str, Any] = {"storage": {"db": str(db)}, "run": {"progress": False}}
    for section, values in over.items():
        base.setdefault(section, {}).update(values)
    return load_settings(None, base)


def _notes(root: Path, n: int, start: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + n):
        (root / f"note_{i:02d}.md").write_text(
            f"# Note {i}\n\nMaintenance note {i} for turbine T-{i:03d}: the blade inspection "
            f"interval is {i + 2} weeks.\n\n## Torque\n\nTorque settings for model {i} differ "
            "from the previous series; check the service bulletin before tightening.\n"
        )
    return root


def _indexed(db: Path) -> set[str]:
    store = Store(str(db))
    active = store.pointer.active()
    if active is None:
        return set()
    ledger = store.ledger.all(store.chunks.suffix_of(active.chunk_table))
    return {r.path for r in ledger.values() if r.status == "indexed"}


def test_plan_on_a_fresh_index_then_from_the_rates_a_run_recorded(tmp_path: Path) -> None:
    src = _notes(tmp_path / "src", 5)
    settings = _settings(tmp_path / "db", cost={"cpu_hour": 2.0, "currency": "EUR"})
    fresh = preview(str(src), settings).to_dict()
    assert set(fresh) == TOP_KEYS
    assert fresh["documents"]["new"] == fresh["documents"]["to_process"] == 5
    assert fresh["rate_runs"] == 0
    assert "md parse s/MiB" in fresh["priors"]
    assert fresh["by_format"]["md"]["measured_documents"] == 0
    for figure in ("pages", "chunks", "embed_tokens", "wall_s"):
        assert fresh[figure]["low"] <= fresh[figure]["estimate"] <= fresh[figure]["high"]
    assert fresh["chunks"]["estimate"] >= 5  # at least one per document
    assert fresh["cost"]["currency"] == "EUR" and fresh["cost"]["total"]["estimate"] > 0
    assert fresh["llm"] is None  # no contextual LLM configured

    report = RefreshEngine(str(src), settings).refresh(InProcessExecutor())
    assert (report.new, report.failed, report.stopped_by) == (5, 0, "")
    # The run logged its plan first and recorded what it measured.
    assert report.estimate["documents"]["new"] == 5
    md = report.rates["formats"]["md"]
    assert md["docs"] == 5 and md["parsed_docs"] == 5 and md["parse_s"] > 0
    assert md["chunks"] == report.chunks_written
    (embed,) = report.rates["embed"].values()
    assert embed["texts"] == report.embedded and embed["embed_s"] > 0

    _notes(src, 2, start=5)
    (src / "note_00.md").write_text("# Note 0\n\nRewritten completely.\n")
    after = preview(str(src), settings).to_dict()
    docs = after["documents"]
    assert (docs["new"], docs["changed"], docs["unchanged"], docs["to_process"]) == (2, 1, 4, 3)
    assert after["rate_runs"] == 1
    assert not any(p.startswith("md ") for p in after["priors"]), after["priors"]
    assert "embedding chunks/s of use-m3" not in after["priors"]
    assert after["by_format"]["md"]["measured_documents"] == 5
    assert after["embedding"]["measured_chunks"] == report.embedded
    # Measured rates give a narrower range than the priors did.
    width = after["chunks"]["high"] - after["chunks"]["low"]
    assert width < after["chunks"]["estimate"] * 2
    # The per-MiB rate measured on these notes predicts the next ones' chunks closely.
    per_doc = report.chunks_written / 5
    assert after["chunks"]["low"] <= 3 * per_doc * 1.5
    assert after["chunks"]["high"] >= 3 * per_doc * 0.5

    # The CLI prints the same, as JSON for machines, and writes nothing.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    db = str(tmp_path / "db")
    proc = subprocess.run(
        [sys.executable, "-m", "corpusflow.cli", "plan", str(src), "--db", db, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["documents"] == docs
    assert _indexed(tmp_path / "db") == {f"note_{i:02d}.md" for i in range(5)}


def _stopped_then_finished(tmp_path: Path, src: Path, n: int, **budget: Any) -> Any:
    """A run under ``budget`` stops cleanly; the next run without it finishes the rest."""
    db = tmp_path / "db"
    limited = _settings(db, run=budget, storage={"write_batch_docs": 1})
    report = RefreshEngine(str(src), limited).refresh(InProcessExecutor())
    assert report.stopped_by == "run." + next(iter(budget)), report.to_dict()
    assert report.failed == 0
    done = _indexed(db)
    assert report.left > 0 and len(done) + report.left == n
    assert "left for the next run" in report.stop_reason
    # What is left is still to do: the next plan has exactly it as new.
    free = _settings(db)
    planned = preview(str(src), free).to_dict()["documents"]
    assert (planned["new"], planned["unchanged"]) == (report.left, len(done))
    rest = RefreshEngine(str(src), free).refresh(InProcessExecutor())
    assert (rest.new, rest.failed, rest.stopped_by) == (report.left, 0, "")
    live = assert_nothing_lost(free, str(src))
    assert sorted(live) == sorted(p.name for p in src.iterdir())
    return report


def test_max_embedded_stops_before_the_batch_that_would_pass_it(tmp_path: Path) -> None:
    src = _notes(tmp_path / "src", 6)
    # The plan says in advance which budget would stop the run.
    forecast = preview(str(src), _settings(tmp_path / "db", run={"max_embedded": 3})).to_dict()
    assert forecast["budget_stop"]["budget"] == "run.max_embedded"
    report = _stopped_then_finished(tmp_path, src, 6, max_embedded=3)
    assert 0 < report.embedded <= 3  # never past the budget


def test_max_wall_stops_the_run_and_the_next_one_continues(tmp_path: Path) -> None:
    src = _notes(tmp_path / "src", 4)
    report = _stopped_then_finished(tmp_path, src, 4, max_wall=0.2)
    # The budget stops a run once the time spent plus the next batch's predicted time
    # would pass it, so a fast run may stop before 0.2 s have passed (a warm parser child
    # parses these notes in milliseconds): the report names the limit, not a wall time.
    assert report.stop_reason.startswith("stopped by run.max_wall=0.2:"), report.stop_reason


def test_max_cost_prices_what_the_run_measured(tmp_path: Path) -> None:
    src = _notes(tmp_path / "src", 4)
    # 1 unit a CPU-second: the parse of the first documents already passes 0.05.
    priced = {"cost": {"cpu_hour": 3600.0}}
    forecast = preview(
        str(src), _settings(tmp_path / "db", run={"max_cost": 0.05}, **priced)
    ).to_dict()
    assert forecast["budget_stop"]["budget"] == "run.max_cost"
    db = tmp_path / "db"
    limited = _settings(db, run={"max_cost": 0.05}, storage={"write_batch_docs": 1}, **priced)
    report = RefreshEngine(str(src), limited).refresh(InProcessExecutor())
    assert (report.stopped_by, report.failed) == ("run.max_cost", 0)
    assert len(_indexed(db)) + report.left == 4
    rest = RefreshEngine(str(src), _settings(db)).refresh(InProcessExecutor())
    assert (rest.new, rest.stopped_by) == (report.left, "")
    assert_nothing_lost(_settings(db), str(src))


@pytest.fixture()
def llm_server() -> Iterator[tuple[str, list[int]]]:
    """An OpenAI-compatible endpoint on loopback that reports 500 tokens of usage per
    request (the protocol the LLM contextualizer speaks; see tests/test_llm_context.py)."""
    seen: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(1)
            body = {
                "choices": [{"message": {"content": "A maintenance note of the turbine fleet."}}],
                "usage": {"prompt_tokens": 450, "completion_tokens": 50, "total_tokens": 500},
            }
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def test_max_llm_tokens_stops_starting_documents(
    tmp_path: Path, llm_server: tuple[str, list[int]]
) -> None:
    url, seen = llm_server
    src = _notes(tmp_path / "src", 8)
    db = tmp_path / "db"
    over: dict[str, Any] = {"chunk": {"contextual": "llm"}, "llm": {"base_url": url}}
    estimate = preview(str(src), _settings(db, **over)).to_dict()
    assert estimate["llm"]["requests"]["estimate"] >= 8
    assert "LLM tokens/request" in estimate["priors"]
    limited = _settings(db, run={"max_llm_tokens": 3000}, storage={"write_batch_docs": 1}, **over)
    report = RefreshEngine(str(src), limited).refresh(InProcessExecutor())
    assert report.stopped_by == "run.max_llm_tokens", report.to_dict()
    assert report.llm_tokens == 500 * len(seen) > 0
    assert report.rates["llm"]["requests"] == len(seen)
    done = _indexed(db)
    assert report.left > 0 and len(done) + report.left == 8
    # Rates now come from the run: the plan prices the rest with its tokens per request.
    after = preview(str(src), _settings(db, **over)).to_dict()
    assert after["llm"]["tokens_per_request"] == 500
    assert after["documents"]["new"] == report.left
    rest = RefreshEngine(str(src), _settings(db, **over)).refresh(InProcessExecutor())
    assert (rest.new, rest.failed, rest.stopped_by) == (report.left, 0, "")
    assert_nothing_lost(_settings(db, **over), str(src))


def test_cli_says_which_budget_stopped_the_run_and_exits_3(tmp_path: Path) -> None:
    src = _notes(tmp_path / "src", 4)
    db = str(tmp_path / "db")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "CORPUSFLOW_STORAGE__WRITE_BATCH_DOCS": "1",
        "CORPUSFLOW_RUN__MAX_EMBEDDED": "2",
    }
    cmd = [sys.executable, "-m", "corpusflow.cli", "ingest", str(src), "--db", db]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    # The plan first (stderr), then the budget and what is left.
    assert "plan: 4 new" in proc.stderr, proc.stderr
    assert "run.max_embedded=2 would stop the run" in proc.stderr
    assert "stopped by run.max_embedded=2" in proc.stdout + proc.stderr
    del env["CORPUSFLOW_RUN__MAX_EMBEDDED"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(_indexed(tmp_path / "db")) == 4


def test_progress_is_weighted_by_work_not_by_document_count() -> None:
    """The run's ETA bar advances by each document's estimated seconds: a 5 MiB PDF
    weighs more than a one-line note, and a new format falls back to its prior."""
    from corpusflow.estimate import Rates, work_weights
    from corpusflow.plan import WorkItem
    from sources import SourceFile
    from storage.records import PlanReason

    work = [
        WorkItem(SourceFile(path, size, 1.7e9, path), "", PlanReason.NEW)
        for path, size in (("a/big.pdf", 5 * 2**20), ("b/note.md", 300), ("c/odd.xyz", 300))
    ]
    settings = load_settings(None, {"parse": {"workers": 2}})
    big, note, odd = work_weights(work, settings, Rates(), "m", "use-m3", 256)
    assert big > 10 * note > 0
    assert odd > 0


def test_the_eta_is_paced_from_the_first_commit_not_the_start_up() -> None:
    """A run that spends 60 s starting (model load, parser imports) and then does its work
    exactly as planned, committed in batches of 32 one-second documents: from the second
    commit on, the ETA is the real time left, not inflated by the start-up."""
    from corpusflow.estimate import WorkEta

    eta = WorkEta("r", documents=1000, total_s=1000.0, started=0.0)
    assert eta.snapshot(0.0).eta_s == 1000.0  # the plan's alone
    now = 60.0
    snapshots = []
    for _ in range(1000 // 32):
        now += 32.0
        eta.advance(32.0, 32)
        snapshots.append((now, eta.snapshot(now)))
    first_now, first = snapshots[0]
    # One commit measured nothing yet but the whole start: the run's pace so far.
    paced = 968.0 * first_now / 32.0
    w = 1 - 1 / 33**0.5
    assert first.eta_s == pytest.approx((1 - w) * 968.0 + w * paced)
    for now, p in snapshots[1:]:
        left = 1000.0 - p.done_s
        assert p.eta_s == pytest.approx(left, rel=1e-9), (now, p)
    assert snapshots[3][1].percent == pytest.approx(12.8)  # past 10% of the work


def test_the_plan_expects_the_embedding_cache_hits_the_runs_measured(tmp_path: Path) -> None:
    """New documents whose text the index already embedded (copies under other names) cost
    no encoding: a run records, per plan reason, the share of chunks it had to embed, and
    the next plan expects that share instead of embedding every chunk."""
    src = _notes(tmp_path / "src" / "a", 12)
    settings = _settings(tmp_path / "db")
    report = RefreshEngine(str(tmp_path / "src"), settings).refresh(InProcessExecutor())
    first = report.rates["reuse"]["new"]
    assert first["chunks"] >= 20 and first["embedded"] == pytest.approx(first["chunks"], rel=0.2)
    # Copies of the same notes under new names: every chunk's text is in the cache.
    _notes(tmp_path / "src" / "b", 12)
    before = preview(str(tmp_path / "src"), settings).to_dict()
    assert before["documents"]["new"] == 12
    # One run measured new documents at (nearly) all embedded: that is what it expects.
    assert before["to_embed"]["estimate"] == pytest.approx(before["chunks"]["estimate"], rel=0.2)
    report = RefreshEngine(str(tmp_path / "src"), settings).refresh(InProcessExecutor())
    assert report.embedded == 0 and report.embed_cache_hits > 0
    assert report.rates["reuse"]["new"]["embedded"] == 0
    # A third copy: the pooled share of the two runs, about half, and seconds with it.
    _notes(tmp_path / "src" / "c", 12)
    after = preview(str(tmp_path / "src"), settings).to_dict()
    assert 0.3 < after["to_embed"]["estimate"] / after["chunks"]["estimate"] < 0.7
    assert after["cpu_s"]["embed"]["estimate"] < 0.7 * before["cpu_s"]["embed"]["estimate"]
    assert "to embed, the rest cached" in "\n".join(
        preview(str(tmp_path / "src"), settings).lines()
    )
    assert src.exists()


def test_a_page_retry_is_priced_by_its_missing_pages() -> None:
    """A page retry parses only the pages a partial document is missing: its parse
    seconds and the chunks it embeds are that share of the whole document's."""
    from corpusflow.estimate import Rates, estimate_plan, work_weights
    from corpusflow.plan import Plan, WorkItem, missing_page_count
    from sources import SourceFile
    from storage.records import PlanReason

    assert missing_page_count("pages not read: 3, 17; a warning") == 2
    assert missing_page_count("pages not read: 4") == 1
    assert missing_page_count("the parser returned a partial result") == 0
    settings = load_settings(None, {})

    def plan(reason: PlanReason, share: float) -> Plan:
        f = SourceFile("manual.pdf", 20 * 2**20, 1.7e9, "manual.pdf")
        return Plan(work=[WorkItem(f, "ab", reason, page_share=share)])

    whole = estimate_plan(plan(PlanReason.CHANGED, 1.0), settings, Rates(), "m", "use-m3", 256)
    pages = estimate_plan(plan(PlanReason.PAGES, 0.05), settings, Rates(), "m", "use-m3", 256)
    w, p = whole.to_dict(), pages.to_dict()
    assert p["cpu_s"]["parse"]["estimate"] == pytest.approx(
        0.05 * w["cpu_s"]["parse"]["estimate"], rel=0.01
    )
    assert p["to_embed"]["estimate"] == pytest.approx(0.05 * w["to_embed"]["estimate"], rel=0.01)
    assert p["chunks"]["estimate"] == w["chunks"]["estimate"]  # re-chunked whole
    (ww,) = work_weights(plan(PlanReason.CHANGED, 1.0).work, settings, Rates(), "m", "use-m3", 256)
    (pw,) = work_weights(plan(PlanReason.PAGES, 0.05).work, settings, Rates(), "m", "use-m3", 256)
    assert pw < 0.2 * ww


def test_a_gpu_prices_embedding_by_its_own_prior() -> None:
    """BGE-M3 on a GPU embeds ~100x faster than on this CPU: with embed.device='cuda' the
    plan's embedding seconds come from the GPU prior, not the CPU's."""
    from corpusflow.estimate import Rates

    cpu = Rates().of_model("m", "BAAI/bge-m3", 512)
    gpu = Rates().of_model("m", "BAAI/bge-m3", 512, gpu=True)
    assert gpu["chunks_per_s"] > 50 * cpu["chunks_per_s"]
    # A model with no GPU prior keeps its own.
    assert Rates().of_model("m", "use-m3", 256, gpu=True)["chunks_per_s"] == 25.0
