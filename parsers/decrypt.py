"""Opening password-protected files with a password the operator configured.

``parse.passwords`` maps source paths (globs) to environment variables that hold a
password. The engine looks the password up for a document's path and the parser child
hands the file here before anything else reads it: an encrypted PDF (pdfium, which
also opens it for the page checks) or Office file (msoffcrypto-tool: encrypted OOXML
packages and the RC4 / CryptoAPI encryption of Word and Excel 97-2003; not PowerPoint
97-2003, whose decrypted copy keeps its encryption records and reads as encrypted) is
written decrypted into the child's scratch folder, which is removed with the child,
and parsed from there with every usual check. A file that is not encrypted is parsed
as it is. A password that does not open the file fails the document ``encrypted``
saying so; the password itself never reaches a message, a log or the index.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from common.encodings import OLE_MAGIC
from common.errors import Category
from parsers.errors import ParseError
from parsers.safety import is_pdf_head, open_pdf

WRONG_PASSWORD = (
    "the password configured for this path (parse.passwords) does not open it: check "
    "the environment variable the rule names"
)


def decrypted_copy(path: Path, password: str, folder: Path | None = None) -> Path | None:
    """A decrypted copy of ``path`` in ``folder`` (the temp folder by default), or None
    when the file is not encrypted (or not of a kind this opens)."""
    with path.open("rb") as f:
        head = f.read(1024)
    if is_pdf_head(head):
        return _pdf(path, password, folder)
    if head.startswith(OLE_MAGIC):
        return _office(path, password, folder)
    return None


def _target(path: Path, folder: Path | None) -> Path:
    fd, name = tempfile.mkstemp(prefix="decrypted-", suffix=path.suffix, dir=folder)
    os.close(fd)
    return Path(name)


def _pdf(path: Path, password: str, folder: Path | None) -> Path | None:
    import pypdfium2 as pdfium

    try:
        pdfium.PdfDocument(path).close()
        return None  # opens without a password
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) != pdfium.raw.FPDF_ERR_PASSWORD:
            return None  # broken: the usual checks say how
    pdf = open_pdf(path, password, locked=WRONG_PASSWORD)
    out = _target(path, folder)
    try:
        pdf.save(out, flags=pdfium.raw.FPDF_REMOVE_SECURITY)
    finally:
        pdf.close()
    return out


def _office(path: Path, password: str, folder: Path | None) -> Path | None:
    import msoffcrypto
    from msoffcrypto import exceptions

    with path.open("rb") as f:
        try:
            office = msoffcrypto.OfficeFile(f)
            if not office.is_encrypted():
                return None
        except Exception:
            return None  # not an Office file msoffcrypto knows: the usual checks decide
        if office.format == "ppt97":
            # msoffcrypto decrypts the streams but leaves the encryption records, and
            # neither LibreOffice nor the checks here read the copy (seen on Tika's file).
            raise ParseError(
                Category.ENCRYPTED,
                "password-protected PowerPoint 97-2003 file: corpusflow cannot open these "
                "with a password; index a copy saved without one, or exclude it",
            )
        out = _target(path, folder)
        try:
            # The 97-2003 formats check the password as they load it; OOXML when asked.
            if office.format == "ooxml":
                office.load_key(password=password, verify_password=True)
            else:
                office.load_key(password=password)
            with out.open("wb") as dest:
                office.decrypt(dest)
        except exceptions.InvalidKeyError as exc:
            out.unlink(missing_ok=True)
            raise ParseError(
                Category.ENCRYPTED, f"password-protected Office file; {WRONG_PASSWORD}"
            ) from exc
        except Exception as exc:
            out.unlink(missing_ok=True)
            raise ParseError(
                Category.ENCRYPTED,
                f"password-protected Office file that cannot be decrypted here "
                f"({type(exc).__name__}: {exc}); index a decrypted copy or exclude it",
            ) from exc
    return out


class DecryptedCopies:
    """The parser child's decrypted copy of the file it is working on: made once for a
    document's jobs (its page ranges too), replaced when the next document comes."""

    def __init__(self) -> None:
        self._key: tuple[str, int, int, str] | None = None
        self._copy: Path | None = None

    def path_for(self, path: Path, password: str | None) -> Path:
        if not password:
            return path
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns, password)
        if key != self._key:
            self.clear()
            self._copy = decrypted_copy(path, password)
            self._key = key
        return self._copy or path

    def clear(self) -> None:
        if self._copy is not None:
            self._copy.unlink(missing_ok=True)
        self._key, self._copy = None, None
