"""The `corpusflow` command line. Its commands and flags are a stable contract."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from corpusflow.runtime import configure_environment

# Typer's usage errors (bad options, missing arguments): exit 2 with their own message.
_CLICK_EXCEPTION: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)


class ErrorBoundary(TyperGroup):
    """The CLI's one error boundary: an error any command raises becomes one red line
    on stderr, ``error: MESSAGE``, and the exit status ``exit_code`` gives it; never a
    traceback. Typer's own exits and usage errors pass through as they are."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, _CLICK_EXCEPTION):
            raise
        except Exception as exc:
            _fail(error_message(exc), exit_code(exc))


app = typer.Typer(
    name="corpusflow",
    help="Ingest document corpora into versioned LanceDB tables of embedded chunks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=ErrorBoundary,
)

DbOpt = Annotated[
    str | None, typer.Option("--db", help="LanceDB directory or URI (default: storage.db).")
]
ConfigOpt = Annotated[
    Path | None, typer.Option("--config", help="TOML settings file.", exists=False)
]
CollectionOpt = Annotated[
    str | None, typer.Option("--collection", help="Collection name (default: storage.collection).")
]


def _settings(
    config: Path | None,
    db: str | None = None,
    model: str | None = None,
    collection: str | None = None,
) -> Any:
    from common.settings import load_settings

    overrides: dict[str, Any] = {}
    if db:
        overrides.setdefault("storage", {})["db"] = db
    if collection:
        overrides.setdefault("storage", {})["collection"] = collection
    if model:
        overrides.setdefault("embed", {})["model"] = model
    try:
        return load_settings(config, overrides)
    except Exception as exc:
        _fail(f"invalid configuration: {exc}")


def exit_code(exc: BaseException) -> int:
    """The one mapping from an error to every command's exit status (docs/operations.md):
    2 = the command cannot run as given (configuration, arguments, a missing file or
    source); 1 = it ran and failed (another run holds the lease, validation, a full
    disk, a store error)."""
    from common.errors import ConfigurationError

    if isinstance(exc, ConfigurationError | LookupError | ValueError | FileNotFoundError):
        return 2
    return 1


def error_message(exc: BaseException) -> str:
    """An error as the one line after ``error: ``: a corpusflow error or an expected
    kind (arguments, lookups, files) by its message; anything else with its type too."""
    from common.errors import CorpusflowError

    expected = CorpusflowError | LookupError | ValueError | OSError
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = " ".join(text.split()) or type(exc).__name__
    return text if isinstance(exc, expected) else f"{type(exc).__name__}: {text}"


# A run a budget (run.max_wall, max_embedded, max_llm_tokens, max_cost) stopped early:
# what it committed stays, the rest is left for the next run (docs/operations.md).
EXIT_BUDGET = 3


