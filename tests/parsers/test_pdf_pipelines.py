"""parse.pdf_pipeline: docling's layout-model path vs the model-free path.

docling's layout and TableFormer weights cannot be fetched on these machines,
so the layout pipeline itself never runs here: these tests cover the model
look-up (against docling's own definitions and on-disk layouts), the error a
'layout' run gives without models, the 'auto' fallback, the fingerprint, and
how OCR'd pages are spliced into a layout document.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from common.errors import Category
from common.settings import ParseSettings
from parsers import ParseError, parse_file, parser_fingerprints
from parsers.pdf import layout as pdf_layout
from parsers.pdf.layout import (
    LAYOUT_REPO,
    LAYOUT_REVISION,
    TABLEFORMER_MODE,
    TABLEFORMER_REPO,
    TABLEFORMER_REVISION,
    TABLEFORMER_SUBDIR,
    layout_models_status,
    repo_folder,
)


@pytest.fixture()
def no_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty artifacts directory and an empty Hugging Face cache."""
    from huggingface_hub import constants

    monkeypatch.delenv("DOCLING_ARTIFACTS_PATH", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    empty = tmp_path / "models"
    empty.mkdir()
    return empty


def _file_problems(status: pdf_layout.LayoutModels) -> list[str]:
    return [m for m in status.missing if "Python package" not in m]


def test_model_ids_match_docling() -> None:
    """The look-up searches exactly the models docling's standard PDF pipeline loads."""
    from docling.datamodel.pipeline_options import (
        LayoutObjectDetectionOptions,
        PdfPipelineOptions,
        TableStructureOptions,
    )
    from docling.models.stages.table_structure.table_structure_model import (
        TableStructureModel,
    )

    spec = LayoutObjectDetectionOptions().model_spec
    assert (spec.repo_id, spec.revision) == (LAYOUT_REPO, LAYOUT_REVISION)
    assert isinstance(PdfPipelineOptions().layout_options, LayoutObjectDetectionOptions)
    assert TableStructureModel._model_repo_folder == repo_folder(TABLEFORMER_REPO)
    assert TableStructureModel._model_path == TABLEFORMER_SUBDIR
    assert TableStructureOptions().mode.value == TABLEFORMER_MODE
    source = inspect.getsource(TableStructureModel.download_models)
    assert f'repo_id="{TABLEFORMER_REPO}"' in source
    assert f'revision="{TABLEFORMER_REVISION}"' in source


def test_layout_without_models_is_unsupported_with_prefetch_help(
    samples_dir: Path, no_models: Path
) -> None:
    settings = ParseSettings(pdf_pipeline="layout", artifacts_path=str(no_models))
    with pytest.raises(ParseError) as err:
        parse_file(samples_dir / "field_handbook.pdf", settings)
    assert err.value.category == Category.UNSUPPORTED
    message = err.value.message
    assert "docling-tools models download layout tableformer -o DIR" in message
    assert "parse.artifacts_path" in message and "DOCLING_ARTIFACTS_PATH" in message
    assert str(no_models) in message
    # Without any configured path the Hugging Face cache is searched, and named.
    with pytest.raises(ParseError) as err:
        parse_file(samples_dir / "field_handbook.pdf", ParseSettings(pdf_pipeline="layout"))
    assert err.value.category == Category.UNSUPPORTED
    assert "hf-cache" in err.value.message


def test_auto_without_models_takes_offline_path(samples_dir: Path, no_models: Path) -> None:
    for settings in (
        ParseSettings(pdf_pipeline="auto"),
        ParseSettings(pdf_pipeline="auto", artifacts_path=str(no_models)),
    ):
        assert not pdf_layout.layout_models_available(settings)
        doc = parse_file(samples_dir / "field_handbook.pdf", settings)
        assert doc.parser == "pdf-offline"
        assert "Site Safety" in doc.markdown


def test_artifacts_dir_checked_the_way_docling_reads_it(
    no_models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`docling-tools models download layout tableformer -o DIR` layout: every file the
    loaders open (config, image processor, weights; tm_config + tableformer_*.safetensors).
    Only the look-up is exercised; nothing here is loaded as a model."""
    layout = no_models / repo_folder(LAYOUT_REPO)
    table = no_models / repo_folder(TABLEFORMER_REPO) / TABLEFORMER_SUBDIR / TABLEFORMER_MODE
    layout.mkdir(parents=True)
    table.mkdir(parents=True)
    settings = ParseSettings(artifacts_path=str(no_models))
    status = layout_models_status(settings)
    assert status.source == "parse.artifacts_path"
    assert status.layout_dir == layout and status.tableformer_dir == table
    assert len(_file_problems(status)) == 5  # 3 layout files, 2 TableFormer files
    for name in ("config.json", "preprocessor_config.json", "model.safetensors"):
        (layout / name).write_text("{}")
    (table / "tm_config.json").write_text("{}")
    assert _file_problems(layout_models_status(settings)) == [
        f"no tableformer_*.safetensors in {table}"
    ]
    (table / "tableformer_accurate.safetensors").write_bytes(b"")
    assert _file_problems(layout_models_status(settings)) == []
    # docling's own setting is honoured when parse.artifacts_path is empty.
    monkeypatch.setenv("DOCLING_ARTIFACTS_PATH", str(no_models))
    status = layout_models_status(ParseSettings())
    assert status.source == "DOCLING_ARTIFACTS_PATH" and _file_problems(status) == []


def test_hugging_face_cache_is_searched_without_network(no_models: Path, tmp_path: Path) -> None:
    """The HF cache layout (models--org--name/refs/<rev> -> snapshots/<commit>/...)."""
    cache = tmp_path / "hf-cache"

    def snapshot(repo: str, revision: str) -> Path:
        root = cache / f"models--{repo.replace('/', '--')}"
        commit = "0123456789abcdef0123456789abcdef01234567"
        (root / "refs").mkdir(parents=True)
        (root / "refs" / revision).write_text(commit)
        snap = root / "snapshots" / commit
        snap.mkdir(parents=True)
        return snap

    layout = snapshot(LAYOUT_REPO, LAYOUT_REVISION)
    for name in ("config.json", "preprocessor_config.json", "model.safetensors"):
        (layout / name).write_text("{}")
    table = snapshot(TABLEFORMER_REPO, TABLEFORMER_REVISION) / TABLEFORMER_SUBDIR
    (table / TABLEFORMER_MODE).mkdir(parents=True)
    (table / TABLEFORMER_MODE / "tm_config.json").write_text("{}")
    (table / TABLEFORMER_MODE / "tableformer_accurate.safetensors").write_bytes(b"")
    status = layout_models_status(ParseSettings())
    assert status.source == "huggingface-cache"
    assert status.layout_dir == layout
    assert status.tableformer_dir == table / TABLEFORMER_MODE
    assert _file_problems(status) == []


def test_fingerprint_follows_the_pdf_path_that_runs(
    no_models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auto = ParseSettings(pdf_pipeline="auto")
    without = parser_fingerprints(auto)
    assert without == parser_fingerprints(auto)
    monkeypatch.setattr(pdf_layout, "layout_models_available", lambda settings: True)
    with_models = parser_fingerprints(auto)
    assert with_models.of("pdf") != without.of("pdf")
    # Only PDFs take that path, and the drawings read as the PDF LibreOffice exports
    # (Visio, metafiles): no other format is parsed again when models arrive.
    from parsers.formats import DRAWING, FORMATS

    through_pdf = {"pdf"} | {spec.fmt for spec in FORMATS if spec.backend == DRAWING}
    assert through_pdf >= {"vsdx", "vsd", "metafile"}
    assert all(with_models.of(f) != without.of(f) for f in through_pdf)
    others = set(without.by_format) - through_pdf
    assert others and all(with_models.of(f) == without.of(f) for f in others)
    # 'offline' never depends on the models.
    offline = ParseSettings(pdf_pipeline="offline")
    assert parser_fingerprints(offline) == parser_fingerprints(offline)
    assert pdf_layout.fingerprint_part(offline) == {"pdf_path": "offline"}


def test_ocr_page_is_spliced_at_its_page() -> None:
    """A scanned page's OCR text goes between the pages around it, replacing stray text."""
    from docling_core.types.doc import (
        BoundingBox,
        DocItemLabel,
        DoclingDocument,
        ProvenanceItem,
        Size,
    )

    def prov(page: int) -> ProvenanceItem:
        return ProvenanceItem(page_no=page, bbox=BoundingBox(l=0, t=0, r=1, b=1), charspan=(0, 1))

    doc = DoclingDocument(name="scan")
    for page in (1, 2, 3):
        doc.add_page(page_no=page, size=Size(width=612, height=792))
    doc.add_heading("Inspection report", level=1, prov=prov(1))
    items = doc.add_list_group()
    doc.add_list_item("first finding", parent=items, prov=prov(1))
    doc.add_text(label=DocItemLabel.TEXT, text="~", prov=prov(2))
    doc.add_text(label=DocItemLabel.TEXT, text="Closing remarks", prov=prov(3))
    page_doc = DoclingDocument(name="scan")
    page_doc.add_text(label=DocItemLabel.TEXT, text="Scanned pump log", prov=prov(2))
    pdf_layout._splice_page(doc, 2, page_doc)
    texts = [item.text for item, _ in doc.iterate_items() if hasattr(item, "text")]
    assert texts == ["Inspection report", "first finding", "Scanned pump log", "Closing remarks"]


def test_pipeline_options_are_docling_standard_pipeline() -> None:
    from docling.datamodel.pipeline_options import TableFormerMode

    opts = pdf_layout.layout_pipeline_options("/models")
    assert str(opts.artifacts_path) == "/models"
    assert opts.do_table_structure and not opts.do_ocr
    assert opts.table_structure_options.mode == TableFormerMode.ACCURATE
    assert not opts.enable_remote_services


def test_unloadable_models_are_unsupported_not_downloaded(
    samples_dir: Path, no_models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files where docling looks but not a loadable model (a broken copy): a clear
    error naming the directory, and no attempt to fetch anything."""
    layout = no_models / repo_folder(LAYOUT_REPO)
    table = no_models / repo_folder(TABLEFORMER_REPO) / TABLEFORMER_SUBDIR / TABLEFORMER_MODE
    layout.mkdir(parents=True)
    table.mkdir(parents=True)
    for name in ("config.json", "preprocessor_config.json", "model.safetensors"):
        (layout / name).write_text("{}")
    (table / "tm_config.json").write_text("{}")
    (table / "tableformer_accurate.safetensors").write_bytes(b"")
    monkeypatch.setattr(pdf_layout, "_missing_packages", list)
    settings = ParseSettings(pdf_pipeline="layout", artifacts_path=str(no_models))
    assert pdf_layout.layout_models_available(settings)
    with pytest.raises(ParseError) as err:
        parse_file(samples_dir / "field_handbook.pdf", settings)
    assert err.value.category == Category.UNSUPPORTED
    assert "could not be loaded" in err.value.message
    assert str(no_models) in err.value.message
    assert "docling-tools models download" in err.value.message


@pytest.mark.parametrize("revision", ["main", "v2.3.0", "a" * 40])
def test_cache_lookup_agrees_with_huggingface_hub(tmp_path: Path, revision: str) -> None:
    """parsers.pdf.layout reads the HF cache layout itself (no huggingface_hub download
    stack at plan time); it must find what try_to_load_from_cache finds, and only that."""
    from huggingface_hub import try_to_load_from_cache

    from parsers.pdf.layout import _hf_snapshot_of

    commit = "a" * 40
    repo = tmp_path / "models--org--model"
    (repo / "snapshots" / commit / "sub").mkdir(parents=True)
    (repo / "snapshots" / commit / "sub" / "cfg.json").write_text("{}")
    if revision != commit:
        (repo / "refs").mkdir()
        (repo / "refs" / revision).write_text(commit)
    for filename in ("sub/cfg.json", "absent.json"):
        found = try_to_load_from_cache("org/model", filename, str(tmp_path), revision)
        expected = (
            Path(found).parents[1 if "/" in filename else 0] if isinstance(found, str) else None
        )
        assert _hf_snapshot_of("org/model", revision, filename, str(tmp_path)) == expected
    assert _hf_snapshot_of("org/model", revision, "sub/cfg.json", str(tmp_path)) is not None
    assert _hf_snapshot_of("org/other", revision, "sub/cfg.json", str(tmp_path)) is None
