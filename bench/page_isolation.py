"""What page isolation costs (issue #36): time to isolate one bad page of a PDF, and
the price of always parsing in page ranges (parse.page_batch).

Usage: PYTHONPATH=. python bench/page_isolation.py [--pages 50] [--bad 37]

The faults are the test suite's (tests/parsers/test_page_isolation.py: a page that aborts the
parser child, a page that hangs it), injected through ParserPool(target=...). Every
leg runs in a fresh pool, so each pays one parser start-up (imports) like a real run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.settings import ParseSettings  # noqa: E402
from parsers import ParserPool  # noqa: E402
from tests.helpers.pdfgen import long_report, write_pdf  # noqa: E402
from tests.parsers.test_page_isolation import _pages, _with_blank_page  # noqa: E402

TARGET = "tests.parsers.test_page_isolation:faulty_parse"


def _leg(name: str, pdf: Path, settings: ParseSettings, target: str | None = None) -> None:
    kw = {"target": target} if target else {}
    with ParserPool(settings, **kw) as pool:
        pool.start(1)
        pool._idle.queue[0].wait_ready(180)  # type: ignore[union-attr]  # start-up not timed
        start = time.monotonic()
        doc = pool.parse(pdf)
        took = time.monotonic() - start
    degraded = sorted({w.page for w in doc.warnings if "degraded" in w.message and w.page})
    print(
        f"{name:<44} {took:7.1f} s  status={doc.status} missing={list(doc.missing_pages)} "
        f"degraded={degraded} words={len(doc.markdown.split())} "
        f"headings={doc.markdown.count(chr(10) + '#')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--bad", type=int, default=37)
    args = parser.parse_args()
    n, bad = args.pages, args.bad
    base = {"nice": 0, "ocr": False, "pdf_pipeline": "offline"}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        good = long_report(folder / "good.pdf", n)
        crash = _with_blank_page(folder / "crash.pdf", n, bad)
        hang = write_pdf(folder / "hang.pdf", _pages(n, bad, "HANG-HERE"))
        print(f"{n}-page PDFs, bad page {bad}; python {sys.version.split()[0]}")
        _leg("no fault, whole document", good, ParseSettings(**base))
        _leg("no fault, page_batch=10", good, ParseSettings(**base, page_batch=10))
        _leg("no fault, page_batch=25", good, ParseSettings(**base, page_batch=25))
        _leg("crash on one page (defaults)", crash, ParseSettings(**base), TARGET)
        _leg(
            "hang on one page (timeout_s=60, floor 5 s)",
            hang,
            ParseSettings(**base, timeout_s=60, page_timeout_min_s=5),
            TARGET,
        )


if __name__ == "__main__":
    main()