def _exit_if_stopped(report: dict[str, Any]) -> None:
    """A run stopped by a budget says so on stderr and exits EXIT_BUDGET."""
    if report.get("stopped_by"):
        typer.secho(str(report.get("stop_reason", "")), fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(EXIT_BUDGET)


def _fail(message: str, code: int = 2) -> Any:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def _run_flow(source: str, settings: Any, start: Any) -> dict[str, Any]:
    """Preflight, then run a flow; configuration errors exit 2, run failures exit 1."""
    from corpusflow.model_choice import preflight

    preflight(source, settings)
    report: dict[str, Any] = start()
    return report


def _choose_executor(settings: Any, documents: int) -> Any:
    """The executor for a run with ``documents`` to process: in-process when there is
    nothing to parse, or a few documents and no Prefect server (``runs_under_prefect``);
    otherwise Prefect task runs (threads, or a Dask cluster with
    ``run.task_runner = "dask"``), which must run inside a flow
    (``flows.refresh.run_planned``). Prefect is imported only then."""
    from corpusflow.executors import InProcessExecutor
    from corpusflow.runtime import runs_under_prefect

    if not documents or not runs_under_prefect(settings.run, documents):
        return InProcessExecutor()
    from flows.refresh import PrefectExecutor

    return PrefectExecutor()


def _refresh(
    source: str,
    settings: Any,
    force_delete: bool = False,
    only_failed: bool = False,
    accept: Any = None,
    pages: bool = False,
) -> dict[str, Any]:
    """Plan in this process, then ask for the executor the plan needs
    (``_choose_executor``): a refresh with nothing to parse, or a few documents
    and no Prefect server, runs here; otherwise in a Prefect flow run (with the ephemeral
    API when no server is configured) that takes the planned engine and its lease."""
    from corpusflow import executors
    from corpusflow.engine import RefreshEngine

    kind = "retry-failed" if only_failed else "accept-held" if accept is not None else "refresh"
    engine = RefreshEngine(
        source, settings, force_delete, only_failed, kind=kind, accept=accept, pages=pages
    )
    here = executors.parses_here(settings)
    if here:
        engine.prestart_parsers()
    engine.prepare()
    if engine.estimate is not None and engine.has_work:
        for line in engine.estimate.lines():  # what the run is about to spend
            typer.echo(line, err=True)
    api = None
    try:
        executor = _choose_executor(settings, engine.documents_to_process)
        if here:
            engine.start_parsers()  # they import their libraries (~6 s) while the rest starts
        if isinstance(executor, executors.InProcessExecutor):
            if here:
                engine.warm_up()
            return engine.run(executor).to_dict()
        from corpusflow.runtime import start_prefect_api
        from flows.refresh import run_planned

        api = start_prefect_api()  # returns once spawned: the server starts meanwhile
        if here:
            engine.warm_up()
        with api.serving():
            return run_planned(engine, executor)
    finally:
        if api is not None:
            api.stop()  # stopped already unless something failed before serving
        engine.stack.close()  # closed by the run already, unless it never started


AllGroupsOpt = Annotated[
    bool,
    typer.Option(
        "--all-groups",
        help="See restricted chunks of every group (an administrator's override; logged).",
    ),
]


def _groups(groups: str | None, all_groups: bool) -> tuple[str, ...]:
    if groups is not None and all_groups:
        _fail("--groups and --all-groups exclude each other")
    return tuple(g.strip() for g in (groups or "").split(",") if g.strip())


def _check_mode(mode: str) -> None:
    from corpusflow.api import MODES

    if mode not in MODES:
        _fail(f"--mode must be one of {', '.join(MODES)}")


def _print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"refresh {report['run_id']} of collection {report['collection']!r}")
    for col in ("new", "changed", "unchanged", "deleted", "failed", "chunks written"):
        table.add_column(col, justify="right")
    table.add_row(
        str(report["new"]),
        str(
            report["changed"]
            + report["retried"]
            + report["rechunked"]
            + report.get("page_retries", 0)
        ),
        str(report["unchanged"]),
        str(report["deleted"]),
        str(report["failed"]),
        str(report["chunks_written"]),
    )
    console.print(table)
    if report.get("partial"):
        console.print(
            f"[yellow]{report['partial']} document(s) indexed with content missing "
            "(ledger category 'partial'; see `corpusflow status`)[/]"
        )
    if report.get("forgotten"):
        console.print(
            f"[yellow]{report['forgotten']} forgotten document(s) are still in the source and "
            "stay excluded (`corpusflow forget --undo PATH` re-admits one)[/]"
        )
    if report.get("held"):
        console.print(
            f"[yellow]{report['held']} document(s) held by the retrieval check: not indexed in "
            "their current state until their bytes, the question set or the pipeline change "
            "(`corpusflow status` lists them; `corpusflow accept-held SOURCE [PATH ...]` "
            "indexes them anyway)[/]"
        )
    if report.get("accepted"):
        console.print(
            f"{report['accepted']} held document(s) accepted: indexed without the retrieval check"
        )
    if report["retried"] or report["rechunked"]:
        console.print(
            f"changed includes {report['retried']} retried failures and "
            f"{report['rechunked']} re-chunked for new settings"
        )
    if report.get("page_retries"):
        console.print(
            f"changed includes {report['page_retries']} partial document(s) whose missing pages "
            "were parsed again (no other page re-parsed; `corpusflow status` lists pages "
            "still missing)"
        )
    if report.get("embedded") or report.get("embed_cache_hits"):
        console.print(
            f"embedded {report['embedded']} text(s); {report['embed_cache_hits']} taken from "
            "the embedding cache"
        )
    if report.get("check"):
        console.print(str(report["check"].get("summary", "")), markup=False)
    if report.get("stopped_by"):
        console.print(f"[yellow]{report['stop_reason']}[/]")
    console.print(
        f"table {report['chunk_table']} version {report['chunk_table_version']} · "
        f"model {report['model']} · elapsed {report['elapsed_s']:.1f}s"
    )
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in report["stage_s"].items())
    if stages:
        console.print(f"stages: {stages}")
    if report["failures"]:
        console.print(f"[bold red]{len(report['failures'])} document(s) failed:[/]")
        for f in report["failures"]:
            console.print(f"  {f['path']}: [{f['category']}] {f['message']}", markup=False)


