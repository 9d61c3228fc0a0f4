"""How often a legacy (non-UTF-8) file name is read back as written: charset_normalizer's
first guess (the code before 2026-12-06) against ``common.encodings.guess_encoding``.

Three sets of plausible office file names, each encoded in the code page a Windows of
that language writes. Set 1 was used to develop the script-mix rules; set 2's failures
gave the "one ideograph inside a Latin word" rule; set 3 was written afterwards and
scored once.

    python bench/name_encodings.py
"""

from __future__ import annotations

import collections

import charset_normalizer

from common.encodings import WINDOWS_ANSI, guess_encoding

SETS: list[dict[str, list[str]]] = [
    {
        "gbk": [
            "报告.pdf",
            "会议纪要.docx",
            "合同.pdf",
            "季度财务报表.xlsx",
            "员工手册.pdf",
            "项目计划书.docx",
            "产品介绍.pptx",
            "简历.doc",
            "通知.txt",
            "销售数据2024.xlsx",
            "发票.pdf",
            "技术方案.docx",
            "年终总结.pptx",
            "采购清单.xls",
            "用户指南.pdf",
        ],
        "cp950": [
            "員工手冊.pdf",
            "年度報告書.doc",
            "會議記錄.docx",
            "合約.pdf",
            "財務報表.xlsx",
            "產品說明.pptx",
            "履歷.doc",
            "公告.txt",
            "專案計畫.docx",
            "發票.pdf",
        ],
        "cp932": [
            "会議資料.xlsx",
            "見積書.pdf",
            "議事録.docx",
            "請求書.pdf",
            "報告書.doc",
            "企画書.pptx",
            "履歴書.doc",
            "お知らせ.txt",
            "売上データ.xlsx",
            "マニュアル.pdf",
            "契約書.pdf",
            "仕様書.docx",
        ],
        "cp949": [
            "보고서.hwp",
            "회의록 2024.docx",
            "프로젝트 계획.pptx",
            "계약서.pdf",
            "견적서.xlsx",
            "이력서.doc",
            "공지사항.txt",
            "사용자 설명서.pdf",
            "매출 자료.xlsx",
            "회사 소개.pptx",
        ],
        "cp1252": [
            "naïve.txt",
            "Résumé.docx",
            "Größe.pdf",
            "Café menu.docx",
            "Año fiscal.xlsx",
            "Übersicht.pptx",
            "Señal.pdf",
            "Crème brûlée.txt",
            "Ærø.doc",
            "Façade.pdf",
        ],
    },
    {
        "gbk": [
            "培训课程表.xlsx",
            "差旅报销单.xls",
            "公司章程.pdf",
            "市场分析报告.docx",
            "部门预算.xlsx",
            "新员工入职指南.pdf",
            "周报.docx",
            "会议室预订.xlsx",
            "质量检测记录.pdf",
            "客户名单.xls",
            "演示文稿.pptx",
            "考勤统计.xlsx",
        ],
        "cp950": [
            "股東會議事錄.pdf",
            "營業報告.docx",
            "薪資明細.xlsx",
            "教育訓練.pptx",
            "產品目錄.pdf",
            "請假單.doc",
            "客戶資料.xls",
            "品質手冊.pdf",
        ],
        "cp932": [
            "出張報告.docx",
            "経費精算.xlsx",
            "社内規程.pdf",
            "製品カタログ.pdf",
            "打ち合わせメモ.txt",
            "年間計画.xlsx",
            "新入社員研修.pptx",
            "見積もり依頼.docx",
        ],
        "cp949": [
            "출장 보고서.docx",
            "경비 정산.xlsx",
            "회사 규정.pdf",
            "제품 카탈로그.pdf",
            "회의 메모.txt",
            "연간 계획.xlsx",
            "신입사원 교육.pptx",
            "견적 요청.docx",
        ],
        "cp1252": [
            "Déjà vu.txt",
            "Zürich Büro.docx",
            "Niño.pdf",
            "Ação.xlsx",
            "Smørrebrød.doc",
            "Noël.pptx",
            "Rechnung März.pdf",
            "Élève.docx",
        ],
    },
    {
        "gbk": [
            "安全生产规定.pdf",
            "招聘计划.xlsx",
            "年度审计报告.docx",
            "供应商评估表.xls",
            "董事会决议.pdf",
            "数据备份方案.docx",
            "网络拓扑图.vsd",
            "操作手册V2.pdf",
        ],
        "cp950": [
            "年終獎金.xlsx",
            "董事會紀錄.pdf",
            "採購申請單.doc",
            "網路架構圖.pdf",
            "操作說明書.docx",
            "資訊安全政策.pdf",
        ],
        "cp932": [
            "安全衛生規程.pdf",
            "採用計画.xlsx",
            "取締役会議事録.pdf",
            "ネットワーク構成図.pdf",
            "操作マニュアル.docx",
            "データ移行手順.txt",
        ],
        "cp949": [
            "안전 보건 규정.pdf",
            "채용 계획.xlsx",
            "이사회 의사록.pdf",
            "네트워크 구성도.pdf",
            "운영 매뉴얼.docx",
            "데이터 이전 절차.txt",
        ],
        "cp1252": [
            "Bilan financier été.xlsx",
            "Straße Plan.pdf",
            "Garçon.docx",
            "São Paulo.pptx",
            "Ångström.txt",
            "Protokoll Sitzung Öl.docx",
        ],
    },
]


def _first_guess(raw: bytes) -> str:
    try:
        raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    best = charset_normalizer.from_bytes(raw, cp_isolation=list(WINDOWS_ANSI)).best()
    return best.encoding if best is not None else WINDOWS_ANSI[-1]


def main() -> None:
    for i, names in enumerate(SETS, 1):
        for label, guess in (("before", _first_guess), ("after", lambda r: guess_encoding([r]))):
            right: collections.Counter[str] = collections.Counter()
            for encoding, group in names.items():
                for name in group:
                    raw = name.encode(encoding)
                    right[encoding] += raw.decode(guess(raw), "replace") == name
            total = sum(len(g) for g in names.values())
            per = ", ".join(f"{e} {right[e]}/{len(g)}" for e, g in names.items())
            print(f"set {i} {label}: {sum(right.values())}/{total} ({per})")


if __name__ == "__main__":
    main()
