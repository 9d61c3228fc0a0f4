"""Know before you spend: what a refresh plan will cost, and the budgets that stop a run.

The refresh plan (``corpusflow.plan.plan_changes``) says which documents need work; this
module turns it into pages, chunks, embedding tokens, LLM requests and tokens, CPU
seconds per stage, wall time on this deployment and money, from the rates the runs
themselves record:

- every refresh measures, per format, the documents, bytes, pages, chunks and seconds
  it parsed and chunked, and per embedding model the texts, tokens and seconds it
  embedded (``RunRates``); they go into the run's report (``RunReport.rates``), stored
  in the runs table with the rest of the report;
- a plan pools the rates of the collection's last ``RATE_RUNS`` runs (``Rates.load``);
  a rate no run measured yet comes from a documented prior (``PRIORS``) and says so.

Each figure has a range, a factor ``1 + u`` either way: u = 2 (3x) on a prior,
u = max(15%, 1/sqrt(documents measured)) on a measured rate (the sample's size only:
documents much larger or smaller than those measured skew a per-MiB rate; on priors a
per-document floor keeps small files from being priced by their bytes alone).

Caches: the chunks a run takes from the embedding cache cost no encoding. Every run
records, per plan reason (new, changed, retried, re-chunked, page retry), its chunks and
the texts it had to embed for them (``RunRates.batch``); a plan expects the pooled share
of each reason (``Rates.embed_share``) once ``SHARE_MIN_CHUNKS`` were measured, and on no
measurement every chunk embedded (an upper bound), but for a page retry the share of its
pages that is missing. A page retry's parse is priced by that share too. Parse-cache hits
are not expected: every planned document is counted as parsed.

Budgets (``run.max_wall``, ``run.max_embedded``, ``run.max_llm_tokens``,
``run.max_cost``) are checked by the engine through ``Budget`` before each batch is
embedded and committed, and before each document is started.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from common.settings import Settings
from storage.records import PlanReason

if TYPE_CHECKING:
    from corpusflow.parse_chunk import Processed
    from corpusflow.plan import Plan, WorkItem
    from storage import Store

WAIT = "wait"  # Budget.may_start: start no document until one in flight finishes
RATE_RUNS = 20  # the last runs whose measurements a plan pools
MB = 1024 * 1024

# Priors for a fresh index, per format family (what a run on this 2-core machine measured
# or the design guide records, rounded; docs/operations.md "Planning a run"):
#   parse_s_per_mb: parse seconds per MiB of source; pages_per_mb; chunks_per_mb.
#   parse_s_per_doc: the floor for small files (a child's round trip, the converter's setup).
_PDF = {"parse_s_per_mb": 1.5, "pages_per_mb": 10.0, "chunks_per_mb": 25.0, "parse_s_per_doc": 0.2}
_SCAN = {"parse_s_per_mb": 6.0, "pages_per_mb": 2.0, "chunks_per_mb": 4.0, "parse_s_per_doc": 2.0}
_OFFICE = {
    "parse_s_per_mb": 3.0,
    "pages_per_mb": 20.0,
    "chunks_per_mb": 60.0,
    "parse_s_per_doc": 0.2,
}
_TEXT = {
    "parse_s_per_mb": 20.0,
    "pages_per_mb": 0.0,
    "chunks_per_mb": 600.0,
    "parse_s_per_doc": 0.1,
}
PRIORS: dict[str, dict[str, float]] = {
    "pdf": _PDF,
    "image": _SCAN,
    "docx": _OFFICE,
    "pptx": _OFFICE,
    "xlsx": _OFFICE,
    "doc": _OFFICE,
    "ppt": _OFFICE,
    "xls": _OFFICE,
    "md": _TEXT,
    "html": _TEXT,
    "txt": _TEXT,
    "csv": _TEXT,
}
DEFAULT_PRIOR = {
    "parse_s_per_mb": 3.0,
    "pages_per_mb": 5.0,
    "chunks_per_mb": 60.0,
    "parse_s_per_doc": 0.2,
}
PRIOR_CHUNKS_PER_DOC = 2.0  # the floor for small files on priors
# Seconds of CPU per chunk: chunking (tokenising, contexts without an LLM) and writing.
PRIOR_CHUNK_S = 0.01
PRIOR_WRITE_S = 0.002
# Embedding chunks per second on this kind of 2-core CPU, by model name (guide: BGE-M3
# ~1.6/s; use-m3 measured ~21/s by bench/estimate_accuracy.py, ~4x MiniLM).
PRIOR_EMBED_PER_S = {"bge-m3": 1.6, "minilm": 6.0, "use-m3": 25.0}
DEFAULT_EMBED_PER_S = 10.0
# On a GPU (embed.device 'cuda', or 'auto' where the NVIDIA driver shows a GPU): BGE-M3
# embedded 284 chunks/s of 512 tokens (batch 32) on one H200 (docs/benchmarks.md, "On a
# GPU"); rounded down for smaller cards. Models that run on the CPU only keep their prior.
PRIOR_EMBED_PER_S_GPU = {"bge-m3": 150.0}
# A reason's measured share of chunks to embed is used once this many of its chunks were
# measured; before, every chunk is counted as embedded.
SHARE_MIN_CHUNKS = 20
PRIOR_TOKENS_PER_CHUNK_SHARE = 0.6  # of chunk.max_tokens
PRIOR_LLM_S = 3.0  # seconds per context request (a small local model)
PRIOR_OVERHEAD_S = 10.0  # a run with work: parser imports, model load, activation


PRIOR_U = 2.0  # a prior's range: a factor of 3 either way


def _uncertainty(measured_docs: int) -> float:
    """A rate's range as a factor ``1 + u`` either way (``_range``)."""
    if measured_docs <= 0:
        return PRIOR_U
    return max(0.15, 1.0 / math.sqrt(measured_docs))