@app.command()
def ingest(
    source: Annotated[
        str, typer.Argument(help="Directory or object-store URL (s3://bucket/prefix) to ingest.")
    ],
    db: DbOpt = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="Embedding model: use-m3 (default), minilm, bge-m3, HF id or local dir."
        ),
    ] = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
    force_delete: Annotated[
        bool, typer.Option("--force-delete", help="Override the deletion guard.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the run report as JSON.")] = False,
) -> None:
    """Run the refresh flow: parse, chunk, embed and index what changed in SOURCE."""
    settings = _settings(config, db, model, collection)
    configure_environment()
    report = _run_flow(
        source, settings, lambda: _refresh(source, settings, force_delete=force_delete)
    )
    if json_out:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        _print_report(report)
    _exit_if_stopped(report)


@app.command("plan")
def plan_cmd(
    source: Annotated[
        str, typer.Argument(help="The collection's source: a directory or s3://bucket/prefix.")
    ],
    db: DbOpt = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Plan for this embedding model.")
    ] = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
    force_delete: Annotated[
        bool, typer.Option("--force-delete", help="Plan as if the deletion guard were overridden.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON.")] = False,
) -> None:
    """Say what a refresh of SOURCE would do and cost, without doing it: documents new,
    changed, retried, re-chunked, deleted and unchanged; estimated pages, chunks,
    embedding and LLM tokens, CPU seconds per stage, wall time, money (cost.*), and
    which budget (run.max_*) would stop the run. Takes no lease and writes nothing."""
    settings = _settings(config, db, model, collection)
    configure_environment()
    from corpusflow.estimate import preview

    estimate = preview(source, settings, force_delete=force_delete)
    if json_out:
        typer.echo(json.dumps(estimate.to_dict(), indent=2, default=str))
    else:
        for line in estimate.lines():
            typer.echo(line)


@app.command()
def reindex(
    source: Annotated[
        str, typer.Argument(help="The collection's source: a directory or s3://bucket/prefix.")
    ],
    model: Annotated[str, typer.Option("--model", help="The new embedding model.")],
    db: DbOpt = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
    force_delete: Annotated[
        bool, typer.Option("--force-delete", help="Override the deletion guard.")
    ] = False,
    eval_file: Annotated[
        Path | None,
        typer.Option("--eval", help="Question set: switch only if retrieval is not worse."),
    ] = None,
    margin: Annotated[
        float,
        typer.Option(
            "--margin",
            help="Allowed drop in HitRate@5 and MRR@10 for --eval (negative: required gain).",
        ),
    ] = 0.02,
    mode: ModeOpt = "hybrid",
    json_out: Annotated[bool, typer.Option("--json", help="Print the run report as JSON.")] = False,
) -> None:
    """Rebuild the index for MODEL beside the live table (from the parse cache, resumable),
    validate it and switch readers to it atomically. The old table stays for rollback.
    With --eval, the question set runs on the old and the new table first."""
    settings = _settings(config, db, model, collection)
    configure_environment()
    _check_mode(mode)
    from corpusflow.runtime import start_prefect_api
    from flows.reindex import reindex_flow

    api = start_prefect_api()
    with api.serving():
        report = _run_flow(
            source,
            settings,
            lambda: reindex_flow(
                source,
                settings.model_dump_json(),
                force_delete=force_delete,
                eval_path=str(eval_file) if eval_file else None,
                eval_margin=margin,
                eval_mode=mode,
            ),
        )
    if json_out:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        _print_report(report)
    if report.get("gate") and not json_out:
        typer.echo(f"quality gate: {report['gate']}")
    if report["activated"] and not json_out:
        typer.echo(f"active table is now {report['chunk_table']}")
    elif eval_file and not report["activated"]:
        typer.secho("the new table was not activated: it retrieves worse", fg=typer.colors.YELLOW)
        raise typer.Exit(1)


