"""docling's layout-model PDF pipeline (layout detection + TableFormer), offline only.

The standard docling PDF pipeline finds headings, tables (with TableFormer's
cell structure), figures and the reading order with two models from the
Hugging Face Hub. This machine class cannot reach the Hub, so the models must
be fetched beforehand (``docling-tools models download layout tableformer -o
DIR``) and this module only ever *looks* for them, the way docling does:

1. ``parse.artifacts_path`` when set, else the ``DOCLING_ARTIFACTS_PATH``
   environment variable (docling's own setting): a directory laid out as
   ``docling-tools models download -o DIR`` writes it;
2. otherwise the Hugging Face cache (``HF_HUB_CACHE`` / ``HF_HOME``), where
   docling's own downloads land when no artifacts path is configured.

Nothing here downloads: the converter is always given an explicit artifacts
directory (for the HF cache, a per-process directory of links to the cached
snapshots), and the Hub is switched to offline mode while it runs.

OCR: docling's own OCR stage is switched off. With an artifacts path docling
would also demand its OCR models there, and it does not turn right-angle
rotated scans. Pages that come out of the layout pipeline with (almost) no
text are read by ``parsers.pdf.ocr`` instead, the same rotation-aware RapidOCR
fallback as the model-free path, and spliced into the document at their page.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.settings import ParseSettings
from parsers.models import BackendResult, ParseWarning

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument, NodeItem

# The models docling 2.143's standard PDF pipeline loads by default
# (tests/parsers/test_pdf_pipelines.py checks these against docling's own definitions).
# Layout: LayoutObjectDetectionOptions() -> the RT-DETR "heron" model, Transformers engine.
LAYOUT_REPO = "docling-project/docling-layout-heron"
LAYOUT_REVISION = "main"
# TableFormer: TableStructureModel, mode "accurate".
TABLEFORMER_REPO = "docling-project/docling-models"
TABLEFORMER_REVISION = "v2.3.0"
TABLEFORMER_SUBDIR = "model_artifacts/tableformer"
TABLEFORMER_MODE = "accurate"
# Python packages the two models need beyond what corpusflow installs
# (docling-slim's "models-local" extra brings them).
LAYOUT_PACKAGES = ("torch", "transformers", "docling_ibm_models")

_LAYOUT_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")

PREFETCH_HELP = (
    "On a machine with internet access run "
    "`docling-tools models download layout tableformer -o DIR` "
    "(or in Python: docling.utils.model_downloader.download_models(output_dir=Path(DIR), "
    "with_layout=True, with_tableformer=True, with_code_formula=False, "
    "with_picture_classifier=False, with_rapidocr=False)), copy DIR to this machine and "
    "set parse.artifacts_path (env CORPUSFLOW_PARSE__ARTIFACTS_PATH) or DOCLING_ARTIFACTS_PATH "
    "to it; the model code comes with `pip install 'docling-slim[models-local]==2.143.0'`. "
    "Or use parse.pdf_pipeline='auto' (layout when available, else the model-free path) "
    "or 'offline'."
)


def repo_folder(repo_id: str) -> str:
    """The folder name docling gives a Hub repository under an artifacts path."""
    return repo_id.replace("/", "--")


@dataclass(frozen=True, slots=True)
class LayoutModels:
    """Where docling's layout and TableFormer models are on this machine, if anywhere.

    ``artifacts_dir`` is the directory to hand docling as ``artifacts_path``
    (``None`` when the models come from the Hugging Face cache: then
    ``layout_dir``/``tableformer_dir`` are the cached snapshot folders).
    """

    source: str  # "parse.artifacts_path" | "DOCLING_ARTIFACTS_PATH" | "huggingface-cache"
    artifacts_dir: Path | None
    layout_dir: Path | None
    tableformer_dir: Path | None  # the ".../tableformer/accurate" folder
    missing: tuple[str, ...] = field(default=())

    @property
    def available(self) -> bool:
        return not self.missing

    def describe(self) -> str:
        where = str(self.artifacts_dir) if self.artifacts_dir else self.source
        if self.available:
            return f"layout models found in {where}"
        return f"layout models not usable ({where}): " + "; ".join(self.missing)


def _configured_artifacts(settings: ParseSettings) -> tuple[str, Path] | None:
    if settings.artifacts_path.strip():
        return "parse.artifacts_path", Path(settings.artifacts_path.strip()).expanduser()
    env = os.environ.get("DOCLING_ARTIFACTS_PATH", "").strip()
    if env:
        return "DOCLING_ARTIFACTS_PATH", Path(env).expanduser()
    return None


def _layout_files_missing(folder: Path | None) -> list[str]:
    """What AutoModelForObjectDetection / AutoImageProcessor.from_pretrained would lack."""
    if folder is None or not folder.is_dir():
        return [f"no {LAYOUT_REPO} model folder" + (f" at {folder}" if folder else "")]
    missing = [
        f"{folder / name} is missing"
        for name in ("config.json", "preprocessor_config.json")
        if not (folder / name).is_file()
    ]
    if not any((folder / name).is_file() for name in _LAYOUT_WEIGHTS):
        missing.append(f"no weights ({' / '.join(_LAYOUT_WEIGHTS)}) in {folder}")
    return missing


def _tableformer_files_missing(folder: Path | None) -> list[str]:
    """What docling_ibm_models' TFPredictor would lack: tm_config.json + tableformer_*.safetensors."""
    if folder is None or not folder.is_dir():
        return [
            f"no TableFormer ({TABLEFORMER_REPO}) {TABLEFORMER_MODE} model folder"
            + (f" at {folder}" if folder else "")
        ]
    missing = []
    if not (folder / "tm_config.json").is_file():
        missing.append(f"{folder / 'tm_config.json'} is missing")
    if not any(folder.glob("tableformer_*.safetensors")):
        missing.append(f"no tableformer_*.safetensors in {folder}")
    return missing


