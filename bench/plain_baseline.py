"""First ingest of a corpus: corpusflow vs the plain script a user would write by hand.

Usage:
    python bench/plain_baseline.py [--corpus DIR] [--limit N] [--json FILE]
        [--no-subset] [--plain-max-tokens N] [--keep]

In one invocation, on one machine (issue #15):

1. plain (in this process): for each file (sorted), docling
   ``DocumentConverter().convert(path)`` (files it rejects are recorded and skipped),
   docling-core ``HybridChunker`` with the embedding model's own tokenizer (the product's
   default model, all-MiniLM-L6-v2, resolved as the product resolves it: no download),
   ``chunker.contextualize(chunk)`` texts, ``SentenceTransformer(path).encode(texts,
   batch_size=<embed.batch_size default>, normalize_embeddings=True)``, and a LanceDB
   ``create_table`` of (id, text, vector) in a temp dir. Timed: setup (imports,
   converter, tokenizer, model load), convert, chunk, encode, write, total.
2. corpusflow: ``corpusflow ingest CORPUS --db TMP --json`` as a fresh subprocess (as a
   user runs it); wall time around the subprocess; chunks from ``chunks_written`` and the
   report's ``stage_s``.
3. raw encode: the ``embed_text`` column of the active chunk table that ingest wrote,
   encoded by the plain SentenceTransformer at the same batch size, in one call (how a
   user calls it) and in consecutive batches of ``batch_size`` (how the pipeline calls it,
   without the library's cross-batch length sorting).
4. both-indexed subset (unless --no-subset): corpusflow ingests a temp copy of only the
   files plain docling converted. The plain figures for that subset are the plain run
   minus the convert time of the files docling rejected (it wrote nothing for them).

Reported: wall seconds per chunk written (target: corpusflow <= 1.25x plain), CPU seconds
per chunk (this process and its children, less sensitive to other load), embedding
chunks/s of both and the ratio (target >= 0.9x raw encode), files either side failed.
``--limit N`` takes the first N files in sorted order (copied to a temp dir) to try quickly.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_CORPUS = Path("/work/shared/corpus/docling")
TARGET_WALL = 1.25
TARGET_EMBED = 0.9


def cpu_now() -> float:
    """CPU seconds of this process plus its waited-for descendants (e.g. LibreOffice,
    the corpusflow subprocess and its parser children)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def list_files(root: Path) -> list[Path]:
    return sorted(
        (p for p in root.rglob("*") if p.is_file() and not p.is_symlink()),
        key=lambda p: p.relative_to(root).as_posix(),
    )


def copy_tree(root: Path, files: list[Path], dest: Path) -> Path:
    for f in files:
        target = dest / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    return dest


# --------------------------------------------------------------------------- plain