def _add(into: dict[str, float], values: dict[str, float]) -> None:
    for k, v in values.items():
        into[k] = into.get(k, 0.0) + float(v or 0.0)


class RunRates:
    """What one run measures, for the plans after it (``RunReport.rates``)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.formats: dict[str, dict[str, float]] = {}
        self.embed = {"texts": 0.0, "chunks": 0.0, "tokens": 0.0, "embed_s": 0.0}
        self.write = {"chunks": 0.0, "write_s": 0.0}
        self.llm = {"requests": 0.0, "tokens": 0.0}
        # Per plan reason: chunks committed and the texts embedded for them (not cached).
        self.reuse: dict[str, dict[str, float]] = {}
        self.cpu_s = 0.0  # parse + chunk seconds of the documents committed or not

    def document(self, done: Processed) -> None:
        fmt = done.parsed.format or "unknown"
        size = float(done.item.file.size or 0)
        row = {
            "docs": 1,
            "bytes": size,
            "pages": float(done.parsed.page_count or 0),
            "chunks": float(len(done.chunks.children)),
            "chunk_s": done.chunk_s,
        }
        if not done.from_cache:
            row.update(parsed_docs=1, parsed_bytes=size, parse_s=done.parse_s)
        _add(self.formats.setdefault(fmt, {}), row)
        self.cpu_s += done.parse_s + done.chunk_s

    def batch(
        self,
        chunks: int,
        tokens: int,
        embedded: int,
        embed_s: float,
        write_s: float,
        by_reason: dict[str, int] | None = None,
    ) -> None:
        """One committed batch; ``by_reason``: its chunks per plan reason, among which the
        texts embedded are shared out by their chunks (a batch is rarely mixed)."""
        _add(
            self.embed,
            {"texts": embedded, "chunks": chunks, "tokens": tokens, "embed_s": embed_s},
        )
        _add(self.write, {"chunks": chunks, "write_s": write_s})
        total = sum((by_reason or {}).values())
        for reason, n in (by_reason or {}).items():
            if n:
                row = {"chunks": n, "embedded": embedded * n / total}
                _add(self.reuse.setdefault(reason, {}), row)

    def to_dict(self) -> dict[str, Any]:
        return {
            "formats": {k: dict(v) for k, v in self.formats.items()},
            "embed": {self.model: dict(self.embed)},
            "write": dict(self.write),
            "llm": dict(self.llm),
            "reuse": {k: dict(v) for k, v in self.reuse.items()},
        }


@dataclass(slots=True)
class Rates:
    """Rates pooled over recent runs, with priors where no run measured one."""

    formats: dict[str, dict[str, float]] = field(default_factory=dict)
    embed: dict[str, dict[str, float]] = field(default_factory=dict)
    write: dict[str, float] = field(default_factory=dict)
    llm: dict[str, float] = field(default_factory=dict)
    reuse: dict[str, dict[str, float]] = field(default_factory=dict)
    overhead: list[float] = field(default_factory=list)
    runs: int = 0

    @classmethod
    def load(cls, store: Store, limit: int = RATE_RUNS) -> Rates:
        rates = cls()
        for run in store.runs.recent(limit):
            try:
                report = json.loads(run.report_json or "{}")
            except ValueError:
                continue
            measured = report.get("rates") or {}
            if not measured:
                continue
            rates.runs += 1
            for fmt, row in (measured.get("formats") or {}).items():
                _add(rates.formats.setdefault(fmt, {}), row)
            for model, row in (measured.get("embed") or {}).items():
                _add(rates.embed.setdefault(model, {}), row)
            _add(rates.write, measured.get("write") or {})
            _add(rates.llm, measured.get("llm") or {})
            for reason, row in (measured.get("reuse") or {}).items():
                _add(rates.reuse.setdefault(reason, {}), row)
            if "overhead_s" in measured:
                rates.overhead.append(float(measured["overhead_s"]))
        return rates

    # -- the rates one estimate uses -------------------------------------------------
    def of_format(self, fmt: str) -> dict[str, Any]:
        """Per-MiB rates of a format: parse seconds, pages, chunks, chunk seconds per
        chunk; ``measured`` documents (0: priors)."""
        prior = PRIORS.get(fmt, DEFAULT_PRIOR)
        row = self.formats.get(fmt, {})
        docs, parsed = int(row.get("docs", 0)), int(row.get("parsed_docs", 0))
        mib, parsed_mib = row.get("bytes", 0.0) / MB, row.get("parsed_bytes", 0.0) / MB
        out: dict[str, Any] = dict(prior)
        out["chunk_s_per_chunk"] = PRIOR_CHUNK_S
        out["measured"] = docs
        out["parse_measured"] = parsed
        if docs and mib > 0:
            out["pages_per_mb"] = row.get("pages", 0.0) / mib
            out["chunks_per_mb"] = row.get("chunks", 0.0) / mib
            if row.get("chunks"):
                out["chunk_s_per_chunk"] = row.get("chunk_s", 0.0) / row["chunks"]
        if parsed and parsed_mib > 0:
            out["parse_s_per_mb"] = row.get("parse_s", 0.0) / parsed_mib
            if row.get("pages"):
                out["parse_s_per_page"] = row.get("parse_s", 0.0) / row["pages"]
        return out

    def of_model(self, model: str, name: str, max_tokens: int, gpu: bool = False) -> dict[str, Any]:
        """Embedding rate of a model fingerprint: chunks and tokens per second, tokens
        per chunk; ``measured`` chunks (0: priors, a GPU's with ``gpu``)."""
        row = self.embed.get(model, {})
        texts, seconds = row.get("texts", 0.0), row.get("embed_s", 0.0)
        priors = {**PRIOR_EMBED_PER_S, **(PRIOR_EMBED_PER_S_GPU if gpu else {})}
        prior = next((v for k, v in priors.items() if k in name.lower()), DEFAULT_EMBED_PER_S)
        out: dict[str, Any] = {
            "chunks_per_s": prior,
            "tokens_per_chunk": PRIOR_TOKENS_PER_CHUNK_SHARE * max_tokens,
            "measured": 0,
        }
        if row.get("chunks"):
            out["tokens_per_chunk"] = row.get("tokens", 0.0) / row["chunks"]
        if texts >= 1 and seconds > 0:
            out["chunks_per_s"] = texts / seconds
            out["measured"] = int(texts)
        out["tokens_per_s"] = out["chunks_per_s"] * out["tokens_per_chunk"]
        return out

    def embed_share(self, reason: str) -> tuple[float, int]:
        """(share of a reason's chunks that had to be embedded, chunks measured); (1.0, 0)
        until ``SHARE_MIN_CHUNKS`` of them were measured."""
        row = self.reuse.get(reason, {})
        chunks = row.get("chunks", 0.0)
        if chunks < SHARE_MIN_CHUNKS:
            return 1.0, 0
        return min(1.0, row.get("embedded", 0.0) / chunks), int(chunks)

    def write_s_per_chunk(self) -> tuple[float, int]:
        chunks = self.write.get("chunks", 0.0)
        if chunks >= 1:
            return self.write.get("write_s", 0.0) / chunks, int(chunks)
        return PRIOR_WRITE_S, 0

    def llm_per_request(self, settings: Settings, tokens_per_chunk: float) -> tuple[float, int]:
        """(tokens per context request, requests measured)."""
        requests = self.llm.get("requests", 0.0)
        if requests >= 1:
            return self.llm.get("tokens", 0.0) / requests, int(requests)
        llm = settings.llm
        return float(llm.max_document_tokens + 2 * tokens_per_chunk + llm.context_max_tokens), 0

    def overhead_s(self) -> tuple[float, bool]:
        if self.overhead:
            return sorted(self.overhead)[len(self.overhead) // 2], True
        return PRIOR_OVERHEAD_S, False


def _range(value: float, u: float) -> dict[str, float]:
    """value / (1 + u) .. value x (1 + u)."""
    return {
        "estimate": round(value, 3),
        "low": round(value / (1 + u), 3),
        "high": round(value * (1 + u), 3),
    }


def _sum_ranges(parts: Sequence[tuple[float, float]]) -> dict[str, float]:
    """(value, u) parts added, each part's range added (a conservative range)."""
    return {
        "estimate": round(sum(v for v, _ in parts), 3),
        "low": round(sum(v / (1 + u) for v, u in parts), 3),
        "high": round(sum(v * (1 + u) for v, u in parts), 3),
    }


def _format_of_paths(paths: pa.Array) -> pa.Array:
    """The format each path's extension names (parsers.formats), "unknown" otherwise."""
    from parsers.formats import EXTENSION_FORMATS

    names = pc.utf8_lower(paths)
    ext = pc.extract_regex(names, r"(?P<ext>\.[^./]+)$").field("ext")
    keys = pa.array(list(EXTENSION_FORMATS))
    values = pa.array(list(EXTENSION_FORMATS.values()))
    formats = pc.take(values, pc.index_in(ext, value_set=keys))
    return pc.fill_null(formats, "unknown")


def embed_shares(work: Sequence[WorkItem], rates: Rates) -> list[float]:
    """Each work item's expected share of chunks to embed (the rest from the embedding
    cache): its reason's measured share; unmeasured, all of them, but for a page retry
    the share of its pages that is missing."""
    by_reason: dict[str, tuple[float, int]] = {}
    out = []
    for w in work:
        if w.reason not in by_reason:
            by_reason[w.reason] = rates.embed_share(w.reason)
        share, measured = by_reason[w.reason]
        out.append(share if measured else min(share, w.page_share))
    return out


@dataclass(slots=True)
class Estimate:
    """A plan's cost: counts, estimates with ranges, and the budget that would stop it."""

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.data

    @property
    def chunks(self) -> float:
        return float(self.data["chunks"]["estimate"])

    def lines(self) -> list[str]:
        """The estimate as a few lines for a terminal or a log."""
        d = self.data
        docs = d["documents"]
        out = [
            "plan: {new} new, {changed} changed, {retried} retried, {rechunked} re-chunked, "
            "{deleted} deleted, {unchanged} unchanged".format(**docs)
            + (f", {docs['held']} held" if docs.get("held") else "")
            + f" ({d['mb']:.1f} MiB to process)"
        ]
        if not docs["to_process"]:
            return out

        def r(x: dict[str, float], unit: str = "", digits: int = 0) -> str:
            f = f"{{:,.{digits}f}}"
            return f"{f.format(x['estimate'])}{unit} ({f.format(x['low'])}-{f.format(x['high'])})"

        cached = d["chunks"]["estimate"] - d["to_embed"]["estimate"]
        out.append(
            f"estimate: {r(d['pages'])} pages, {r(d['chunks'])} chunks"
            + (f" ({r(d['to_embed'])} to embed, the rest cached)" if cached >= 0.5 else "")
            + f", {r(d['embed_tokens'])} embedding tokens"
        )
        if d.get("llm"):
            out.append(
                f"LLM contexts: {r(d['llm']['requests'])} requests, {r(d['llm']['tokens'])} tokens"
            )
        cpu = d["cpu_s"]
        out.append(
            "CPU seconds: "
            + ", ".join(f"{k} {r(cpu[k], 's', 1)}" for k in ("parse", "chunk", "embed", "write"))
        )
        out.append(
            f"wall time on this deployment: {r(d['wall_s'], 's', 0)} "
            f"(parse.workers={d['parallelism']['parse_workers']})"
        )
        if d.get("cost"):
            c = d["cost"]
            out.append(f"cost: {r(c['total'], ' ' + c['currency'] if c['currency'] else '', 2)}")
        if d["priors"]:
            out.append("from priors (no run measured them yet): " + ", ".join(d["priors"]))
        else:
            out.append(f"rates measured by the last {d['rate_runs']} run(s)")
        stop = d.get("budget_stop")
        if stop:
            out.append(f"budget: {stop['summary']}")
        return out


def estimate_plan(
    plan: Plan,
    settings: Settings,
    rates: Rates,
    model: str,
    model_name: str,
    max_tokens: int,
) -> Estimate:
    """The cost of processing ``plan``'s work under ``settings``, from ``rates``.

    Vectorised over the work items (Arrow): one pass builds the paths and sizes, then
    every figure is a group-by on format."""
    work = plan.work
    sizes = pa.array([float(w.file.size or 0) for w in work], pa.float64())
    formats = _format_of_paths(pa.array([w.file.rel_path for w in work], pa.string()))
    shares = pa.array(embed_shares(work, rates), pa.float64())
    page_shares = pa.array([w.page_share for w in work], pa.float64())
    grouped = (
        pa.table(
            {
                "format": formats,
                "size": sizes,
                "parse_size": pc.multiply(sizes, page_shares),
                "share": shares,
                "embed_size": pc.multiply(sizes, shares),
            }
        )
        .group_by("format")
        .aggregate(
            [
                ("size", "sum"),
                ("size", "count"),
                ("parse_size", "sum"),
                ("share", "sum"),
                ("embed_size", "sum"),
            ]
        )
    )
    priors: set[str] = set()
    by_format: dict[str, Any] = {}
    pages: list[tuple[float, float]] = []
    chunks: list[tuple[float, float]] = []
    parse: list[tuple[float, float]] = []
    chunk_cpu: list[tuple[float, float]] = []
    to_embed: list[tuple[float, float]] = []
    measured_docs = 0
    for fmt, total, count, parse_total, share_sum, embed_total in zip(
        grouped["format"].to_pylist(),
        grouped["size_sum"].to_pylist(),
        grouped["size_count"].to_pylist(),
        grouped["parse_size_sum"].to_pylist(),
        grouped["share_sum"].to_pylist(),
        grouped["embed_size_sum"].to_pylist(),
        strict=True,
    ):
        rate = rates.of_format(fmt)
        mib = (total or 0) / MB
        # The share of the group's chunks to embed: its documents' shares, by size.
        share = (embed_total / total) if total else (share_sum / count if count else 1.0)
        rel, prel = _uncertainty(rate["measured"]), _uncertainty(rate["parse_measured"])
        if not rate["measured"]:
            priors.add(f"{fmt} pages/chunks per MiB")
        if not rate["parse_measured"]:
            priors.add(f"{fmt} parse s/MiB")
        measured_docs += rate["measured"]
        n_chunks = mib * rate["chunks_per_mb"]
        parse_s = (parse_total or 0) / MB * rate["parse_s_per_mb"]
        # Small files cost per document, not per byte: on priors, a floor per document
        # (measured rates carry it in their per-MiB figure).
        n_chunks = max(n_chunks, count * (1.0 if rate["measured"] else PRIOR_CHUNKS_PER_DOC))
        if not rate["parse_measured"]:
            parse_s = max(parse_s, count * rate["parse_s_per_doc"])
        by_format[fmt] = {
            "documents": count,
            "mb": round(mib, 3),
            "pages": round(mib * rate["pages_per_mb"], 1),
            "chunks": round(n_chunks, 1),
            "to_embed": round(n_chunks * share, 1),
            "parse_s": round(parse_s, 2),
            "rates": {
                k: round(v, 4)
                for k, v in rate.items()
                if k.endswith(("_per_mb", "_per_page", "_per_chunk", "_per_doc"))
            },
            "measured_documents": rate["measured"],
        }
        pages.append((mib * rate["pages_per_mb"], rel))
        chunks.append((n_chunks, rel))
        to_embed.append((n_chunks * share, rel))
        parse.append((parse_s, prel))
        chunk_cpu.append((n_chunks * rate["chunk_s_per_chunk"], rel))
    total_chunks = sum(v for v, _ in chunks)
    chunk_rel = (sum(v * r for v, r in chunks) / total_chunks) if total_chunks else PRIOR_U
    total_embed = sum(v for v, _ in to_embed)
    emb = rates.of_model(model, model_name, max_tokens, embeds_on_gpu(settings))
    if not emb["measured"]:
        priors.add(f"embedding chunks/s of {model_name}")
    erel = max(chunk_rel, _uncertainty(emb["measured"]))
    tokens = total_embed * emb["tokens_per_chunk"]
    embed_s = total_embed / emb["chunks_per_s"] if emb["chunks_per_s"] else 0.0
    write_rate, write_measured = rates.write_s_per_chunk()
    if not write_measured:
        priors.add("write s/chunk")
    write_s = total_chunks * write_rate
    llm: dict[str, Any] | None = None
    llm_tokens = 0.0
    llm_wall = 0.0
    if settings.chunk.contextual == "llm":
        per_request, requests_measured = rates.llm_per_request(settings, emb["tokens_per_chunk"])
        if not requests_measured:
            priors.add("LLM tokens/request")
        lrel = max(chunk_rel, _uncertainty(requests_measured))
        llm_tokens = total_chunks * per_request
        llm = {
            "requests": _range(total_chunks, chunk_rel),
            "tokens": _range(llm_tokens, lrel),
            "tokens_per_request": round(per_request, 1),
        }
        llm_wall = total_chunks * PRIOR_LLM_S / settings.llm.max_concurrency
    workers = max(1, settings.parse.workers)
    overhead, overhead_measured = rates.overhead_s()
    to_process = len(work)
    parse_s = sum(v for v, _ in parse)
    # Parsing runs on parse.workers children; chunking, embedding and commits in the
    # run's process, while parsers wait (backpressure), so they add up.
    wall_parts = [
        (parse_s / workers, max((r for _, r in parse), default=PRIOR_U)),
        (sum(v for v, _ in chunk_cpu), chunk_rel),
        (embed_s, erel),
        (write_s, _uncertainty(write_measured)),
        (llm_wall / workers, PRIOR_U),
        (overhead if to_process else 0.0, 0.5 if overhead_measured else PRIOR_U),
    ]
    cpu = {
        "parse": _sum_ranges(parse),
        "chunk": _sum_ranges(chunk_cpu),
        "embed": _range(embed_s, erel),
        "write": _range(write_s, _uncertainty(write_measured)),
    }
    data: dict[str, Any] = {
        "documents": {
            "new": plan.count(PlanReason.NEW),
            "changed": plan.count(PlanReason.CHANGED),
            "retried": plan.count(PlanReason.RETRY),
            "rechunked": plan.count(PlanReason.RECHUNK),
            "deleted": len(plan.deleted),
            "unchanged": plan.unchanged,
            "held": len(plan.held),
            "forgotten": len(plan.forgotten),
            "listed": plan.listed,
            "to_process": to_process,
        },
        "mb": round(sum(v["mb"] for v in by_format.values()), 3),
        "by_format": by_format,
        "pages": _sum_ranges(pages),
        "chunks": _range(total_chunks, chunk_rel),
        # Of the chunks, those expected to be embedded (the others from the cache).
        "to_embed": _range(total_embed, chunk_rel),
        "embed_tokens": _range(tokens, erel),
        "embedding": {
            "model": model_name,
            "chunks_per_s": round(emb["chunks_per_s"], 3),
            "tokens_per_s": round(emb["tokens_per_s"], 1),
            "measured_chunks": emb["measured"],
        },
        "llm": llm,
        "cpu_s": cpu,
        "wall_s": _sum_ranges(wall_parts),
        "parallelism": {"parse_workers": workers},
        "cost": None,
        "priors": sorted(priors),
        "rate_runs": rates.runs,
        "budget_stop": None,
    }
    data["cost"] = _cost(settings, cpu, llm_tokens)
    data["budget_stop"] = _forecast(settings, data, llm_tokens)
    return Estimate(data)


def work_weights(
    work: Sequence[WorkItem],
    settings: Settings,
    rates: Rates,
    model: str,
    model_name: str,
    max_tokens: int,
) -> list[float]:
    """Each document's estimated share of the run's wall time, in seconds (parse on
    parse.workers, then chunk, embed and write its chunks): the run's progress advances
    by these, so its ETA is weighted by work, not by document count (a 300-page PDF is
    not a one-line note). Vectorised over the work items like ``estimate_plan``."""
    if not work:
        return []
    mib = pc.divide(pa.array([w.file.size or 0 for w in work], pa.float64()), float(MB))
    formats = _format_of_paths(pa.array([w.file.rel_path for w in work], pa.string()))
    shares = pa.array(embed_shares(work, rates), pa.float64())
    page_shares = pa.array([w.page_share for w in work], pa.float64())
    emb = rates.of_model(model, model_name, max_tokens, embeds_on_gpu(settings))
    write, _ = rates.write_s_per_chunk()
    workers = max(1, settings.parse.workers)
    known = sorted(set(formats.to_pylist()))
    per_format = [rates.of_format(f) for f in known]

    def column(values: list[float]) -> pa.Array:
        return pc.take(pa.array(values, pa.float64()), pc.index_in(formats, pa.array(known)))

    floor = column([0.0 if r["parse_measured"] else r["parse_s_per_doc"] for r in per_format])
    parse = pc.max_element_wise(
        pc.multiply(
            pc.multiply(mib, page_shares), column([r["parse_s_per_mb"] for r in per_format])
        ),
        floor,
    )
    chunks = pc.max_element_wise(
        pc.multiply(mib, column([r["chunks_per_mb"] for r in per_format])), 1.0
    )
    per_chunk = pc.add(
        column([r["chunk_s_per_chunk"] + write for r in per_format]),
        pc.divide(shares, emb["chunks_per_s"]),
    )
    seconds = pc.add(pc.divide(parse, float(workers)), pc.multiply(chunks, per_chunk))
    return [float(x) for x in seconds.to_pylist()]


def embeds_on_gpu(settings: Settings) -> bool:
    """Whether embedding runs on a GPU: embed.device 'cuda', or 'auto' on a host whose
    NVIDIA driver lists a GPU (read from /proc, without importing torch)."""
    device = settings.embed.device
    if device != "auto":
        return device == "cuda"
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


def price(settings: Settings, cpu_s: float, embed_s: float, llm_tokens: float) -> float:
    """Money for CPU seconds (parse, chunk, write), embedding seconds (GPU-priced with
    embed.device='cuda') and LLM tokens, at the cost.* prices."""
    cost = settings.cost
    embed_price = cost.gpu_hour if embeds_on_gpu(settings) else cost.cpu_hour
    return (
        cpu_s / 3600 * cost.cpu_hour
        + embed_s / 3600 * embed_price
        + llm_tokens / 1e6 * cost.llm_per_mtok
    )


def _priced(settings: Settings) -> bool:
    c = settings.cost
    return bool(c.cpu_hour or c.gpu_hour or c.llm_per_mtok)


def _cost(settings: Settings, cpu: dict[str, Any], llm_tokens: float) -> dict[str, Any] | None:
    if not _priced(settings):
        return None
    out: dict[str, Any] = {"currency": settings.cost.currency}
    parts = []
    for bound in ("estimate", "low", "high"):
        cpu_s = cpu["parse"][bound] + cpu["chunk"][bound] + cpu["write"][bound]
        parts.append(price(settings, cpu_s, cpu["embed"][bound], llm_tokens))
    out["total"] = {"estimate": round(parts[0], 4), "low": round(parts[1], 4)}
    out["total"]["high"] = round(parts[2], 4)
    return out


def _forecast(settings: Settings, data: dict[str, Any], llm_tokens: float) -> dict[str, Any] | None:
    """The budget that would stop this plan first (on the central estimate), if any."""
    run = settings.run
    spend: list[tuple[str, float, float, str]] = []
    if run.max_embedded:
        need = data["to_embed"]["estimate"]
        spend.append(("max_embedded", run.max_embedded, need, "chunks embedded"))
    if run.max_wall:
        spend.append(("max_wall", run.max_wall, data["wall_s"]["estimate"], "s"))
    if run.max_llm_tokens and data.get("llm"):
        spend.append(("max_llm_tokens", run.max_llm_tokens, llm_tokens, "LLM tokens"))
    if run.max_cost and data.get("cost"):
        spend.append(("max_cost", run.max_cost, data["cost"]["total"]["estimate"], "money"))
    over = [(limit / need, name, limit, need, unit) for name, limit, need, unit in spend if need]
    over = [o for o in over if o[0] < 1]
    if not over:
        return None
    share, name, limit, need, unit = min(over)
    docs = data["documents"]["to_process"]
    return {
        "budget": f"run.{name}",
        # Every budget the plan would pass, first met first (an approval lifts them all).
        "exceeded": [f"run.{o[1]}" for o in sorted(over)],
        "limit": limit,
        "needed": round(need, 3),
        "share": round(share, 3),
        "summary": (
            f"run.{name}={limit:g} would stop the run after about {share:.0%} of the work "
            f"(~{int(docs * share)} of {docs} documents; needs ~{need:,.1f} {unit}); the next "
            "run continues with the rest"
        ),
    }


# -- budgets during a run -------------------------------------------------------------
@dataclass(slots=True)
class Budget:
    """The run.max_* budgets as the engine checks them. ``spent_*`` are this run's
    measurements so far; the rates price what is not measured yet (the next batch)."""

    settings: Settings
    rates: Rates
    model: str
    model_name: str
    max_tokens: int
    started: float  # time.time() of the run's start

    @property
    def active(self) -> bool:
        run = self.settings.run
        return bool(run.max_wall or run.max_embedded or run.max_llm_tokens or run.max_cost)

    def _batch_seconds(self, chunks: int) -> float:
        gpu = embeds_on_gpu(self.settings)
        emb = self.rates.of_model(self.model, self.model_name, self.max_tokens, gpu)
        write, _ = self.rates.write_s_per_chunk()
        return chunks / emb["chunks_per_s"] + chunks * write

    def fits(
        self,
        now: float,
        embedded: int,
        chunks: int,
        cpu_s: float,
        embed_s: float,
        llm_tokens: int,
    ) -> str:
        """ "" when a batch of ``chunks`` may be embedded and committed now, else the name
        of the budget it would pass."""
        run = self.settings.run
        if run.max_embedded and embedded + chunks > run.max_embedded:
            return "max_embedded"
        batch_s = self._batch_seconds(chunks)
        if run.max_wall and now - self.started + batch_s > run.max_wall:
            return "max_wall"
        if run.max_cost and _priced(self.settings):
            spent = price(self.settings, cpu_s, embed_s, llm_tokens)
            if spent + price(self.settings, 0.0, batch_s, 0.0) > run.max_cost:
                return "max_cost"
        return ""

    def may_start(self, now: float, llm_tokens: int, finished: int, in_flight: int) -> str:
        """ "" when another document may be started, else the budget that forbids it:
        the wall time is spent, or the LLM tokens spent plus those of the documents in
        flight and one more (this run's average per finished document, else the plan's)
        would pass run.max_llm_tokens."""
        run = self.settings.run
        if run.max_wall and now - self.started >= run.max_wall:
            return "max_wall"
        if run.max_llm_tokens and self.settings.chunk.contextual == "llm":
            if llm_tokens >= run.max_llm_tokens:
                return "max_llm_tokens"
            if not finished:
                # Nothing measured yet: one document starts whatever the plan's prior
                # says (else a run on priors could never learn), then the run waits for
                # it before starting more.
                return WAIT if in_flight else ""
            per_doc = llm_tokens / finished
            if llm_tokens + (in_flight + 1) * per_doc > run.max_llm_tokens:
                return "max_llm_tokens"
        return ""


@dataclass(frozen=True, slots=True)
class WorkProgress:
    """A run's progress by work (``WorkEta.snapshot``), for a progress display."""

    run_id: str
    documents: int  # planned
    done: int  # committed or failed
    total_s: float  # the plan's estimated seconds of work (sum of work_weights)
    done_s: float  # estimated seconds of the documents done
    elapsed_s: float  # since the run's loop started
    eta_s: float  # seconds left
    measured: float  # how much of the ETA is measured (0: the plan's estimate alone, ->1)
    final: bool = False  # the loop is over (finished, or stopped by a budget)

    @property
    def percent(self) -> float:
        return 100.0 * min(1.0, self.done_s / self.total_s) if self.total_s > 0 else 100.0


@dataclass(slots=True)
class WorkEta:
    """The remaining time of a run, weighted by work (``work_weights``).

    The plan's estimate says how many seconds of work are left; the run's measured pace
    (estimated seconds done per second elapsed) corrects it. The two are blended by
    ``w = 1 - 1/sqrt(1 + documents measured)``, the sample-size rule of the estimate's
    ranges: before the first document the ETA is the plan's, after 3 documents half
    measured, after 99 nine tenths.

    The pace is measured from the first progress report with work done (the first commit)
    on: what comes before it is not the pace of the rest of the run, but the start-up (the
    embedding model's load, the parser child's imports) and the first batch filling up
    while nothing is committed (progress moves by commits of storage.write_batch_docs
    documents). Until a second report the pace is the run's from its start."""

    run_id: str
    documents: int
    total_s: float
    started: float  # time.monotonic() at the loop's start
    done: int = 0
    done_s: float = 0.0
    # The first report with work done: (time, documents done, estimated seconds done).
    first: tuple[float, int, float] | None = None

    def advance(self, seconds: float, documents: int) -> None:
        self.done_s += seconds
        self.done += documents

    def snapshot(self, now: float, final: bool = False) -> WorkProgress:
        elapsed = max(0.0, now - self.started)
        left = max(0.0, self.total_s - self.done_s)
        if self.first is None and self.done_s > 0:
            self.first = (now, self.done, self.done_s)
        since, docs, work = now - self.started, self.done, self.done_s
        if self.first is not None and self.done_s > self.first[2] and now > self.first[0]:
            since = now - self.first[0]
            docs = self.done - self.first[1]
            work = self.done_s - self.first[2]
        w = 1.0 - 1.0 / math.sqrt(1.0 + docs) if work > 0 and since > 0 else 0.0
        measured = left * since / work if w else left
        eta = 0.0 if final else (1.0 - w) * left + w * measured
        return WorkProgress(
            self.run_id,
            self.documents,
            self.done,
            self.total_s,
            self.done_s,
            elapsed,
            eta,
            w,
            final,
        )


def describe_stop(budget: str, settings: Settings, left: int) -> str:
    limit = getattr(settings.run, budget)
    return (
        f"stopped by run.{budget}={limit:g}: {left} document(s) left for the next run "
        "(still new/changed in the ledger; everything committed so far stays)"
    )


def preview(
    source_uri: str, settings: Settings, force_delete: bool = False, only_failed: bool = False
) -> Estimate:
    """``corpusflow plan``: the plan a refresh would make now and its cost, without the
    write lease and without writing anything (a running refresh is not disturbed)."""
    from corpusflow.activation import load_check
    from corpusflow.fingerprints import Fingerprints, check_fingerprint
    from corpusflow.model_choice import choose_model
    from corpusflow.plan import plan_changes
    from sources import open_source
    from storage import Store

    src = open_source(source_uri, settings.source)
    src.check()
    store = Store.from_settings(settings.storage)
    spec = choose_model(settings, store)
    fps = Fingerprints.of(settings, spec)
    check = check_fingerprint(load_check(settings))
    plan = plan_changes(src, store, settings, fps, force_delete, only_failed, check=check)
    rates = Rates.load(store)
    return estimate_plan(plan, settings, rates, spec.fingerprint, spec.name, fps.max_tokens)
