"""The one typed settings model.

Every knob of every stage lives here, nested per stage. Values come, in order of
precedence, from explicit overrides (CLI flags), environment variables
(``CORPUSFLOW_`` prefix, ``__`` between nesting levels, e.g.
``CORPUSFLOW_EMBED__BATCH_SIZE=64``), an optional TOML file, then defaults.
The resulting object is passed explicitly to flows and stages; nothing reads the
environment behind their back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceSettings(_Section):
    include: list[str] = Field(
        default_factory=lambda: ["**/*"], description="Glob patterns (relative) to ingest."
    )
    exclude: list[str] = Field(
        default_factory=list,
        description="Glob patterns (relative) to skip, e.g. **/groundtruth/**.",
    )
    follow_symlinks: bool = Field(
        False, description="Follow symlinks whose target stays inside the source root."
    )
    max_file_size_mb: float = Field(
        200.0, description="Larger files are not parsed; they are recorded as failed (too_large)."
    )
    hash_shortcut: bool = Field(
        True,
        description=(
            "Treat a file whose change hint is unchanged (size + mtime locally; ETag or version "
            "id plus size on object stores) as unchanged without hashing it."
        ),
    )
    expand_archives: bool = Field(
        True,
        description=(
            "List the members of .zip archives in local folders as documents of their own "
            "(path archive.zip/member); off: a .zip is refused as unsupported."
        ),
    )
    archive_max_members: int = Field(
        100_000, description="An archive with more members is not expanded (zip-bomb guard)."
    )
    archive_max_uncompressed_mb: float = Field(
        8192.0, description="An archive inflating to more is not expanded (zip-bomb guard)."
    )
    archive_max_ratio: float = Field(
        200.0, description="An archive with a member compressed beyond this ratio is not expanded."
    )
    archive_max_depth: int = Field(
        3,
        ge=0,
        description=(
            "ZIPs inside ZIPs are expanded as nested folders down to this depth (0: nested "
            "archives are not expanded); the other archive limits count over all levels."
        ),
    )
    archive_name_encoding: str = Field(
        "auto",
        description=(
            "Encoding of ZIP member names stored without the UTF-8 flag: auto (decided from "
            "the names' bytes: UTF-8, GBK, Shift-JIS, Big5, EUC-KR or cp437) or a Python "
            "codec name such as gbk or cp932."
        ),
    )
    expand_messages: bool = Field(
        True,
        description=(
            "List the attachments of .eml and Outlook .msg messages in local folders as documents of "
            "their own (path mail.eml/attachment.pdf, parsed by their own format) beside the "
            "message's body and headers (mail.eml); off: a message is one document."
        ),
    )
    message_max_attachments: int = Field(
        1000,
        ge=0,
        description=(
            "A message with more attachments (nested messages' included) is not expanded and "
            "fails too_large (e-mail bomb guard)."
        ),
    )
    message_max_decoded_mb: float = Field(
        1024.0,
        description=(
            "A message whose attachments decode to more (nested messages' included) is not "
            "expanded and fails too_large (e-mail bomb guard)."
        ),
    )
    message_max_depth: int = Field(
        3,
        ge=0,
        description=(
            "Messages attached to messages (forwarded as attachments) are expanded as nested "
            "folders down to this depth; a deeper one fails too_large."
        ),
    )
    listing_cache: str = Field(
        "",
        description=(
            "SQLite file remembering each e-mail message's listing by its path, size, mtime "
            "and ctime, so a nightly refresh does not read unchanged messages again to list "
            "their attachments (used where hash_shortcut is on); empty: "
            "$XDG_CACHE_HOME/corpusflow/listings.sqlite (~/.cache/...); off: read every time."
        ),
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Options for an object-store source (boto3 for s3://, fsspec otherwise), e.g. "
            "endpoint_url, region. Credentials come from the provider's own environment."
        ),
    )

    @field_validator("archive_name_encoding")
    @classmethod
    def _known_codec(cls, value: str) -> str:
        import codecs

        if value != "auto":
            try:
                codecs.lookup(value)
            except LookupError as exc:
                raise ValueError(f"{exc} (use auto, or a codec name such as gbk)") from exc
        return value


class PasswordRule(_Section):
    match: str = Field(
        description=(
            "Glob of the files this password opens, relative to the source root as "
            "source.include (finance/**/*.xlsx); for an archive member, archive.zip/member."
        )
    )
    password_env: str = Field(
        description=(
            "Environment variable that holds the password (the password itself is never "
            "written in a settings file)."
        )
    )


class ParseSettings(_Section):
    timeout_s: float = Field(300.0, description="Wall-clock limit for parsing one document.")
    memory_limit_mb: int = Field(
        1536,
        description=(
            "Resident memory cap of a parser process and everything it starts (LibreOffice "
            "included), per parser (parse.workers). The default keeps a whole ingest with one "
            "worker (CLI ~0.9 GiB, API server ~0.2 GiB, parser) within 3 GiB."
        ),
    )
    workers: int = Field(1, ge=1, description="Parser child processes running at once.")
    nice: int = Field(
        10,
        ge=0,
        le=19,
        description=(
            "Scheduling niceness added to parser children (Unix): embedding, the stage "
            "that paces a run, gets the CPU first; parsers use what it leaves. 0 = equal."
        ),
    )
    max_pages: int = Field(2000, description="Documents with more pages are refused.")
    ocr: bool = Field(True, description="OCR pages that have no usable text layer.")
    ocr_engine: Literal["rapidocr"] = "rapidocr"
    ocr_min_chars_per_page: int = Field(
        16,
        description=(
            "A PDF page with fewer extracted characters is OCR'd: a scan is read by OCR "
            "alone; a thin text layer of real words stays, and OCR adds its pictures' text."
        ),
    )
    ocr_scale: float = Field(2.0, description="Render scale (x 72 dpi) for OCR.")
    pdf_pipeline: Literal["auto", "offline", "layout"] = Field(
        "auto",
        description=(
            "'layout' uses docling's layout+TableFormer models (must be available locally); "
            "'offline' uses the model-free path; 'auto' picks layout when its models are present."
        ),
    )
    join_continued_tables: bool = Field(
        True,
        description=(
            "Join a PDF table continued on the next page (same columns, at the bottom of one "
            "page and the top of the next with only page furniture between, its first row a "
            "repeated header, dropped, or not a header) into one table, so every row is "
            "chunked with its header; each join is listed in the parse warnings "
            "(source table-joins). Off: one table per page."
        ),
    )
    artifacts_path: str = Field(
        "",
        description=(
            "Directory of docling's pre-fetched models (layout, TableFormer) for the layout "
            "PDF pipeline; empty = docling's default cache. See docs/operations.md."
        ),
    )
    page_isolation: bool = Field(
        True,
        description=(
            "A PDF whose parse crashed, timed out or ran out of memory is parsed again in "
            "page ranges (a failing range is halved until the bad pages are isolated); "
            "those pages are read by the raw text layer, then OCR, or listed as missing, "
            "and the document is indexed as partial. Off: the whole document fails."
        ),
    )
    page_batch: int = Field(
        100,
        ge=0,
        description=(
            "PDFs with more pages than this are parsed in ranges of at most this many pages "
            "(the fewest ranges, of even lengths; each range in the parser process, with its "
            "own deadline), so the parser's peak memory does not grow with the page count; "
            "shorter PDFs are parsed whole. The ranges are merged into the whole document's "
            "structure: the PDF outline's headings, one heading level per style across all "
            "ranges, lists and tables continued over a range boundary. 0 = parse whole and "
            "split only after a failure."
        ),
    )
    page_timeout_min_s: float = Field(
        20.0,
        gt=0,
        description=(
            "Floor of a page range's deadline: a range gets parse.timeout_s x its share of "
            "the document's pages, at least this, at most parse.timeout_s. Also the deadline "
            "of each per-page fallback (text layer, OCR)."
        ),
    )
    repro_dir: str = Field(
        "",
        description=(
            "Folder for repro bundles of pages that every backend failed on (the page as "
            "a one-page PDF and a JSON with each backend's error, versions and settings), "
            "in <content sha256 prefix>/page-N.*. Empty = off: a bundle copies document "
            "content, so keeping it is opt-in; corpusflow forget removes a document's bundles."
        ),
    )
    passwords: list[PasswordRule] = Field(
        default_factory=list,
        description=(
            "Passwords for encrypted PDF and Office files (DOCX/XLSX/PPTX, Word and Excel "
            "97-2003; not PowerPoint 97-2003), by path: the first rule whose glob matches a document's "
            "path gives its password. A document that failed 'encrypted' is read after "
            "its rule is added and `corpusflow retry-failed` runs."
        ),
    )
    zip_max_members: int = Field(
        10_000, description="ZIP container pre-check (office, OpenDocument, EPUB): member cap."
    )
    zip_max_uncompressed_mb: int = Field(
        1024, description="ZIP container pre-check: total uncompressed size cap."
    )
    zip_max_ratio: float = Field(
        200.0, description="ZIP container pre-check: compression ratio cap."
    )


class ChunkSettings(_Section):
    strategy: Literal["structure", "fixed"] = Field(
        "structure",
        description=(
            "structure: docling HybridChunker (sections, tables, lists kept whole); "
            "fixed: plain token windows over the Markdown (a baseline for comparisons)."
        ),
    )
    overlap_tokens: int = Field(
        0, ge=0, description="Tokens shared by consecutive chunks (fixed strategy)."
    )
    parents: bool = Field(
        True,
        description="Link each chunk to its section (parent) for context; off: parent = chunk.",
    )
    max_tokens: int = Field(
        0,
        ge=0,
        description="Chunk size cap in the embedding model's tokens; 0 = the model's max length.",
    )
    merge_peers: bool = Field(True, description="Merge small neighbouring chunks of one section.")
    parent_max_tokens: int = Field(
        1024, description="Token budget of a parent (section) chunk returned for context."
    )
    contextual: Literal["none", "deterministic", "llm"] = Field(
        "deterministic",
        description=(
            "Context prefix for each chunk: none, deterministic (title + heading path + the "
            "section's first sentence), or llm (contextual retrieval through [llm])."
        ),
    )
    timeout_s: float = Field(
        600.0,
        ge=0.0,
        description=(
            "Wall-clock limit for chunking one document (its LLM context requests "
            "included); a document over it fails as too_large and the run goes on. "
            "0 = no limit."
        ),
    )


class LLMSettings(_Section):
    base_url: str | None = Field(
        None, description="OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1."
    )
    model: str = Field("default", description="Model name sent in each request.")
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="Name of the environment variable holding the API key."
    )
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout.")
    max_concurrency: int = Field(4, ge=1, description="Requests in flight per document.")
    max_attempts: int = Field(
        5, ge=1, description="Attempts per request on 429, 5xx and timeouts (exponential backoff)."
    )
    max_document_tokens: int = Field(
        6000,
        ge=256,
        description="The document text sent with each chunk is cut to about this many tokens.",
    )
    context_max_tokens: int = Field(100, ge=16, description="max_tokens of each completion.")
    prompt_version: str = Field("1", description="Bump to invalidate cached contexts.")


class EmbedSettings(_Section):
    model: str | None = Field(
        None,
        description=(
            "Preset name (use-m3, minilm, bge-m3), a Hugging Face model id, or a local directory. "
            "Unset: the active table's model, or use-m3 for a new collection."
        ),
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"
    batch_size: int = Field(32, ge=1)
    numpy_texts: int = Field(
        256,
        ge=0,
        description="Chunks a run embeds with the NumPy encoder (same vectors, no torch start) "
        "before it starts the model's own backend, for dense BERT models it can reproduce "
        "(the bundled MiniLM; not BGE-M3). About what starting torch costs; 0 = never.",
    )
    max_length: int = Field(0, ge=0, description="Max tokens per input; 0 = the preset's default.")
    checkpoint_every: int = Field(
        1,
        ge=1,
        description="Save embedded vectors to the embedding cache (the resume point of a killed run) every N batches.",
    )


class StorageSettings(_Section):
    db: str = Field(".corpusflow/db", description="LanceDB URI (directory or s3:// URI).")
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "LanceDB storage_options for an object-store database (endpoint, region, "
            "allow_http). Credentials come from the provider's own environment."
        ),
    )
    collection: str = Field("default", description="Name of the collection inside the database.")
    cache_mib: int = Field(
        256,
        ge=16,
        description=(
            "Lance's in-process index cache, MiB: vector, full-text and scalar index pages "
            "that searches read again. A long-lived search API on a large table gains from "
            "more."
        ),
    )
    metadata_cache_mib: int = Field(
        32,
        ge=4,
        description=(
            "Lance's in-process metadata cache, MiB: manifests and fragment metadata of the "
            "table versions read. Every commit makes a version, so this fills as a run goes "
            "(~24 KiB per document, a third of what the flow process grew by at 256 MiB) "
            "and only the latest version's is read again; at 1-256 MiB the same commits "
            "take the same time (docs/benchmarks.md)."
        ),
    )
    write_batch_docs: int = Field(
        32, ge=1, description="Documents whose chunks are committed in one Lance transaction."
    )
    max_delete_fraction: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Refuse a run that would delete more than this share of indexed documents.",
    )
    vector_index_min_rows: int = Field(
        50_000, ge=1, description="Build a vector index only once a chunk table has this many rows."
    )
    ivf_pq_min_rows: int = Field(
        2_000_000,
        ge=1,
        description="From this many rows use IVF_PQ (compact) instead of IVF_HNSW_SQ.",
    )
    retention_days: float = Field(
        7.0,
        ge=0.0,
        description="`corpusflow maintain` removes table versions older than this (tagged versions stay).",
    )
    tag_retention_days: float = Field(
        30.0,
        ge=0.0,
        description="`corpusflow maintain` deletes run tags older than this, unpinning their versions.",
    )
    lease_wait_s: float = Field(
        0.0, ge=0.0, description="Wait this long for another run's lease; 0 = fail at once."
    )


ApprovalReason = Literal["deletions", "budgets"]
APPROVAL_REASONS: tuple[ApprovalReason, ...] = ("deletions", "budgets")


class RunSettings(_Section):
    task_runner: Literal["threads", "dask"] = Field(
        "threads",
        description=(
            "Where per-document parse tasks run: 'threads' in this process (each parse still "
            "in its own child process), 'dask' on a Dask cluster via prefect-dask."
        ),
    )
    dask_address: str = Field(
        "",
        description="Scheduler address of an existing Dask cluster; empty = a LocalCluster.",
    )
    dask_workers: int = Field(
        2, ge=1, description="Worker processes of the LocalCluster (dask without an address)."
    )
    dask_parse_resources: dict[str, float] = Field(
        default_factory=dict,
        description=(
            "Dask worker resources a parse task needs (e.g. {'cpu': 1}): parse tasks go "
            "only to workers started with them. Empty = any worker."
        ),
    )
    dask_embed_resources: dict[str, float] = Field(
        default_factory=dict,
        description=(
            "With task_runner='dask': embedding batches are encoded on cluster workers "
            "offering these resources (e.g. {'gpu': 1}), each loading the model once; the "
            "checkpoint and the commits stay in the flow process. Empty = encode in the "
            "flow process."
        ),
    )
    documents_per_task: int = Field(
        1,
        ge=1,
        description=(
            "Documents per Prefect parse task run. 1: one task run per document, named after "
            "its path. More (e.g. 50 for a first ingest of millions): one task run per group, "
            "and each failed document still gets its own failed task run named after its "
            "path; the Prefect database grows per group instead of per document."
        ),
    )
    max_in_flight: int = Field(
        0,
        ge=0,
        description=(
            "Documents submitted or parsed but not yet committed, at most; parsing waits "
            "while a batch is embedded (backpressure), so memory does not grow with the "
            "corpus. 0 = storage.write_batch_docs + 2 x parse.workers."
        ),
    )
    task_retries: int = Field(
        1,
        ge=0,
        description=(
            "Retries of a document's parse+chunk and of a batch's embed+commit on transient "
            "failures (crashed parser, file changing while read, I/O errors), whichever "
            "executor runs them (one policy: corpusflow.retry); terminal failures are never "
            "retried."
        ),
    )
    retry_delay_s: float = Field(5.0, ge=0.0, description="Delay before retry n: n x this.")
    quarantine_after: int = Field(
        3, ge=1, description="A document failing this many runs in a row is quarantined."
    )
    progress: bool = Field(True, description="Show progress bars when stdout is a terminal.")
    ephemeral_api_min_documents: int = Field(
        50,
        ge=0,
        description=(
            "Without PREFECT_API_URL, a CLI run with fewer documents to process than this "
            "runs in-process instead of starting Prefect's ephemeral API (~9 s of CPU per "
            "run); its run record and failed documents are in `corpusflow status` either "
            "way. 0 = always start it. With a configured server, or task_runner='dask', "
            "every run with work is a Prefect flow run."
        ),
    )
    prestart_parser: bool = Field(
        True,
        description=(
            "A CLI refresh starts one parser process before it plans, so the parser's "
            "imports (~6 s of CPU) overlap with opening the store and planning. A plan "
            "with nothing to parse kills it unused (1-2 s of CPU on another core). "
            "false = start parsers only once the plan has work."
        ),
    )
    max_wall: float = Field(
        0.0,
        ge=0.0,
        description=(
            "Budget: seconds of wall time a refresh may take. Before each batch is embedded "
            "and committed, a run whose elapsed time plus the batch's estimated time would "
            "pass it stops cleanly: what is committed stays, the rest stays new/changed in "
            "the ledger for the next run (exit code 3). 0 = no limit."
        ),
    )
    max_embedded: int = Field(
        0,
        ge=0,
        description=(
            "Budget: chunks a refresh may send to the embedding model; a batch that would "
            "pass it is committed only as far as its documents fit, then the run stops "
            "cleanly (exit code 3). 0 = no limit."
        ),
    )
    max_llm_tokens: int = Field(
        0,
        ge=0,
        description=(
            "Budget: LLM tokens (prompt + completion) a refresh may spend on contextual "
            "prefixes (chunk.contextual='llm'); no document is started once the tokens "
            "spent plus one document's estimate would pass it (exit code 3). 0 = no limit."
        ),
    )
    max_cost: float = Field(
        0.0,
        ge=0.0,
        description=(
            "Budget: money a refresh may spend, priced by the cost.* settings (CPU/GPU "
            "seconds measured, LLM tokens); checked before each batch like run.max_wall "
            "(exit code 3). 0 = no limit."
        ),
    )
    approval: list[ApprovalReason] = Field(
        default_factory=lambda: list(APPROVAL_REASONS),
        description=(
            "In a Prefect flow run (refresh_flow, reindex_flow, their deployments), what "
            "pauses the run for an operator's answer in the UI before its first write "
            "instead of refusing or stopping it: 'deletions' = the deletion guard "
            "(storage.max_delete_fraction) would refuse the run; 'budgets' = the plan "
            "predicts a run.max_* budget would stop it. Answers: approve, trim (no "
            "deletions), reject (docs/operations.md, 'Approving a run'). [] = never ask: "
            "the guard refuses and budgets stop the run, as on the CLI, which never asks."
        ),
    )
    approval_timeout_s: int = Field(
        3600,
        ge=1,
        description=(
            "Seconds a paused run waits for an answer; then Prefect fails the flow run and "
            "nothing is changed (no deletion, no document, no run record)."
        ),
    )
    approval_poll_s: int = Field(
        10,
        ge=1,
        description="Seconds between the paused flow run's checks for an answer.",
    )


class CostSettings(_Section):
    """Prices for `corpusflow plan` and run.max_cost; 0 = unknown (no money shown)."""

    cpu_hour: float = Field(
        0.0, ge=0.0, description="Price of one CPU-hour (parse, chunk, write; embed on CPU)."
    )
    gpu_hour: float = Field(
        0.0,
        ge=0.0,
        description="Price of one GPU-hour, charged for embedding when embed.device='cuda'.",
    )
    llm_per_mtok: float = Field(
        0.0,
        ge=0.0,
        description="Price of one million LLM tokens (prompt + completion) of contextual prefixes.",
    )
    currency: str = Field("", description="Shown after amounts, e.g. 'USD'.")


class CheckSettings(_Section):
    questions: str | None = Field(
        None,
        description=(
            "Question set (the `corpusflow eval` JSONL format) run against the table before and "
            "after every refresh and reindex that changes it; unset = no retrieval check."
        ),
    )
    margin: float | None = Field(
        None,
        description=(
            "Allowed drop in HitRate@5 and MRR@10. A refresh worse by more is undone (the chunk, "
            "parent and ledger tables are restored to their pre-run versions and the run fails) "
            "and its documents are held: skipped by later refreshes until their bytes, the "
            "question set or these settings change, or `corpusflow accept-held`; a reindex "
            "table worse by more is not activated. Unset = report only, never undo."
        ),
    )
    mode: Literal["dense", "sparse", "keyword", "hybrid"] = Field(
        "hybrid", description="Search mode the questions are asked in."
    )
    k: int = Field(5, ge=1, description="Cut-off of the reported hit rate (HitRate@k).")


class SearchSettings(_Section):
    rrf_k: int | None = Field(
        None,
        ge=1,
        description="Rank constant of the hybrid fusion; unset: the model's default "
        "(5 for use-m3, 60 for other models).",
    )
    dense_weight: float | None = Field(
        None,
        ge=0,
        description="Weight of the dense leg in hybrid search; unset: the model's default "
        "(1.5 for use-m3, 1 for other models).",
    )
    keyword_weight: float = Field(
        1.0,
        ge=0,
        description="Weight of the keyword (or sparse) leg in hybrid search, for a query "
        "without Chinese, Japanese or Korean characters.",
    )
    keyword_weight_cjk: float = Field(
        1.0,
        ge=0,
        description="Weight of the keyword (or sparse) leg for a query with Chinese, "
        "Japanese or Korean characters (the ICU keyword index segments them into words).",
    )
    keyword_language_floor: float = Field(
        0.5,
        ge=0,
        le=1,
        description="For a query with Chinese, Japanese or Korean characters, the keyword (or "
        "sparse) leg weighs keyword_weight_cjk x (floor + (1 - floor) x the share of the dense "
        "leg's top 10 written in the query's language): this floor is what it keeps when none "
        "is. 1: the leg's weight does not depend on the language.",
    )
    cjk_bigram_weight: float = Field(
        1.0,
        ge=0,
        description="Weight of the CJK bigram leg in hybrid search, a third leg for a query "
        "with Chinese, Japanese or Korean characters (every pair of adjacent characters "
        "matched, where a dictionary's word boundaries and the question's differ). Scaled by "
        "the share of the dense leg's top 10 written in the query's language: a question "
        "whose answers look to be in another language gets little of it. 0: off.",
    )
    distinct_parents: bool = Field(
        True,
        description="Hybrid search returns at most one chunk per parent section while other "
        "candidates remain: a section's later chunks come after every other section's first "
        "(each hit carries its parent section's text, so a second chunk of the same section "
        "adds no context). False: the fused order as it is.",
    )


class Settings(BaseSettings):
    """All corpusflow configuration. See docs/configuration.md."""

    model_config = SettingsConfigDict(
        env_prefix="CORPUSFLOW_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    source: SourceSettings = Field(default_factory=SourceSettings)
    parse: ParseSettings = Field(default_factory=ParseSettings)
    chunk: ChunkSettings = Field(default_factory=ChunkSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    check: CheckSettings = Field(default_factory=CheckSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    cost: CostSettings = Field(default_factory=CostSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_file = _TOML_FILE.get("path")
        if toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)


# The TOML path is handed to settings_customise_sources for the duration of one
# load_settings() call; pydantic-settings offers no per-instance hook for it.
_TOML_FILE: dict[str, Path | None] = {}


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_settings(
    config_file: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> Settings:
    """Build Settings from overrides > environment > TOML file > defaults.

    ``overrides`` is a nested dict, e.g. ``{"storage": {"db": "/data/db"}}``.
    """
    path = Path(config_file) if config_file is not None else None
    if path is not None and not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    _TOML_FILE["path"] = path
    try:
        base = Settings()
        if not overrides:
            return base
        merged = _deep_merge(base.model_dump(), overrides)
        return Settings.model_validate(merged)
    finally:
        _TOML_FILE.pop("path", None)