def run_plain(root: Path, files: list[Path], workdir: Path, max_tokens: int | None) -> dict:
    """The hand-written script, timed stage by stage."""
    t_start, c_start = time.perf_counter(), cpu_now()
    stages: dict[str, float] = {}

    t = time.perf_counter()
    from sentence_transformers import SentenceTransformer  # torch, transformers

    stages["import_sentence_transformers"] = time.perf_counter() - t
    t = time.perf_counter()
    import lancedb
    from docling.document_converter import DocumentConverter
    from docling_core.transforms.chunker.hybrid_chunker import HybridChunker
    from docling_core.transforms.chunker.tokenizer.huggingface import HuggingFaceTokenizer
    from transformers import AutoTokenizer

    from common.settings import EmbedSettings
    from embedding.presets import resolve_model

    stages["import_other"] = time.perf_counter() - t

    t = time.perf_counter()
    embed_settings = EmbedSettings()
    spec = resolve_model(embed_settings)  # the product's own resolution of the default model
    batch_size = embed_settings.batch_size
    converter = DocumentConverter()
    tokenizer = AutoTokenizer.from_pretrained(spec.path, local_files_only=True)
    stages["converter_tokenizer"] = time.perf_counter() - t

    t = time.perf_counter()
    model = SentenceTransformer(spec.path, local_files_only=True)
    stages["model_load"] = time.perf_counter() - t
    limit = max_tokens or int(model.max_seq_length or spec.max_length)
    chunker = HybridChunker(tokenizer=HuggingFaceTokenizer(tokenizer=tokenizer, max_tokens=limit))
    stages["setup"] = sum(stages.values())

    per_file: list[dict[str, Any]] = []
    docs: list[tuple[str, Any]] = []
    t = time.perf_counter()
    for f in files:
        rel = f.relative_to(root).as_posix()
        t1 = time.perf_counter()
        try:
            result = converter.convert(f)
            status = getattr(result.status, "value", str(result.status))
            if status not in ("success", "partial_success"):
                raise RuntimeError(f"status {status}")
            docs.append((rel, result.document))
            per_file.append({"path": rel, "ok": True, "convert_s": time.perf_counter() - t1})
        except Exception as exc:  # encrypted, unsupported, models missing ...
            msg = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            per_file.append(
                {"path": rel, "ok": False, "convert_s": time.perf_counter() - t1, "error": msg}
            )
    stages["convert"] = time.perf_counter() - t

    ids: list[str] = []
    texts: list[str] = []
    t = time.perf_counter()
    by_path = {p["path"]: p for p in per_file}
    for rel, doc in docs:
        n = 0
        for i, chunk in enumerate(chunker.chunk(dl_doc=doc)):
            ids.append(f"{rel}#{i}")
            texts.append(chunker.contextualize(chunk=chunk))
            n += 1
        by_path[rel]["chunks"] = n
    stages["chunk"] = time.perf_counter() - t

    t = time.perf_counter()
    vectors = (
        model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        if texts
        else []
    )
    stages["encode"] = time.perf_counter() - t

    t = time.perf_counter()
    if texts:
        db = lancedb.connect(str(workdir / "plain_db"))
        rows = [
            {"id": i, "text": x, "vector": v.tolist()}
            for i, x, v in zip(ids, texts, vectors, strict=True)
        ]
        table = db.create_table("chunks", data=rows[:1])
        if len(rows) > 1:
            table.add(rows[1:])
        written = table.count_rows()
    else:
        written = 0
    stages["write"] = time.perf_counter() - t

    wall = time.perf_counter() - t_start
    return {
        "wall_s": wall,
        "cpu_s": cpu_now() - c_start,
        "stage_s": stages,
        "chunks": written,
        "max_tokens": limit,
        "batch_size": batch_size,
        "model_path": spec.path,
        "files": per_file,
        "converted": [p["path"] for p in per_file if p["ok"]],
        "failed": [{"path": p["path"], "error": p["error"]} for p in per_file if not p["ok"]],
        "_model": model,
    }


# --------------------------------------------------------------------------- corpusflow


def run_corpusflow(corpus: Path, db: Path, log: Path) -> dict:
    exe = Path(sys.executable).with_name("corpusflow")
    cmd = [str(exe) if exe.exists() else "corpusflow", "ingest", str(corpus), "--db", str(db)]
    cmd.append("--json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORPUSFLOW_")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    c0, t0 = cpu_now(), time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    wall = time.perf_counter() - t0
    cpu = cpu_now() - c0
    out = proc.stdout
    try:
        report = json.loads(out)
    except ValueError:
        start, end = out.find("{"), out.rfind("}")
        report = json.loads(out[start : end + 1]) if start >= 0 else {}
    if proc.returncode != 0 and not report:
        tail = log.read_text()[-2000:]
        raise SystemExit(f"corpusflow ingest failed (rc {proc.returncode}):\n{tail}")
    return {
        "cmd": " ".join(cmd),
        "rc": proc.returncode,
        "wall_s": wall,
        "cpu_s": cpu,
        "chunks": int(report.get("chunks_written", 0)),
        "elapsed_s": report.get("elapsed_s"),
        "stage_s": report.get("stage_s", {}),
        "failed": [
            {"path": f.get("path"), "error": f"{f.get('category')}: {f.get('message', '')}"[:200]}
            for f in report.get("failures", [])
        ],
        "report": report,
    }