def _tableformer_dir_in(artifacts: Path) -> Path:
    """Where TableStructureModel looks under an artifacts path (docling's own precedence)."""
    if (artifacts / repo_folder(TABLEFORMER_REPO)).exists():
        base = artifacts / repo_folder(TABLEFORMER_REPO) / TABLEFORMER_SUBDIR
    elif (artifacts / TABLEFORMER_SUBDIR).exists():  # docling's deprecated layout
        base = artifacts / TABLEFORMER_SUBDIR
    else:
        base = artifacts
    return base / TABLEFORMER_MODE


def _hf_snapshot_of(repo_id: str, revision: str, filename: str, cache_dir: str) -> Path | None:
    """The cached snapshot folder holding ``filename`` of ``repo_id@revision``; never downloads.

    Read straight from the Hugging Face cache layout (``models--<org>--<name>/refs/<rev>``
    naming the commit, ``snapshots/<commit>/<file>``), as ``try_to_load_from_cache`` does:
    that function imports huggingface_hub's download stack (requests and more, ~0.5 s), and
    every run's plan asks this question for its parser fingerprint, parse work or not."""
    repo = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    commit = revision
    ref = repo / "refs" / revision
    if ref.is_file():
        commit = ref.read_text().strip()
    snapshot = repo / "snapshots" / commit
    return snapshot if (snapshot / filename).is_file() else None


def _missing_packages() -> list[str]:
    return [
        f"Python package {name!r} is not installed"
        for name in LAYOUT_PACKAGES
        if not find_spec(name)
    ]


def layout_models_status(settings: ParseSettings) -> LayoutModels:
    """Look for the layout and TableFormer models where docling would; cheap, no network."""
    configured = _configured_artifacts(settings)
    if configured is not None:
        source, artifacts = configured
        if not artifacts.is_dir():
            return LayoutModels(source, artifacts, None, None, (f"{artifacts} is not a directory",))
        layout_dir = artifacts / repo_folder(LAYOUT_REPO)
        table_dir = _tableformer_dir_in(artifacts)
        missing = _layout_files_missing(layout_dir) + _tableformer_files_missing(table_dir)
        return LayoutModels(
            source, artifacts, layout_dir, table_dir, tuple(missing + _missing_packages())
        )
    from huggingface_hub import constants

    cache = str(constants.HF_HUB_CACHE)
    layout_snap = _hf_snapshot_of(LAYOUT_REPO, LAYOUT_REVISION, "config.json", cache)
    tm_config = f"{TABLEFORMER_SUBDIR}/{TABLEFORMER_MODE}/tm_config.json"
    table_snap = _hf_snapshot_of(TABLEFORMER_REPO, TABLEFORMER_REVISION, tm_config, cache)
    cached_table_dir = table_snap / TABLEFORMER_SUBDIR / TABLEFORMER_MODE if table_snap else None
    missing = _layout_files_missing(layout_snap) + _tableformer_files_missing(cached_table_dir)
    if layout_snap is None or table_snap is None:
        missing.append(f"not in the Hugging Face cache {cache}")
    return LayoutModels(
        "huggingface-cache",
        None,
        layout_snap,
        cached_table_dir,
        tuple(missing + _missing_packages()),
    )


def layout_models_available(settings: ParseSettings) -> bool:
    """True when docling's layout pipeline can run here without downloading anything."""
    return layout_models_status(settings).available


def fingerprint_part(settings: ParseSettings) -> dict[str, object]:
    """What the parser fingerprint needs to know about the PDF path that will run."""
    if settings.pdf_pipeline == "offline":
        return {"pdf_path": "offline"}
    if settings.pdf_pipeline == "auto" and not layout_models_available(settings):
        return {"pdf_path": "offline"}
    return {
        "pdf_path": "layout",
        "layout_model": f"{LAYOUT_REPO}@{LAYOUT_REVISION}",
        "table_model": f"{TABLEFORMER_REPO}@{TABLEFORMER_REVISION}/{TABLEFORMER_MODE}",
    }


