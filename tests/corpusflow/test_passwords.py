"""Encrypted files opened with a password configured per path (parse.passwords)."""

import json
import shutil
from pathlib import Path

import pytest

from common.errors import Category
from common.settings import ParseSettings
from parsers import ParserPool
from parsers.errors import ParseError
from tests.corpusflow.test_cli import _cli

TIKA = Path(__file__).parents[1] / "data" / "tika"


def _encrypted_docx(samples_dir: Path, target: Path, password: str) -> Path:
    from msoffcrypto.format.ooxml import OOXMLFile

    target.parent.mkdir(parents=True, exist_ok=True)
    with (samples_dir / "travel_policy.docx").open("rb") as plain, target.open("wb") as out:
        OOXMLFile(plain).encrypt(password, out)
    return target


def _encrypted_pdf(target: Path, password: str) -> Path:
    import pypdf

    from tests.helpers.pdfgen import long_report

    plain = long_report(target.with_suffix(".plain.pdf"), 2)
    writer = pypdf.PdfWriter(clone_from=str(plain))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-256")
    writer.write(target)
    return target


def test_a_configured_password_opens_pdf_ooxml_and_legacy_office(
    tmp_path: Path, samples_dir: Path
) -> None:
    docx = _encrypted_docx(samples_dir, tmp_path / "policy.docx", "s3cret")
    pdf = _encrypted_pdf(tmp_path / "report.pdf", "s3cret")
    with ParserPool(ParseSettings()) as pool:
        assert "Booking Rules" in pool.parse(docx, password="s3cret").markdown
        assert len(pool.parse(pdf, password="s3cret").markdown.split()) > 100
        doc = pool.parse(TIKA / "testWORD_protected_passtika.doc", password="tika")
        assert "encrypted Word" in doc.markdown
        xls = pool.parse(TIKA / "testEXCEL_protected_passtika.xls", password="tika")
        assert "Encrypted Excel" in xls.markdown
        for path, wrong in (
            (docx, "nope"),
            (pdf, "nope"),
            (TIKA / "testWORD_protected_passtika.doc", "nope"),
        ):
            with pytest.raises(ParseError) as err:
                pool.parse(path, password=wrong)
            assert err.value.category == Category.ENCRYPTED
            assert "does not open it" in err.value.message and "nope" not in err.value.message
        for path in (docx, pdf):  # no password: says how to give one
            with pytest.raises(ParseError) as err:
                pool.parse(path)
            assert err.value.category == Category.ENCRYPTED
            assert "parse.passwords" in err.value.message
        # PowerPoint 97-2003: msoffcrypto's copy keeps its encryption records; said plainly.
        with pytest.raises(ParseError) as err:
            pool.parse(TIKA / "testPPT_protected_passtika.ppt", password="tika")
        assert err.value.category == Category.ENCRYPTED
        assert "cannot open these with a password" in err.value.message
        # A file that is not encrypted is parsed as it is, password or not.
        assert (
            "Booking Rules" in pool.parse(samples_dir / "travel_policy.docx", password="x").markdown
        )


@pytest.mark.slow
def test_passwords_by_path_in_a_run_then_retry_failed_after_the_fix(
    tmp_path: Path, samples_dir: Path
) -> None:
    src, db = tmp_path / "src", tmp_path / "db"
    _encrypted_docx(samples_dir, src / "finance" / "policy.docx", "s3cret")
    _encrypted_docx(samples_dir, src / "other" / "policy.docx", "s3cret")
    shutil.copy(TIKA / "testEXCEL_protected_passtika.xls", src / "finance" / "legacy.xls")
    rules = json.dumps(
        [
            {"match": "finance/**/*.docx", "password_env": "CF_TEST_DOCX_PW"},
            {"match": "finance/*.xls", "password_env": "CF_TEST_XLS_PW"},
        ]
    )
    env = {"CORPUSFLOW_PARSE__PASSWORDS": rules, "CF_TEST_DOCX_PW": "s3cret"}

    unset = _cli("ingest", str(src), "--db", str(db), check=False, **env)
    assert unset.returncode == 2 and "CF_TEST_XLS_PW" in unset.stderr  # before any parse
    assert "Traceback" not in unset.stderr

    first = _cli("ingest", str(src), "--db", str(db), check=False, CF_TEST_XLS_PW="wrong", **env)
    status = json.loads(_cli("status", "--db", str(db), "--json").stdout)
    failed = {d["path"]: d for d in status["failed_documents"]}
    assert status["documents"]["indexed"] == 1  # finance/policy.docx
    assert set(failed) == {"other/policy.docx", "finance/legacy.xls"}
    assert failed["other/policy.docx"]["category"] == "encrypted"
    assert "parse.passwords" in failed["other/policy.docx"]["message"]
    assert "does not open it" in failed["finance/legacy.xls"]["message"]
    for text in (first.stdout, first.stderr, json.dumps(status)):
        assert "s3cret" not in text and "wrong" not in text.replace("went wrong", "")
    hits = json.loads(_cli("search", "booking rules for flights", "--db", str(db), "--json").stdout)
    assert hits and hits[0]["path"] == "finance/policy.docx"

    _cli("retry-failed", str(src), "--db", str(db), CF_TEST_XLS_PW="tika", **env)
    status = json.loads(_cli("status", "--db", str(db), "--json").stdout)
    assert status["documents"]["indexed"] == 2
    assert [d["path"] for d in status["failed_documents"]] == ["other/policy.docx"]