@app.command()
def rollback(db: DbOpt = None, config: ConfigOpt = None, collection: CollectionOpt = None) -> None:
    """Switch readers back to the previous table (the one a reindex replaced)."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from flows.maintenance import rollback as do_rollback

    pointer = do_rollback(settings)
    typer.echo(f"active table is now {pointer.chunk_table}")
    typer.echo(f"rollback target is {pointer.previous_chunk_table}")


@app.command()
def retire(
    table: Annotated[
        str | None, typer.Argument(help="Chunk table to drop (default: the rollback target).")
    ] = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """Drop a non-active model table with its parents and ledger."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from flows.maintenance import retire as do_retire

    dropped = do_retire(settings, table)
    for name in dropped:
        typer.echo(f"dropped {name}")


@app.command()
def maintain(
    db: DbOpt = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """Compact tables, update indexes and remove versions past the retention window."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from corpusflow.runtime import start_prefect_api
    from flows.maintenance import maintain_flow

    with start_prefect_api().serving():
        report = maintain_flow(settings.model_dump_json())
    typer.echo(json.dumps(report, indent=2, default=str))


def _print_receipt(receipt: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title=f"erasure {receipt['erasure_id']} of collection {receipt['collection']!r} "
        f"at {receipt['finished_at']}"
    )
    for col in ("table", "rows removed", "versions pruned", "tags removed"):
        table.add_column(col, justify="left" if col == "table" else "right")
    for name, info in sorted(receipt["tables"].items()):
        extra = f" (+{info['tombstones']} tombstone)" if info.get("tombstones") else ""
        table.add_row(
            name + extra,
            str(info.get("rows_removed", 0)),
            str(info.get("versions_pruned", 0)),
            ", ".join(info.get("tags", [])) or "-",
        )
    console.print(table)
    console.print(f"forgotten: {', '.join(receipt['paths'])}", markup=False)
    console.print(
        f"{receipt['rows_removed']} row(s) removed, {receipt['versions_pruned']} old version(s) "
        f"pruned, {len(receipt['tags_removed'])} tag(s) deleted; {receipt['texts_hashed']} "
        f"text hash(es) and {receipt['windows']} window hash(es) kept for `corpusflow verify`",
        markup=False,
    )
    for note in receipt["notes"]:
        console.print(f"note: {note}", markup=False)
    for path in receipt["not_found"]:
        console.print(f"[yellow]not in the collection: {path}[/]")
    for path in receipt["still_in_source"]:
        console.print(
            f"[yellow]warning: {path} is still in the source; its tombstone keeps it out of "
            f"every refresh until the file is removed or `corpusflow forget --undo {path}`[/]"
        )


@app.command()
def forget(
    paths: Annotated[
        list[str],
        typer.Argument(help="Documents to erase: source-relative paths as in the ledger."),
    ],
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="The collection's source: accepts absolute paths under it and warns "
            "about files still there.",
        ),
    ] = None,
    undo: Annotated[
        bool,
        typer.Option("--undo", help="Lift the tombstones instead: the next refresh re-adds them."),
    ] = False,
    db: DbOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the receipt as JSON.")] = False,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """Erase documents from every table of the collection (chunks and parents of every
    model, ledger tombstone, parse/context/embedding caches, staging) and from old Lance
    versions (their tags are deleted: no time travel to before the erasure for the
    tables touched). Prints and stores a receipt; `corpusflow verify` re-checks it."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from corpusflow.api import forget as do_forget
    from corpusflow.api import unforget

    if undo:
        lifted = unforget(paths, settings)
    else:
        receipt = do_forget(paths, settings, source)
    if undo:
        for path in lifted:
            typer.echo(f"re-admitted {path}: the next refresh adds it again")
        return
    if json_out:
        typer.echo(json.dumps(receipt, indent=2, default=str))
    else:
        _print_receipt(receipt)


@app.command()
def serve(
    source: Annotated[
        str,
        typer.Argument(help="The source to refresh nightly: a directory or s3://bucket/prefix."),
    ],
    db: DbOpt = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
    cron: Annotated[str, typer.Option("--cron", help="Refresh schedule (cron).")] = "0 2 * * *",
    maintenance_cron: Annotated[
        str, typer.Option("--maintenance-cron", help="Maintenance schedule (cron).")
    ] = "0 4 * * 0",
) -> None:
    """Serve the nightly refresh, retry-failed, reindex and maintenance deployments from
    this process (needs a Prefect API: PREFECT_API_URL, see docs/operations.md)."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from prefect import serve as prefect_serve

    from corpusflow.model_choice import preflight
    from flows.deployments import build_deployments

    preflight(source, settings)
    deployments = build_deployments(
        source if "://" in source else str(Path(source).resolve()), settings, cron, maintenance_cron
    )
    # Keep the schedules active when this process stops (a restart resumes them).
    prefect_serve(*deployments, pause_on_shutdown=False)


@app.command("retry-failed")
def retry_failed(
    source: Annotated[
        str, typer.Argument(help="The collection's source: a directory or s3://bucket/prefix.")
    ],
    db: DbOpt = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
    pages: Annotated[
        bool,
        typer.Option(
            "--pages",
            help="Also parse again the missing pages of documents indexed with pages "
            "missing (ledger category 'partial'): only those pages, spliced into the cached "
            "parse; only the chunks they change are embedded.",
        ),
    ] = False,
) -> None:
    """Reprocess only the documents in failed or quarantined state (with --pages, also
    the pages missing from partial documents)."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    report = _run_flow(
        source, settings, lambda: _refresh(source, settings, only_failed=True, pages=pages)
    )
    _print_report(report)
    _exit_if_stopped(report)