@functools.lru_cache(maxsize=4)
def _hf_cache_view(layout_dir: str, tableformer_snapshot: str) -> str:
    """An artifacts directory (links) over the Hugging Face cache snapshots, one per process.

    docling's loaders take the Hub path only when no artifacts path is given, and
    that path asks the Hub for the latest revision first. Links laid out like
    ``docling-tools models download -o DIR`` let docling load from disk alone.
    """
    import atexit
    import shutil
    import tempfile

    view = Path(tempfile.mkdtemp(prefix="corpusflow-docling-models-"))
    atexit.register(shutil.rmtree, view, ignore_errors=True)
    (view / repo_folder(LAYOUT_REPO)).symlink_to(layout_dir, target_is_directory=True)
    (view / repo_folder(TABLEFORMER_REPO)).symlink_to(
        tableformer_snapshot, target_is_directory=True
    )
    return str(view)


def _artifacts_for(models: LayoutModels) -> str:
    if models.artifacts_dir is not None:
        return str(models.artifacts_dir)
    assert models.layout_dir is not None and models.tableformer_dir is not None
    snapshot = models.tableformer_dir.parents[len(Path(TABLEFORMER_SUBDIR).parts)]
    return _hf_cache_view(str(models.layout_dir), str(snapshot))


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    """Hugging Face Hub and transformers in offline mode for the duration (restored after)."""
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(dict.fromkeys(keys, "1"))
    from huggingface_hub import constants
    from huggingface_hub.utils import reset_sessions

    was_offline = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    reset_sessions()  # sessions made before now would still reach the network
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was_offline
        reset_sessions()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def layout_pipeline_options(artifacts_path: str) -> Any:
    """docling's standard PDF pipeline options: layout + TableFormer from ``artifacts_path``."""
    from docling.datamodel.pipeline_options import (
        PdfPipelineOptions,
        TableFormerMode,
        TableStructureOptions,
    )

    return PdfPipelineOptions(
        artifacts_path=artifacts_path,
        do_table_structure=True,
        table_structure_options=TableStructureOptions(
            do_cell_matching=True, mode=TableFormerMode(TABLEFORMER_MODE)
        ),
        do_ocr=False,  # scanned pages go through parsers.pdf.ocr (see the module docstring)
        generate_page_images=False,
        generate_picture_images=False,
        enable_remote_services=False,
    )


@functools.lru_cache(maxsize=2)
def layout_converter(artifacts_path: str) -> Any:
    """One layout-pipeline converter per parser process and artifacts directory."""
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter, PdfFormatOption

    converter = DocumentConverter(
        allowed_formats=[InputFormat.PDF],
        format_options={
            InputFormat.PDF: PdfFormatOption(
                pipeline_options=layout_pipeline_options(artifacts_path)
            )
        },
    )
    converter.initialize_pipeline(InputFormat.PDF)  # loads the models now, not mid-document
    return converter


def warm_up_layout(settings: ParseSettings) -> None:
    """Load the layout models now when PDFs will go through them (a no-op otherwise)."""
    if settings.pdf_pipeline == "offline":
        return
    models = layout_models_status(settings)
    if models.available:
        with hub_offline():
            layout_converter(_artifacts_for(models))


def _page_chars(doc: DoclingDocument) -> dict[int, int]:
    from docling_core.types.doc import TableItem, TextItem

    chars: dict[int, int] = {}
    for item, _level in doc.iterate_items():
        if isinstance(item, TextItem):
            n = len(item.text.strip())
        elif isinstance(item, TableItem):
            n = sum(len(c.text.strip()) for c in item.data.table_cells)
        else:
            continue
        for prov in item.prov:
            chars[prov.page_no] = chars.get(prov.page_no, 0) + n
    return chars


def _top_level(doc: DoclingDocument, item: NodeItem) -> NodeItem:
    """The ancestor of ``item`` that sits directly in the body (or the item itself)."""
    while item.parent is not None and item.parent.cref != doc.body.self_ref:
        item = item.parent.resolve(doc)
    return item


def _first_page(item: Any) -> int | None:
    provs = getattr(item, "prov", None) or []
    return min((p.page_no for p in provs), default=None)