def raw_encode(model: Any, db: Path, batch_size: int) -> dict:
    """The product's own embed texts through the plain model, at the same batch size."""
    from storage import Store

    store = Store(str(db))
    active = store.pointer.active()
    if not active:
        return {"chunks": 0}
    texts = store.read_columns(active.chunk_table, ["embed_text"]).column(0).to_pylist()
    texts = [t or "" for t in texts]
    if not texts:
        return {"chunks": 0}
    kw = {"normalize_embeddings": True, "show_progress_bar": False}
    t = time.perf_counter()
    model.encode(texts, batch_size=batch_size, **kw)
    one_call = time.perf_counter() - t
    t = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        batch = texts[i : i + batch_size]
        model.encode(batch, batch_size=len(batch), **kw)
    batched = time.perf_counter() - t
    return {
        "chunks": len(texts),
        "one_call_s": one_call,
        "one_call_chunks_per_s": len(texts) / one_call,
        "per_batch_s": batched,
        "per_batch_chunks_per_s": len(texts) / batched,
    }


# --------------------------------------------------------------------------- report


def _div(a: float, b: float) -> float | None:
    return a / b if b else None


def compare(plain: dict, cf: dict, raw: dict | None) -> dict:
    out: dict[str, Any] = {
        "plain_chunks": plain["chunks"],
        "corpusflow_chunks": cf["chunks"],
        "plain_wall_s": plain["wall_s"],
        "corpusflow_wall_s": cf["wall_s"],
        "plain_wall_s_per_chunk": _div(plain["wall_s"], plain["chunks"]),
        "corpusflow_wall_s_per_chunk": _div(cf["wall_s"], cf["chunks"]),
        "plain_cpu_s_per_chunk": _div(plain["cpu_s"], plain["chunks"]),
        "corpusflow_cpu_s_per_chunk": _div(cf["cpu_s"], cf["chunks"]),
    }
    pw, cw = out["plain_wall_s_per_chunk"], out["corpusflow_wall_s_per_chunk"]
    out["wall_per_chunk_ratio"] = _div(cw, pw) if pw and cw else None
    pc, cc = out["plain_cpu_s_per_chunk"], out["corpusflow_cpu_s_per_chunk"]
    out["cpu_per_chunk_ratio"] = _div(cc, pc) if pc and cc else None
    if raw is not None:
        stages = cf["stage_s"]
        # Both corpusflow figures leave out its own measured model load (the first
        # batch loads the model lazily, importing torch and sentence-transformers with
        # it), as the plain side's encode leaves out its setup. "embed" is the encoding
        # of each batch with its embedding-cache reads and checkpoints; "embed_write"
        # adds the batch's parse-cache, chunk, parent and ledger commits.
        load = float(stages.get("load_model", 0.0))
        embed = float(stages.get("embed", 0.0)) - load
        embed_write = float(stages.get("embed_write", 0.0)) - load
        out["plain_embed_chunks_per_s"] = _div(plain["chunks"], plain["stage_s"]["encode"])
        out["corpusflow_embed_chunks_per_s"] = _div(cf["chunks"], embed) if embed > 0 else None
        out["corpusflow_embed_write_chunks_per_s"] = (
            _div(cf["chunks"], embed_write) if embed_write > 0 else None
        )
        # Per text the model actually encoded (chunks repeated across documents and the
        # embedding cache's hits are not encoded again): the like-for-like rate against
        # raw encode, which encodes every text.
        encoded = int(cf.get("report", {}).get("embedded", 0) or 0)
        out["corpusflow_encoded_texts"] = encoded
        out["corpusflow_embed_encoded_per_s"] = _div(encoded, embed) if embed > 0 else None
        out["corpusflow_model_load_s"] = load
        out["raw_encode_chunks_per_s"] = raw.get("one_call_chunks_per_s")
        out["raw_encode_per_batch_chunks_per_s"] = raw.get("per_batch_chunks_per_s")
        r = raw.get("one_call_chunks_per_s")
        for key in ("corpusflow_embed_chunks_per_s", "corpusflow_embed_write_chunks_per_s"):
            v = out.get(key)
            out[key.replace("_chunks_per_s", "_vs_raw")] = _div(v, r) if v and r else None
        v = out.get("corpusflow_embed_encoded_per_s")
        out["corpusflow_embed_encoded_vs_raw"] = _div(v, r) if v and r else None
    return out


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def print_table(title: str, cmp: dict) -> None:
    print(f"\n== {title}")
    rows = [
        ("chunks written", cmp["plain_chunks"], cmp["corpusflow_chunks"], None),
        ("wall s", cmp["plain_wall_s"], cmp["corpusflow_wall_s"], None),
        (
            "wall s / chunk",
            cmp["plain_wall_s_per_chunk"],
            cmp["corpusflow_wall_s_per_chunk"],
            cmp["wall_per_chunk_ratio"],
        ),
        (
            "cpu s / chunk",
            cmp["plain_cpu_s_per_chunk"],
            cmp["corpusflow_cpu_s_per_chunk"],
            cmp["cpu_per_chunk_ratio"],
        ),
    ]
    if "raw_encode_chunks_per_s" in cmp:
        rows += [
            (
                "embed chunks/s (cf: embed)",
                cmp["plain_embed_chunks_per_s"],
                cmp["corpusflow_embed_chunks_per_s"],
                cmp["corpusflow_embed_vs_raw"],
            ),
            (
                "embed texts encoded/s (cf)",
                None,
                cmp.get("corpusflow_embed_encoded_per_s"),
                cmp.get("corpusflow_embed_encoded_vs_raw"),
            ),
            (
                "embed+commit chunks/s (cf)",
                None,
                cmp["corpusflow_embed_write_chunks_per_s"],
                cmp["corpusflow_embed_write_vs_raw"],
            ),
            ("raw encode cf texts, 1 call", cmp["raw_encode_chunks_per_s"], None, None),
            (
                "raw encode cf texts, per batch",
                cmp["raw_encode_per_batch_chunks_per_s"],
                None,
                None,
            ),
        ]
    print(f"{'':34} {'plain':>10} {'corpusflow':>11} {'ratio cf/x':>11}")
    for name, a, b, r in rows:
        print(f"{name:34} {fmt(a):>10} {fmt(b):>11} {fmt(r):>11}")
    if cmp.get("wall_per_chunk_ratio") is not None:
        ok = cmp["wall_per_chunk_ratio"] <= TARGET_WALL
        print(f"wall/chunk target cf <= {TARGET_WALL}x plain: {'met' if ok else 'NOT met'}")
    if cmp.get("corpusflow_embed_vs_raw") is not None:
        ok = cmp["corpusflow_embed_vs_raw"] >= TARGET_EMBED
        print(
            f"embed target cf >= {TARGET_EMBED}x raw 1-call encode: {'met' if ok else 'NOT met'}"
            f" (model load {fmt(cmp['corpusflow_model_load_s'], 1)} s left out; with the"
            f" commits: {fmt(cmp.get('corpusflow_embed_write_vs_raw'))}x; per text encoded:"
            f" {fmt(cmp.get('corpusflow_embed_encoded_vs_raw'))}x)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--limit", type=int, default=0, help="first N files in sorted order")
    ap.add_argument("--json", type=Path, help="also write the JSON result here")
    ap.add_argument("--no-subset", action="store_true", help="skip the both-indexed run")
    ap.add_argument(
        "--plain-max-tokens",
        type=int,
        default=0,
        help="HybridChunker max_tokens of the plain script (default: model max_seq_length)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args()

    root = args.corpus.resolve()
    all_files = list_files(root)
    files = all_files[: args.limit] if args.limit else all_files
    work = Path(tempfile.mkdtemp(prefix="plain-baseline-"))
    try:
        corpus = copy_tree(root, files, work / "corpus") if args.limit else root
        print(f"corpus {root}: {len(files)} of {len(all_files)} files; work dir {work}", flush=True)

        print("[1/4] plain script (in process) ...", flush=True)
        plain = run_plain(
            corpus,
            [corpus / f.relative_to(root) for f in files],
            work,
            args.plain_max_tokens or None,
        )
        model = plain.pop("_model")
        print(f"      {plain['chunks']} chunks in {plain['wall_s']:.1f} s", flush=True)

        print("[2/4] corpusflow ingest (subprocess) ...", flush=True)
        cf = run_corpusflow(corpus, work / "cf_db", work / "cf_stderr.log")
        print(f"      {cf['chunks']} chunks in {cf['wall_s']:.1f} s (rc {cf['rc']})", flush=True)

        print("[3/4] raw encode of corpusflow's embed_text ...", flush=True)
        raw = raw_encode(model, work / "cf_db", plain["batch_size"])
        full = compare(plain, cf, raw)

        subset: dict[str, Any] | None = None
        converted = plain["converted"]
        if not args.no_subset and converted and len(converted) < len(files):
            print(
                f"[4/4] corpusflow on the {len(converted)} files docling converted ...", flush=True
            )
            sub_corpus = copy_tree(corpus, [corpus / p for p in converted], work / "subset")
            cf_sub = run_corpusflow(sub_corpus, work / "cf_sub_db", work / "cf_sub_stderr.log")
            rejected_s = sum(p["convert_s"] for p in plain["files"] if not p["ok"])
            plain_sub = dict(plain)
            plain_sub["wall_s"] = plain["wall_s"] - rejected_s
            # CPU of the rejected files is not measured per file: scaled by wall share.
            plain_sub["cpu_s"] = plain["cpu_s"] * plain_sub["wall_s"] / plain["wall_s"]
            subset = {
                "files": len(converted),
                "plain_rejected_convert_s": rejected_s,
                "corpusflow": {k: v for k, v in cf_sub.items() if k != "report"},
                "comparison": compare(plain_sub, cf_sub, None),
            }
        else:
            print("[4/4] subset run skipped", flush=True)

        result = {
            "machine": {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "loadavg_end": os.getloadavg(),
            },
            "corpus": str(root),
            "files": len(files),
            "plain": {k: v for k, v in plain.items() if k not in ("files", "converted")},
            "plain_per_file": plain["files"],
            "corpusflow": {k: v for k, v in cf.items() if k != "report"},
            "corpusflow_report": cf["report"],
            "raw_encode": raw,
            "comparison": full,
            "subset_both_indexed": subset,
        }

        print("\nplain stages (s):", {k: round(v, 2) for k, v in plain["stage_s"].items()})
        print(
            f"plain: HybridChunker max_tokens={plain['max_tokens']}, batch_size={plain['batch_size']}"
        )
        print("corpusflow stage_s:", cf["stage_s"], f"elapsed_s={fmt(cf['elapsed_s'], 2)}")
        print_table(f"all {len(files)} files", full)
        if subset:
            print_table(f"subset docling converts ({subset['files']} files)", subset["comparison"])
            print("subset corpusflow stage_s:", subset["corpusflow"]["stage_s"])
        print(f"\nplain failed ({len(plain['failed'])}):")
        for f in plain["failed"]:
            print(f"  {f['path']}: {f['error'][:120]}")
        print(f"corpusflow failed ({len(cf['failed'])}):")
        for f in cf["failed"]:
            print(f"  {f['path']}: {f['error'][:120]}")
        if subset and subset["corpusflow"]["failed"]:
            print(f"corpusflow failed on subset ({len(subset['corpusflow']['failed'])}):")
            for f in subset["corpusflow"]["failed"]:
                print(f"  {f['path']}: {f['error'][:120]}")
        text = json.dumps(result, indent=2, default=str)
        print("\nJSON:")
        print(text)
        if args.json:
            args.json.write_text(text)
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