@app.command("accept-held")
def accept_held(
    source: Annotated[
        str, typer.Argument(help="The collection's source: a directory or s3://bucket/prefix.")
    ],
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Held documents to accept (source-relative paths as `status` lists them); "
            "none: every held document."
        ),
    ] = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the run report as JSON.")] = False,
) -> None:
    """Index documents held by the retrieval check anyway: their current bytes (or their
    deletion) are committed with the check skipped for this run."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from corpusflow.holds import Accept

    accept = Accept(frozenset(paths or ()))
    report = _run_flow(source, settings, lambda: _refresh(source, settings, accept=accept))
    if json_out:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        _print_report(report)
    _exit_if_stopped(report)


@app.command()
def parse(
    file: Annotated[Path, typer.Argument(help="The file to parse.")],
    config: ConfigOpt = None,
    isolated: Annotated[
        bool, typer.Option("--isolated/--inline", help="Parse in a killable child process.")
    ] = True,
) -> None:
    """Print the parsed Markdown of FILE to stdout."""
    settings = _settings(config)
    configure_environment()
    from parsers import ParseError, ParserPool, parse_file

    if not file.is_file():
        _fail(f"no such file: {file}")
    try:
        if isolated:
            with ParserPool(settings.parse) as pool:
                doc = pool.parse(file)
        else:
            doc = parse_file(file, settings.parse)
    except ParseError as exc:
        _fail(f"{file}: [{exc.category.value}] {exc.message}", code=1)
    sys.stdout.write(doc.markdown.rstrip() + "\n")
    typer.secho(
        f"[{doc.format} · {doc.parser} · {doc.page_count} page(s) · {doc.status}]",
        err=True,
        dim=True,
    )


ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode", help="dense | sparse | keyword | hybrid (RRF of dense + sparse/keyword)."
    ),
]


@app.command()
def chunks(
    file: Annotated[Path, typer.Argument(help="The file to chunk.")],
    config: ConfigOpt = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Embedding model whose tokenizer sizes chunks.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print chunks as JSON.")] = False,
) -> None:
    """Print the chunks of FILE as they would be embedded: context, text, parent, headings."""
    settings = _settings(config, None, model, None)
    configure_environment()
    from corpusflow.fingerprints import Fingerprints
    from corpusflow.kit import StageKit
    from corpusflow.parse_chunk import chunk_parsed
    from corpusflow.plan import WorkItem
    from embedding import resolve_model
    from parsers import ParserPool
    from sources import LocalSource, SourceFile
    from storage.records import PlanReason

    if not file.is_file():
        _fail(f"no such file: {file}")
    spec = resolve_model(settings.embed)
    fps = Fingerprints.of(settings, spec)
    with ParserPool(settings.parse) as pool:
        parsed = pool.parse(file)
        kit = StageKit.build(settings, spec, pool=pool)
    st = file.stat()
    file_ = SourceFile(file.name, st.st_size, st.st_mtime, str(file))
    item = WorkItem(file_, "", PlanReason.NEW)
    item.sha256 = LocalSource.content_hash(item.file)
    result = chunk_parsed(item, parsed, kit.tokenizer, settings, fps, kit.contextualizer)
    parents = {p.parent_id: p for p in result.parents}
    rows: list[dict[str, Any]] = [
        {
            "position": c.position,
            "chunk_id": c.chunk_id,
            "parent_id": c.parent_id,
            "heading_path": list(c.heading_path),
            "page_numbers": list(c.page_numbers),
            "n_tokens": c.n_tokens,
            "context": c.context,
            "text": c.text,
            "parent_chars": len(parents[c.parent_id].text),
        }
        for c in result.children
    ]
    if json_out:
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    typer.echo(
        f"{len(rows)} chunks, {len(parents)} parents, max {fps.max_tokens} tokens ({spec.model_id})"
    )
    for r in rows:
        typer.secho(
            f"--- #{r['position']} {r['n_tokens']} tok · {' > '.join(r['heading_path']) or '-'} · "
            f"p.{','.join(map(str, r['page_numbers'])) or '-'} · parent {r['parent_id'][:8]}",
            bold=True,
        )
        if r["context"]:
            typer.secho(f"[context] {r['context']}", dim=True)
        typer.echo(r["text"])


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to search for.")],
    db: DbOpt = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Number of results.")] = 5,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    mode: ModeOpt = "hybrid",
    path_prefix: Annotated[
        str | None, typer.Option("--path-prefix", help="Only documents under this path.")
    ] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="Only this format (pdf, docx, ...).")
    ] = None,
    meta: Annotated[
        list[str] | None, typer.Option("--meta", help="Metadata filter KEY=VALUE (repeatable).")
    ] = None,
    groups: Annotated[
        str | None,
        typer.Option(
            "--groups",
            help="Comma-separated groups of the reader: restricted chunks of other groups "
            "are never returned; without it, unrestricted chunks only.",
        ),
    ] = None,
    all_groups: AllGroupsOpt = False,
    lang: Annotated[
        str | None,
        typer.Option("--lang", help="Only chunks in these languages (ISO 639-1, comma-separated)."),
    ] = None,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """Top-k chunks for QUERY with score, source path, heading path and pages."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from corpusflow.api import Filters
    from corpusflow.api import search as do_search

    _check_mode(mode)
    metadata = {}
    for item in meta or []:
        key, sep, value = item.partition("=")
        if not sep:
            _fail(f"--meta expects KEY=VALUE, got {item!r}")
        metadata[key] = value
    filters = Filters(
        path_prefix=path_prefix,
        format=fmt,
        metadata=metadata,
        groups=_groups(groups, all_groups),
        all_groups=all_groups,
        lang=tuple(x.strip() for x in lang.split(",") if x.strip()) if lang else None,
    )
    hits = do_search(query, settings, k=k, mode=mode, filters=filters)  # type: ignore[arg-type]
    if json_out:
        typer.echo(json.dumps(hits, indent=2, ensure_ascii=False))
        return
    if not hits:
        typer.echo("no results")
    for h in hits:
        pages = ",".join(map(str, h["page_numbers"])) or "-"
        heading = " > ".join(h["heading_path"]) or "-"
        typer.secho(
            f"#{h['rank']}  score {h['score']:.3f}  {h['path']}  p.{pages}  [{h['lang'] or '?'}]",
            bold=True,
        )
        typer.echo(f"    {heading}")
        snippet = " ".join(h["text"].split())
        typer.echo(f"    {snippet[:300]}{'…' if len(snippet) > 300 else ''}")