def _splice_page(doc: DoclingDocument, page_no: int, page_doc: DoclingDocument) -> None:
    """Put ``page_doc``'s items at page ``page_no``'s place in ``doc``'s reading order,
    replacing the (few) text items the layout pipeline found there."""
    from docling_core.types.doc import TextItem

    stale: list[NodeItem] = [
        item
        for item, _ in doc.iterate_items()
        if isinstance(item, TextItem) and _first_page(item) == page_no
    ]
    if stale:
        doc.delete_items(node_items=stale)
    before: NodeItem | None = None
    after: NodeItem | None = None
    for item, _ in doc.iterate_items():
        page = _first_page(item)
        if page is None:
            continue
        if page <= page_no:
            before = item
        elif after is None:
            after = item
    if before is not None:
        doc.insert_document(page_doc, sibling=_top_level(doc, before), after=True)
    elif after is not None:
        doc.insert_document(page_doc, sibling=_top_level(doc, after), after=False)
    else:
        doc.add_document(page_doc)


def _ocr_sparse_pages(
    path: Path, doc: DoclingDocument, page_count: int, settings: ParseSettings
) -> tuple[list[ParseWarning], list[int], list[int], bool]:
    """OCR the pages with no usable text (scans, and pages the pipeline failed on).

    Returns (warnings, failed pages, pages still missing, whether a page was OCR'd).
    """
    from docling_core.types.doc import Size

    from parsers.pdf.assemble import lines_to_document
    from parsers.pdf.ocr import ocr_pdf_pages
    from parsers.pdf.primitives import page_sizes

    failed = [p for p in range(1, page_count + 1) if p not in doc.pages]
    warnings = [ParseWarning("pdf-layout", "layout pipeline failed", p) for p in failed]
    if not settings.ocr:
        return warnings, failed, failed, False
    chars = _page_chars(doc)
    sparse = [
        p for p in range(1, page_count + 1) if chars.get(p, 0) < settings.ocr_min_chars_per_page
    ]
    if not sparse:
        return warnings, failed, failed, False
    lines, ocr_warnings, ocr_failed, turned = ocr_pdf_pages(path, sparse, settings)
    warnings += ocr_warnings
    sizes = {p: (page.size.width, page.size.height) for p, page in doc.pages.items()}
    unsized = [p for p in sparse if p not in sizes]
    if unsized:
        sizes.update(page_sizes(path, unsized))
    sizes.update(turned)  # pages read on their side: the upright frame
    ocred = False
    for page_no in sparse:
        page_lines = [ln for ln in lines if ln.page_no == page_no]
        if not page_lines:
            continue
        if sum(len(ln.text.strip()) for ln in page_lines) < chars.get(page_no, 0):
            # a fallback never replaces text already extracted with less
            warnings.append(
                ParseWarning("ocr", "OCR read less than the text layer; text layer kept", page_no)
            )
            continue
        width, height = sizes[page_no]
        if page_no not in doc.pages:
            doc.add_page(page_no=page_no, size=Size(width=width, height=height))
        elif page_no in turned:
            doc.pages[page_no].size = Size(width=width, height=height)
        page_doc = lines_to_document(page_lines, {page_no: sizes[page_no]}, doc.name, [])
        _splice_page(doc, page_no, page_doc)
        ocred = True
    missing = sorted(p for p in failed if p in ocr_failed)
    return warnings, failed, missing, ocred


def parse_layout(path: Path, settings: ParseSettings) -> BackendResult:
    """Convert a PDF with docling's layout models; raises ParseError(UNSUPPORTED) without them."""
    from parsers.docling_backend import conversion_result
    from parsers.errors import Category, ParseError

    models = layout_models_status(settings)
    if not models.available:
        raise ParseError(
            Category.UNSUPPORTED,
            f"pdf_pipeline='layout' needs docling's layout model ({LAYOUT_REPO}) and "
            f"TableFormer ({TABLEFORMER_REPO}@{TABLEFORMER_REVISION}) on this machine; "
            f"{models.describe()}. {PREFETCH_HELP}",
        )
    with hub_offline():
        try:
            converter = layout_converter(_artifacts_for(models))
        except Exception as exc:  # files present but not loadable: wrong or partial download
            raise ParseError(
                Category.UNSUPPORTED,
                f"docling's layout models in {models.artifacts_dir or models.source} could not "
                f"be loaded ({type(exc).__name__}: {exc}). {PREFETCH_HELP}",
            ) from exc
        try:
            result = converter.convert(
                path, raises_on_error=False, max_num_pages=settings.max_pages
            )
        except Exception as exc:  # docling raises plain exceptions for broken input
            raise ParseError(Category.CORRUPT, f"{type(exc).__name__}: {exc}") from exc
    out = conversion_result(result, "docling-layout")
    ocr_warnings, failed, missing, ocred = _ocr_sparse_pages(
        path, out.doc, out.page_count, settings
    )
    out.warnings += ocr_warnings
    out.missing_pages = missing
    if ocred:
        out.parser = "docling-layout+ocr"
    # docling's PARTIAL_SUCCESS that no failed page explains still marks the document partial.
    out.partial = out.partial and not failed
    return out
