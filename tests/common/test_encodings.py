"""Names written without an encoding (ZIP members, e-mail attachments, packaged files)."""

from __future__ import annotations

import pytest

from common.encodings import guess_encoding


@pytest.mark.parametrize(
    ("name", "written_in"),
    [
        ("季度财务报表.xlsx", "gbk"),  # read as Korean it mixes Hangul and Hanja
        ("会议纪要.docx", "gbk"),
        ("회의록 2024.docx", "cp949"),
        ("프로젝트 계획.pptx", "cp949"),
        ("会議資料.xlsx", "cp932"),
        ("年度報告書.doc", "cp950"),
        ("naïve.txt", "cp1252"),  # also valid GBK: "na飗e.txt"
        ("Rechnung März.pdf", "cp1252"),  # read as CJK: one ideograph inside a Latin word
        ("Niño.pdf", "cp1252"),
    ],
)
def test_a_legacy_name_is_read_in_the_code_page_it_was_written_in(
    name: str, written_in: str
) -> None:
    raw = name.encode(written_in)
    assert raw.decode(guess_encoding([raw])) == name


def test_utf8_names_are_utf8_and_undecodable_names_fall_back_to_the_last_candidate() -> None:
    assert guess_encoding(["报告.pdf".encode(), b"plain.txt"]) == "utf-8"
    # 0xFF starts no character in either: the caller's default (its last candidate).
    assert guess_encoding([b"\xff\xff\xfe"], ("gb18030", "cp932")) == "cp932"
    assert guess_encoding([b"\xff\xff\xfe"], ("cp932", "gb18030")) == "gb18030"
