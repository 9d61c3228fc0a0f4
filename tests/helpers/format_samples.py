"""A real file of each format for the backend conformance suite (parsers.testing).

Files the repository ships (samples/), files of ../shared/corpus where the tests
cannot make one (legacy and OpenDocument office, EPUB), and small text documents
written here. ``None``: no file of that kind on this machine (the test is skipped).
"""

from __future__ import annotations

from pathlib import Path

from parsers.formats import FormatSpec

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
SHARED = REPO.parent / "shared" / "corpus" / "docling"

_SHIPPED = {
    "pdf": SAMPLES / "corpus" / "field_handbook.pdf",
    "docx": SAMPLES / "corpus" / "travel_policy.docx",
    "pptx": SAMPLES / "corpus" / "service_review.pptx",
    "xlsx": SAMPLES / "corpus" / "component_warranty.xlsx",
    "html": SAMPLES / "corpus" / "onboarding.html",
    "md": SAMPLES / "corpus" / "release_notes.md",
    "vtt": SAMPLES / "formats" / "standup.vtt",
    "csv": SAMPLES / "formats" / "maintenance_log.csv",
    "rst": SAMPLES / "formats" / "runbook.rst",
    "org": SAMPLES / "formats" / "release_plan.org",
    "json": SAMPLES / "formats" / "inventory.json",
    "yaml": SAMPLES / "formats" / "alarm_thresholds.yaml",
    "doc": SHARED / "doc" / "legacy_sample.doc",
    "ppt": SHARED / "ppt" / "legacy_sample.ppt",
    "xls": SHARED / "xls" / "legacy_sample.xls",
    "odt": SHARED / "odf" / "text_document_01.odt",
    "ods": SHARED / "odf" / "odf_table_with_title_01.ods",
    "odp": SHARED / "odf" / "odf_presentation_01.odp",
    "epub": SHARED / "epub" / "epub_purvis_poetry.epub",
    "image": SHARED / "webp" / "webp-test.webp",
    "msg": REPO / "tests" / "data" / "markitdown" / "test_outlook_msg.msg",
    "vsdx": REPO / "tests" / "data" / "poi" / "test_text_extraction.vsdx",
    "vsd": REPO / "tests" / "data" / "poi" / "Test_Visio-Some_Random_Text.vsd",
    "metafile": REPO / "tests" / "data" / "metafile_chart.emf",
}

_WRITTEN = {
    "tsv": "city\tnightly cap\nShanghai\t500\nBerlin\t180\n",
    "asciidoc": "= Gateway Guide\n\n== Installation\n\nMount the Modbus gateway on the DIN rail.\n",
    "latex": "\\documentclass{article}\n\\begin{document}\n\\section{Calibration}\n"
    "Calibrate the anemometer every six months.\n\\end{document}\n",
    "ndjson": '{"site": "Aalborg", "turbines": 12}\n{"site": "Esbjerg", "turbines": 30}\n',
    "ipynb": '{"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# Yaw study"]}, '
    '{"cell_type": "code", "metadata": {}, "execution_count": 1, "source": ["print(12)"], '
    '"outputs": [{"output_type": "stream", "name": "stdout", "text": ["12"]}]}], '
    '"metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
    "xml": "<plant><site id='a1'><name>Aalborg</name><turbines>12</turbines></site></plant>",
    "txt": "Shift notes\n\nThe yaw brake was inspected and greased.\n",
    "eml": "From: Dana <dana@example.com>\nTo: ops@example.com\nSubject: Gearbox\n\n"
    "The gearbox fix ships on Thursday.\n",
    "rtf": r"{\rtf1\ansi{\fonttbl\f0\fswiss Helvetica;}\f0 Torque the {\b blade bolts} "
    r"to 450 Nm.\par}",
    "mhtml": "From: <Saved by Blink>\nSubject: Runbook\nMIME-Version: 1.0\n"
    'Content-Type: multipart/related; type="text/html"; boundary="B"\n\n--B\n'
    'Content-Type: text/html; charset="utf-8"\n\n'
    "<html><body><h1>Runbook</h1><p>Restart the yaw controller.</p></body></html>\n--B--\n",
}


def _heic(tmp_path: Path) -> Path | None:
    """The WebP sample saved as HEIC (pillow-heif encodes it)."""
    image = _SHIPPED["image"]
    if not image.is_file():
        return None
    import pillow_heif
    from PIL import Image

    pillow_heif.register_heif_opener()
    path = tmp_path / "sample.heic"
    with Image.open(image) as img:
        img.convert("RGB").save(path, format="HEIF", quality=90)
    return path


def sample_file(spec: FormatSpec, tmp_path: Path) -> Path | None:
    """A real file of ``spec``'s format, or None when this machine has none."""
    if spec.fmt == "heic":
        return _heic(tmp_path)
    if spec.fmt in _WRITTEN:
        path = tmp_path / f"sample{spec.extensions[0]}"
        path.write_text(_WRITTEN[spec.fmt], encoding="utf-8")
        return path
    shipped = _SHIPPED.get(spec.fmt)
    return shipped if shipped is not None and shipped.is_file() else None