@app.command("eval")
def eval_cmd(
    questions: Annotated[Path, typer.Argument(help="JSONL: question, path, contains per line.")],
    db: DbOpt = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Cut-off for the hit rate.")] = 5,
    mode: ModeOpt = "hybrid",
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    groups: Annotated[
        str | None,
        typer.Option("--groups", help="Comma-separated groups the questions are asked as."),
    ] = None,
    all_groups: AllGroupsOpt = False,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """HitRate@1, HitRate@5, MRR@10 and failures of a labelled question set, also per
    language, question kind and question/document language when the lines carry
    ``lang``, ``kind`` and ``doc_lang``."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from corpusflow.api import Filters, Searcher
    from corpusflow.evaluate import evaluate, load_questions

    _check_mode(mode)
    qs = load_questions(questions)
    searcher = Searcher.for_active(settings)
    access = Filters(groups=_groups(groups, all_groups), all_groups=all_groups)
    result = evaluate(
        qs,
        lambda q, n: searcher.search(q, k=n, mode=mode, filters=access),  # type: ignore[arg-type]
        k=k,
    )
    if json_out:
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    typer.echo(
        f"{result['questions']} questions, mode {mode}: HitRate@1 {result['hit_rate_at_1']:.3f}  "
        f"HitRate@5 {result['hit_rate_at_5']:.3f}  MRR@10 {result['mrr_at_10']:.3f}"
    )
    for key, values in result["groups"].items():
        typer.echo(f"by {key}:")
        for value, r in values.items():
            typer.echo(
                f"  {value:12s} n={r['questions']:<4d} HitRate@1 {r['hit_rate_at_1']:.3f}  "
                f"HitRate@5 {r['hit_rate_at_5']:.3f}  MRR@10 {r['mrr_at_10']:.3f}"
            )
    for row in result["per_question"]:
        rank = row["rank"] if row["rank"] is not None else "-"
        typer.echo(f"  rank {rank!s:>2}  {row['question']}")
    for kind, items in result["failures"].items():
        if items:
            typer.echo(f"{kind}: {len(items)}")
            for q in items:
                typer.echo(f"    {q}")


@app.command()
def verify(
    source: Annotated[
        str | None,
        typer.Argument(help="The collection's source; without it only the tables are checked."),
    ] = None,
    db: DbOpt = None,
    rehash: Annotated[
        bool,
        typer.Option(
            "--rehash/--no-rehash",
            help="Hash every indexed file (else trust the change hint: size + mtime or ETag).",
        ),
    ] = True,
    erasure_scan: Annotated[
        bool,
        typer.Option(
            "--erasure-scan/--no-erasure-scan",
            help="After `forget`: read every file of the database for forgotten text.",
        ),
    ] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """Check that nothing is lost: every source file indexed (current bytes, right chunk
    count) or failed with a reason; no stray or duplicate rows; one model per table;
    after `forget`, no trace of the forgotten documents. Exits 1 on any violation."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from corpusflow.verify import nothing_lost

    report = nothing_lost(settings, source, rehash=rehash, erasure_scan=erasure_scan)
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        checked = f", {report.checked_files} source files" if source else " (no source given)"
        typer.echo(f"checked {len(report.tables)} tables{checked}")
        for line in report.violations:
            typer.echo(f"VIOLATION  {line}")
        for line in report.pending:
            typer.echo(f"pending    {line}")
        for line in report.forgotten:
            typer.echo(f"forgotten  {line}")
        for line in report.held:
            typer.echo(f"held       {line}")
        for line in report.failed:
            typer.echo(f"failed     {line}")
        if report.erasure is not None:
            e = report.erasure
            scanned = (
                f"{e['files_scanned']} files, {e['bytes_scanned']} bytes scanned for "
                f"{e['windows']} window hashes, {e['windows_found']} found"
                if e.get("scan") == "done"
                else f"byte scan {e.get('scan')}"
            )
            typer.echo(
                f"erasures   {len(e['checked'])} of {e['receipts']} receipt(s) checked: {scanned}"
            )
        typer.echo("nothing lost" if report.ok else f"{len(report.violations)} violations")
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def status(
    db: DbOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print status as JSON.")] = False,
    config: ConfigOpt = None,
    collection: CollectionOpt = None,
) -> None:
    """Documents by status, active table and model, table version, last run."""
    settings = _settings(config, db, None, collection)
    configure_environment()
    from corpusflow.api import status as get_status

    info = get_status(settings)
    if json_out:
        typer.echo(json.dumps(info, indent=2, default=str))
        return
    typer.echo(f"database    {info['db']}  collection {info['collection']}")
    docs = ", ".join(f"{k} {v}" for k, v in sorted(info["documents"].items())) or "none"
    typer.echo(f"documents   {docs}")
    if info["active_table"]:
        m = info["model"]
        typer.echo(
            f"active      {info['active_table']} (version {info['table_version']}, {info['rows']} rows)"
        )
        typer.echo(f"model       {m['model_id']} fingerprint {m['fingerprint']} dim {m['dim']}")
        if info["pinned"]:
            typer.echo(
                f"pinned      readers on version {info['pinned']['chunks']} until run "
                f"{info['pinned']['run_id']} passes its retrieval check"
            )
    else:
        typer.echo("active      none (run `corpusflow ingest`)")
    for t in info["tables"]:
        tags = ", ".join(f"{k}@{v}" for k, v in list(t["tags"].items())[-3:])
        more = f" (+{len(t['tags']) - 3} more)" if len(t["tags"]) > 3 else ""
        typer.echo(
            f"table       {t['table']} v{t['version']} {t['rows']} rows {t['role']}"
            + (f" tags: {tags}{more}" if tags else "")
        )
    run = info["last_run"]
    if run:
        typer.echo(
            f"last run    {run['run_id']} {run['kind']} {run['status']} at {run['finished_at']}: "
            f"new {run['new']}, changed {run['changed']}, unchanged {run['unchanged']}, "
            f"deleted {run['deleted']}, failed {run['failed']}, held {run.get('held') or 0}, "
            f"chunks {run['chunks_written']}"
        )
    for f in info["failed_documents"]:
        typer.echo(f"{f['status']:11s} {f['path']}: [{f['category']}] {f['message']}")
    for h in info["held_documents"]:
        typer.echo(f"{'held':11s} {h['path']}: {h['message']}")
        for q in h["questions"]:
            after = q["after"] if q["after"] is not None else "-"
            typer.echo(f"{'':14s}worse: {q['question']} (rank {q['before']} -> {after})")
    if info["held_documents"]:
        typer.echo(
            "held documents are skipped until their bytes, the question set or the pipeline "
            "change; `corpusflow accept-held SOURCE [PATH ...]` indexes them anyway"
        )


@app.command()
def formats(
    json_out: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the table as Markdown (docs/formats.md).")
    ] = False,
) -> None:
    """Every supported file kind: extensions, backend, what it needs, whether it is ready here."""
    from parsers.formats import ARCHIVE_EXTENSIONS, FORMATS

    rows: list[dict[str, Any]] = [
        {
            "format": spec.fmt,
            "extensions": list(spec.extensions),
            "description": spec.description,
            "backend": spec.backend.split(":")[0].removeprefix("parsers."),
            "fallback": spec.fallback.split(":")[0].removeprefix("parsers.")
            if spec.fallback
            else None,
            "needs": spec.needs or None,
            "missing": spec.missing(),
        }
        for spec in FORMATS
    ]
    rows.append(
        {
            "format": "archive",
            "extensions": list(ARCHIVE_EXTENSIONS),
            "description": "ZIP archive: each member is its own document, path archive.zip/member",
            "backend": "sources.archive",
            "fallback": None,
            "needs": None,
            "missing": None,
        }
    )
    if json_out:
        typer.echo(json.dumps(rows, indent=2))
        return
    if markdown:
        typer.echo("| format | extensions | backend | notes |\n|---|---|---|---|")
    for r in rows:
        needs = f" Needs {r['needs']}." if r["needs"] else ""
        if markdown:
            fallback = f" Fallback: {r['fallback']}." if r["fallback"] else ""
            typer.echo(
                f"| {r['format']} | {' '.join(r['extensions'])} | {r['backend']} | "
                f"{r['description']}.{needs}{fallback} |"
            )
            continue
        ready = f"MISSING: {r['missing']}" if r["missing"] else "ready"
        typer.echo(
            f"{r['format']:9s} {' '.join(r['extensions']):32s} {r['backend']:20s} "
            f"{r['description']}.{needs} [{ready}]"
        )


def main() -> None:
    import atexit
    import gc

    # Registered first, so it runs after every other exit handler: the interpreter's
    # shutdown then skips its full garbage collections over everything a run loaded
    # (~1.5 s of CPU after a refresh with work, measured). Nothing is lost: every write
    # is committed before the command returns, and the objects are still freed.
    atexit.register(gc.freeze)
    app()


if __name__ == "__main__":
    main()
