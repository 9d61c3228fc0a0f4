"""Rebuild bench/multilingual/corpus from fetched repository snapshots.

Usage: python bench/multilingual/build_corpus.py --mirrors /work/.mirror [--out DIR]

Every file is taken out of a git blob at the commit pinned below (``git show
COMMIT:PATH``). Most are copied byte for byte; the few marked ``convert`` were turned
into another container (DOCX, PDF, XLSX, CSV) by this script, with the text unchanged,
so the corpus has CJK documents in office formats (the sources hold few): see
SOURCES.md. Conversions need LibreOffice (``soffice``) and a CJK font
(Debian ``fonts-wqy-microhei``) for the PDF text layer.
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import tempfile
from pathlib import Path

SDP = ("donnemartin/system-design-primer", "ae9bbd7b02d90b9866215de185217d33f39ab733")
RAG = ("infiniflow/ragflow", "b1b8cd623520b97b2526ffb1514bd812bdcc7eaf")
TLDR = ("tldr-pages/tldr", "08e345f42639f67d99282813247ac670dc6e87cb")
MID = ("microsoft/markitdown", "a51f725d7ff4cdfe3bb6ad2ce2c04d98bf5f1f00")
RKO = ("reactjs/ko.react.dev", "2e8c873c3cea6703d1c94d01b5d5716259005c8e")
RJA = ("reactjs/ja.react.dev", "7f38231d9d5dddaae6ac51da7d0f173d697f835c")
MT = "packages/markitdown/tests/test_files/"

# (repo, commit), source path, corpus name, how ("copy" or a conversion)
FILES: list[tuple[tuple[str, str], str, str, str]] = [
    # system design primer: English / simplified Chinese pairs, then one-language documents
    # (so that a cross-lingual question has a single right document)
    *[
        (SDP, f"solutions/system_design/{d}/README{suffix}.md", f"sdp_{d}{name}.md", "copy")
        for d in ("mint", "pastebin", "twitter", "query_cache")
        for suffix, name in (("", "_en"), ("-zh-Hans", "_zh"))
    ],
    (SDP, "solutions/system_design/sales_rank/README.md", "sdp_sales_rank_en.md", "copy"),
    (SDP, "solutions/system_design/scaling_aws/README.md", "sdp_scaling_aws_en.md", "copy"),
    (
        SDP,
        "solutions/system_design/web_crawler/README-zh-Hans.md",
        "sdp_web_crawler_zh.pdf",
        "md2pdf",
    ),
    (
        SDP,
        "solutions/system_design/social_graph/README-zh-Hans.md",
        "sdp_social_graph_zh.docx",
        "md2docx",
    ),
    # RAGFlow: the same README in five languages, deepdoc pair, parser samples
    (RAG, "README.md", "ragflow_readme_en.md", "copy"),
    (RAG, "README_zh.md", "ragflow_readme_zh.md", "copy"),
    (RAG, "README_tzh.md", "ragflow_readme_zh_tw.md", "copy"),
    (RAG, "README_ja.md", "ragflow_readme_ja.md", "copy"),
    (RAG, "README_ko.md", "ragflow_readme_ko.md", "copy"),
    (RAG, "deepdoc/README.md", "ragflow_deepdoc_en.md", "copy"),
    (RAG, "deepdoc/README_zh.md", "ragflow_deepdoc_zh.docx", "md2docx"),
    (
        RAG,
        "internal/parser/parser/testdata/markdown.sample.zh.md",
        "ragflow_health_check_zh.md",
        "copy",
    ),
    (
        RAG,
        "internal/parser/parser/testdata/html.sample.zh.html",
        "ragflow_product_guide_zh.html",
        "copy",
    ),
    (RAG, "test/benchmark/test_docs/Doc1.pdf", "ragflow_doc1_en.pdf", "copy"),
    (RAG, "test/benchmark/test_docs/Doc2.pdf", "ragflow_doc2_en.pdf", "copy"),
    (
        RAG,
        "deepdoc/parser/resume/entities/res/schools.csv",
        "ragflow_schools_zh.xlsx",
        "schools2xlsx",
    ),
    (
        RAG,
        "deepdoc/parser/resume/entities/res/school.rank.csv",
        "ragflow_school_rank_zh.csv",
        "head60",
    ),
    # tldr pages
    *[
        (TLDR, f"pages{lang}/{sect}/{page}.md", f"tldr_{page}_{code}.md", "copy")
        for page, sect, langs in (
            ("tar", "common", ((".zh", "zh"), (".ja", "ja"), (".ko", "ko"), ("", "en"))),
            ("chmod", "common", ((".zh", "zh"), (".zh_TW", "zh_tw"), (".ko", "ko"))),
            ("crontab", "common", ((".zh", "zh"), (".ko", "ko"))),
            ("curl", "common", ((".zh", "zh"), (".ja", "ja"), ("", "en"))),
            ("rsync", "common", ((".zh", "zh"), (".ko", "ko"))),
            ("find", "common", ((".ja", "ja"), (".ko", "ko"))),
        )
        for lang, code in langs
    ],
    # markitdown test files (English distractors in office formats, a Japanese CSV)
    (MID, MT + "test.docx", "markitdown_test_en.docx", "copy"),
    (MID, MT + "test.xlsx", "markitdown_test_en.xlsx", "copy"),
    (MID, MT + "test.pptx", "markitdown_test_en.pptx", "copy"),
    (MID, MT + "test_blog.html", "markitdown_blog_en.html", "copy"),
    (MID, MT + "test_mskanji.csv", "markitdown_mskanji_ja.csv", "copy"),
    # React docs in Korean
    (RKO, "src/content/learn/render-and-commit.md", "react_render_and_commit_ko.md", "copy"),
    (RKO, "src/content/learn/editor-setup.md", "react_editor_setup_ko.md", "copy"),
    (RKO, "src/content/learn/react-developer-tools.md", "react_developer_tools_ko.md", "copy"),
    (
        RKO,
        "src/content/learn/importing-and-exporting-components.md",
        "react_import_export_ko.docx",
        "md2docx",
    ),
    # React docs in Japanese (other pages than the Korean ones)
    (RJA, "src/content/learn/installation.md", "react_installation_ja.md", "copy"),
    (RJA, "src/content/learn/state-as-a-snapshot.md", "react_state_snapshot_ja.md", "copy"),
    (
        RJA,
        "src/content/learn/conditional-rendering.md",
        "react_conditional_rendering_ja.docx",
        "md2docx",
    ),
]


def blob(git_dir: Path, commit: str, path: str) -> bytes:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
    ).stdout


def md_to_html(text: str, title: str) -> str:
    import markdown

    body = markdown.markdown(text, extensions=["tables", "fenced_code"])
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f"<title>{title}</title></head><body>{body}</body></html>"
    )


def soffice(html: str, target: Path, fmt: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / (target.stem + ".html")
        src.write_text(html, encoding="utf-8")
        filt = {"docx": "docx:MS Word 2007 XML", "pdf": "pdf:writer_web_pdf_Export"}[fmt]
        subprocess.run(
            [
                "soffice",
                "--headless",
                f"-env:UserInstallation=file://{tmp}/profile",
                "--convert-to",
                filt,
                "--outdir",
                tmp,
                str(src),
            ],
            check=True,
            capture_output=True,
        )
        shutil.copyfile(Path(tmp) / f"{target.stem}.{fmt}", target)


def schools_xlsx(data: bytes, target: Path) -> None:
    """The mainland (is_abroad = 0) universities flagged 985, with their columns as is."""
    from openpyxl import Workbook

    rows = list(csv.reader(io.StringIO(data.decode("utf-8")), delimiter="\t"))
    head = rows[0]
    keep = [r for r in rows[1:] if len(r) == len(head) and r[6] == "0" and r[13] == "1"][:40]
    wb = Workbook()
    ws = wb.active
    ws.title = "schools"
    cols = ["name_cn", "name_en", "school_type", "province", "city", "is_double_first"]
    idx = [head.index(c) for c in cols]
    ws.append(cols)
    for r in keep:
        ws.append([r[i] for i in idx])
    wb.save(target)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirrors", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "corpus")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for (repo, commit), path, name, how in FILES:
        git_dir = args.mirrors / repo.replace("/", "+") / "repo"
        data = blob(git_dir, commit, path)
        target = args.out / name
        if how == "copy":
            target.write_bytes(data)
        elif how in ("md2docx", "md2pdf"):
            soffice(md_to_html(data.decode("utf-8"), Path(path).stem), target, how[-4:].lstrip("2"))
        elif how == "schools2xlsx":
            schools_xlsx(data, target)
        elif how == "head60":
            target.write_bytes(b"\n".join(data.splitlines()[:60]) + b"\n")
        else:
            raise ValueError(how)
        print(f"{name}\t{target.stat().st_size}")


if __name__ == "__main__":
    main()
