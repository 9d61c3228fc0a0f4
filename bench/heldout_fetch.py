"""Rebuild the held-out PDF evaluation sets from the git blobs they were copied from.

The held-out sets are not in this repository (their licences vary). Each pair is a
PDF and a ground-truth Markdown file, copied byte for byte out of a public GitHub
repository at a fixed commit; ``bench/heldout_pdf_sources.md`` says where each one
comes from and what its ground truth is. ``PAIRS`` below is the same list as data.

Layout written (``ROOT`` is ``/tmp`` unless ``--root`` says otherwise)::

    set 1: ROOT/heldout/pdf/NAME.pdf   ROOT/heldout/pdf/groundtruth/NAME.md
    set 2: ROOT/heldout2/NAME.pdf      ROOT/heldout2/groundtruth/NAME.md
    set 3: ROOT/heldout3/NAME.pdf      ROOT/heldout3/groundtruth/NAME.md
    set 4: ROOT/heldout4/NAME.pdf      ROOT/heldout4/groundtruth/NAME.md
    set 5: ROOT/heldout5/NAME.pdf      ROOT/heldout5/groundtruth/NAME.md
    set 6: ROOT/heldout6/NAME.pdf      ROOT/heldout6/groundtruth/NAME.md
    set 7: ROOT/heldout7/NAME.pdf      ROOT/heldout7/groundtruth/NAME.md
    set 8: ROOT/heldout8/NAME.pdf      ROOT/heldout8/groundtruth/NAME.md
    set 9: ROOT/heldout9/NAME.pdf      ROOT/heldout9/groundtruth/NAME.md
    set 10: ROOT/heldout10/NAME.pdf    ROOT/heldout10/groundtruth/NAME.md
    set 11: ROOT/heldout11/NAME.pdf    ROOT/heldout11/groundtruth/NAME.md

Every file is the blob ``COMMIT:PATH`` unchanged, except the three ``dleval_*``
ground truths of set 3: those are
``DoclingDocument.load_from_json(expected.json).export_to_markdown()``, which needs
docling-core importable (run with the project's ``.venv/bin/python``; the sets
were built with docling-core 2.104.0). Existing files of the same name are
overwritten; nothing else in the folders is touched.

Usage::

    python bench/heldout_fetch.py --mirrors DIR      # local bare git dirs
    python bench/heldout_fetch.py                    # clone from https://github.com
    python bench/heldout_fetch.py --sets 2 3 --root /tmp/check

``--mirrors DIR`` takes a folder of git directories named ``owner+name``,
``owner+name.git``, ``owner+name/repo`` or ``owner+name/repo/.git`` (the layouts of the
``fetch`` snapshots in ``/work/.mirror``). Without it, each repository is cloned once with
``git clone --bare --filter=blob:none`` into ``--cache`` (default
``~/.cache/corpusflow/heldout-repos``); blobs are then fetched on demand.

A missing commit or blob (snapshots leave out files of 4 MiB and more and Git LFS
content) stops the run with a message naming the repository, commit and path.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

COPY = "copy"  # ground truth is the blob itself
DOCLING_JSON = "docling-json"  # ground truth is docling-core's Markdown export of the JSON blob


@dataclass(frozen=True)
class Pair:
    heldout_set: int
    name: str
    repo: str
    commit: str
    pdf: str
    gt: str
    gt_kind: str = COPY


_MINERU = "09117e5417d19a1cede85a202083d322ad4e2373"
_P2M = "71b31c2fb5cd15fcb95810fc7aeccdd879e1fb6d"
_DCORE = "2b93ca9ed2f3d3a2f343c3afa13bf2b6fb2cd05d"
_UNSTR = "fc9c967204735b523874df103148e284e16baecc"
_DLEVAL = "9d04a56b936e0efd130653ab64a765f08020fcc5"
_EISVOGEL = "0495ae157b8c2cb1953d998b7f3ffd36b4b3af89"
_DOCLING = "e1cb2b234c48ff29746b0f2f843d07f8e23905a0"  # main, 2026-08-21
_FUDAN = "Alaya-in-Matrix/fudanCourseProjectParallelYu"


def _laid_out(
    heldout_set: int, repo: str, commit: str, pdf: str, gt: str, name: str = "{}", kind: str = COPY
) -> Callable[..., Pair]:
    """Pairs of one repository stored alike: ``pdf``, ``gt`` and ``name`` are templates
    filled with a file's stem; ``as_name`` names a pair whose stem is not its name."""

    def pair(stem: str, as_name: str | None = None) -> Pair:
        return Pair(
            heldout_set,
            as_name or name.format(stem),
            repo,
            commit,
            pdf.format(stem),
            gt.format(stem),
            kind,
        )

    return pair


_mineru = _laid_out(
    2,
    "opendatalab/MinerU",
    _MINERU,
    "tests/benchmark/datasets/pdf/{}.pdf",
    "tests/benchmark/datasets/annotations/cleaned/cleaned_{}.md",
)
_p2m = _laid_out(
    2, "jzillmann/pdf-to-markdown", _P2M, "examples/{}.pdf", "examples/{}.md", "p2m_{}"
)
_dcore = _laid_out(
    2,
    "docling-project/docling-core",
    _DCORE,
    "test/data/doc/{}.gt.pdf",
    "test/data/doc/{}.gt.md",
    "doclingcore_{}",
)
_unstr = _laid_out(
    2,
    "Unstructured-IO/unstructured",
    _UNSTR,
    "label-party/holistic-src/{}.pdf",
    "label-party/holistic-cct/{}.pdf.txt",
    "unstructured_{}",
)
_dleval = _laid_out(
    3,
    "docling-project/docling-eval",
    _DLEVAL,
    "tests/cvat_to_docling/fixtures/{}/input.pdf",
    "tests/cvat_to_docling/fixtures/{}/expected.json",
    kind=DOCLING_JSON,
)
_eisvogel = _laid_out(
    3,
    "Wandmalfarbe/pandoc-latex-template",
    _EISVOGEL,
    "examples/{}/document.pdf",
    "examples/{}/document.md",
)
_docling_pdf = _laid_out(
    1,
    "docling-project/docling",
    _DOCLING,
    "tests/data/pdf/sources/{}.pdf",
    "tests/data/pdf/groundtruth/{}.md",
)
# docling's PDF rendering of an OpenDocument sample, scored against the ground truth
# docling's ODF backend gives for the source file
_docling_odf = _laid_out(
    1,
    "docling-project/docling",
    _DOCLING,
    "tests/data/odf/sources/{}.pdf",
    "tests/data/odf/groundtruth/{}.md",
)


PAIRS: tuple[Pair, ...] = (
    # set 1: docling tests/data PDFs that ../shared/corpus/docling/pdf does not hold
    _docling_pdf("amt_handbook_sample"),
    _docling_pdf("redp5110_sampled"),
    _docling_pdf("right_to_left_02"),
    _docling_pdf("right_to_left_03"),
    _docling_odf("odf_presentation_01.odp", "odf_presentation_01"),
    _docling_odf("odf_table_with_title_01.ods", "odf_table_with_title_01"),
    _docling_odf("text_document_01.odt", "text_document_01"),
    _docling_odf("text_document_02.odt", "text_document_02"),
    _docling_odf("text_document_03.odt", "text_document_03"),
    # set 2
    _mineru("academic_literature_0b2c9c91f5232541a7ace8984df306b2", "mineru_academic_0b2c9c91"),
    _mineru("academic_literature_f7904bc37cc2e25c1e3e412978854b10", "mineru_academic_f7904bc3"),
    _mineru(
        "research_report_1f978cd81fb7260c8f7644039ec2c054", "mineru_research_report_zh_1f978cd8"
    ),
    _p2m("ExamplePdf"),
    _p2m("CC-NC_Leitfaden"),
    _p2m("Flash-Masques-Temperature"),
    _p2m("The-Impact-of-Open-Access-Latin-American-Scholarship"),
    _p2m("Safe-Communication"),
    _p2m("Alice-In-Wonderland"),
    _p2m("CC_License_Agreement_of_siMPle"),
    _dcore("activities"),
    _dcore("inline_and_formatting"),
    _dcore("polymers"),
    _unstr("2022-alphabet-annual-report-56-59"),
    _unstr("AlienPlantThreatAssess-p24-p27"),
    _unstr("T-MMS-22Camry-pg40-42"),
    _unstr("kroger-press-release-2023"),
    _unstr("teaching-lm-reason"),
    # set 3
    _dleval("015a_reading_order_and_nesting_on_screenshots", "dleval_015a_manual_screenshots"),
    _dleval("011b_paragraph_continuation_with_picture_between", "dleval_011b_physics_paper"),
    _dleval("002b_table_order", "dleval_002b_tender_table"),
    Pair(
        3,
        "joss_melodie",
        "ABM4ALL/Melodie",
        "fb28b6eb9172bf7b07f421f9d720c51005de5722",
        "paper/paper.pdf",
        "paper/paper.md",
    ),
    Pair(
        3,
        "joss_multivae",
        "AgatheSenellart/MultiVae",
        "a8e55b084848de2b363ed186fea3938965c7e258",
        "paper/paper.pdf",
        "paper/paper.md",
    ),
    Pair(
        3,
        "zh_optalgo_report",
        "Alaya-in-Matrix/OptimizationAlgorithm",
        "d119339c74754856e7a977132327264b04223301",
        "report/report.pdf",
        "report/report.md",
    ),
    _eisvogel("book", "eisvogel_book"),
    _eisvogel("columns", "eisvogel_columns"),
    _eisvogel("images-and-tables", "eisvogel_images_tables"),
    _eisvogel("beamer-theme-moloch", "eisvogel_beamer_moloch"),
    _eisvogel("language-chinese", "eisvogel_language_chinese"),
    Pair(
        3,
        "mdtopdf_test",
        "mandolyte/mdtopdf",
        "12cbea5e116143d4fc3c40dbe7f2da6b2e87589f",
        "cmd/md2pdf/test.pdf",
        "cmd/md2pdf/test.md",
    ),
    # set 4: source Markdown + the PDF built from it, committed side by side
    Pair(
        4,
        "joss_ecodive",
        "cmmr/ecodive",
        "f6ec71e934b14d01942eaa4f98125c689a357b20",
        "paper/paper.pdf",
        "paper/paper.md",
    ),
    Pair(
        4,
        "joss_bobocep",
        "r3w0p/bobocep",
        "6c624ec83a822d0f2df8d28b4ce400695ddb5303",
        "paper/paper.pdf",
        "paper/paper.md",
    ),
    Pair(
        4,
        "joss_eyecite",
        "freelawproject/eyecite",
        "79e676129104d82852dc456085a3508c95420ac7",  # branch joss-paper
        "joss/paper.pdf",
        "joss/paper.md",
    ),
    Pair(
        4,
        "joss_uno",
        "cvanaret/Uno",
        "24e2b15ce6692607b608c00af0306e47fe4a7f1c",  # branch joss
        "joss/paper.pdf",
        "joss/paper.md",
    ),
    Pair(
        4,
        "ieee_pandoc_example",
        "djgoldsmith/Pandoc-IEEE-Paper",
        "da65adda3544370a500b852090b8ae63b68f0bb9",
        "output/output.pdf",
        "ExamplePaper.md",
    ),
    Pair(
        4,
        "beamer_pandoc_slides",
        "Alaya-in-Matrix/Pandoc-Slides-Template",
        "4e04d553aae6155e5fe3a57c01e5bb8ab64d1036",
        "slides/example.pdf",
        "slides/example.md",
    ),
    Pair(
        4,
        "marp_spring_test_profiler",
        "timbrueckner/spring-test-profiler",
        "c594eca049b91ccb1c8796d16912598406317987",
        "docs/marketing/project-pitch/index.pdf",
        "docs/marketing/project-pitch/index.md",
    ),
    Pair(
        4,
        "md2pdfnet_demo",
        "Flayms/Markdown2Pdf",
        "4a982a08644c950fca648ec732b6d9e013e7adad",
        "assets/demo.pdf",
        "Markdown2Pdf.Demo/README.md",
    ),
    Pair(
        4,
        "wkhtml_markdowntopdf_readme",
        "xieguigang/markdown2pdf",
        "9f2086063c760aaf30f30b379f36d24b4012e288",
        "README.pdf",
        "README.md",
    ),
    Pair(
        4,
        "zh_regex2mds_report",
        "155chb/regex2MDS",
        "4558d325c11443b485199c1e03626a2c77d59e66",
        "实验报告.pdf",
        "实验报告.md",
    ),
    Pair(
        4,
        "zh_sqat_fuzzing_report",
        "AlsoWereMe/SQAT-PJ2",
        "0894f3b5dd03166ce000f411bd5f002b1369d5e2",
        "实验报告.pdf",
        "实验报告.md",
    ),
    Pair(
        4,
        "zh_multimodal_sentiment_report",
        "7774596/2024-autumn-AI",
        "c4bf5e1b43a2345644555d203d5b95bac9a084fe",
        "实验报告.pdf",
        "实验报告.md",
    ),
    Pair(
        4,
        "zh_cache_coherency_report",
        _FUDAN,
        "64d8b09e8a267136295b8ef941416f58cb551262",
        "cache/document/report.pdf",
        "cache/document/report.markdown",
    ),
    Pair(
        4,
        "zh_cuda_overview",
        _FUDAN,
        "db63badac4713b0f7c9a079ff3086fefea3e0605",
        "CUDA_overview/cuda_overview.pdf",
        "CUDA_overview/cuda_overview.markdown",
    ),
    # set 5: source Markdown + the PDF built from it, committed side by side (new repositories)
    Pair(
        5,
        "joss_binomial_cis",
        "TRI-ML/binomial_cis",
        "40698fd800c0da022379a64a9ed0a1bc5a1d582f",
        "joss/paper.pdf",
        "joss/paper.md",
    ),
    Pair(
        5,
        "joss_parquetdb",
        "lllangWV/ParquetDB",
        "4a38b8803044f0b205807a448eee1f68440c1e6c",
        "joss/paper.pdf",
        "joss/paper.md",
    ),
    Pair(
        5,
        "joss_phylo2vec",
        "sbhattlab/phylo2vec",
        "68edae6e5a8a32236f0baa08f7de675a9fc64f85",
        "joss/paper.pdf",
        "joss/paper.md",
    ),
    Pair(
        5,
        "joss_matrixbandwidth",
        "Luis-Varona/MatrixBandwidth.jl",
        "698aa147d643ed96ae3822b445754afe5d6ee121",  # the published JOSS PDF
        "joss/10.21105.joss.09136.pdf",
        "joss/paper.md",
    ),
    Pair(
        5,
        "joss_bactscout",
        "ghruproject/bactscout",
        "1435405863a5e6af6324b2579dcd9406d5820a98",
        "joss/paper.pdf",
        "joss/paper.md",
    ),
    Pair(
        5,
        "pandoc_reverse_sorting_readme",
        "0Nom4D/ReverseSortingAlgorithm",
        "d99e16b218e598929d9bed6485017dfdeb1fdd5d",
        "README.pdf",
        "README.md",
    ),
    Pair(
        5,
        "resume_pandoc_latex",
        "0xameer/pandoc-lua-filters",
        "ae60a407c5792f7b817d91d23428f4a715a9091d",
        "output/resume.pdf",
        "markdown/resume.md",
    ),
    Pair(
        5,
        "slides_beamer_state_machine",
        "jhrcek/state-machine-testing-presentation",
        "6c2bff9219e2fbd593f13c353936c6e08755bdb0",
        "slides.pdf",
        "slides.md",
    ),
    Pair(
        5,
        "slides_marp_cooperate",
        "0xarthurxyz/cooperate-presentation",
        "b8863c1657d67aabddf85f7ff686d339fe97933e",
        "slides.pdf",
        "slides.md",
    ),
    Pair(
        5,
        "chrome_understory_user_guide",
        "Rotoslider/Understory-Forests",
        "3407c9145efcaba338ae0cb1dd89c3b7dcffe6c1",
        "USER_GUIDE.pdf",
        "USER_GUIDE.md",
    ),
    Pair(
        5,
        "chrome_revit_solar_user_guide",
        "KenLP/RevitSolarShading",
        "d8b03fc0f4fa859da7422651129f252eb967f30d",
        "USER_GUIDE.pdf",
        "USER_GUIDE.md",
    ),
    Pair(
        5,
        "typora_gomoku_design",
        "AnElegantHusky/GoMoKu",
        "ad0677a8a2d40ae6eaf86bc88212cb721066609f",
        "设计文档.pdf",
        "设计文档.md",
    ),
    Pair(
        5,
        "zh_ticketbooking_report",
        "CacaoGatto/UCAS_MPproject_TicketBooking",
        "3ba9dcf5d7471ada1d4942f881aacd21a9061e76",
        "实验报告.pdf",
        "report_src/实验报告.md",
    ),
    Pair(
        5,
        "zh_amazon_rec_report",
        "Linexox/amazon-rec",
        "2d86a5e5e53a8258db9282ab4c9ddf695bce7bd5",
        "报告.pdf",
        "报告.md",
    ),
    Pair(
        5,
        "zh_campus_qa_report",
        "Leonardooom/scnu-campus-qa-assistant",
        "1e58eb249d6c1ea1e6b4cd09230f97fca5f37a75",
        "报告.pdf",
        "报告.md",
    ),
    Pair(
        5,
        "zh_fje_design",
        "EricYza/fje_project",
        "ad72c44dc93ec4f103d724ef41dd3f1fc438a122",
        "设计文档.pdf",
        "设计文档.md",
    ),
    Pair(
        5,
        "zh_hgserver_guide",
        "1099255210/Hgserver-guide",
        "0dfb2485be5e70e106489220d1d068ebe72c1916",
        "README.pdf",
        "README.md",
    ),
    # set 6: source Markdown + the PDF built from it, committed side by side (new repositories)
    Pair(
        6,
        "joss_pycfrl",
        "JianhanZhang/PyCFRL",
        "41deaf4c34b747aa960749cb72d1bcc268ccc7ee",
        "JOSS/paper.pdf",
        "JOSS/paper.md",
    ),
    Pair(
        6,
        "joss_pprof",
        "UM-KevinHe/pprof",
        "03d9191e28972a26097ec912fafaeec72ec281c4",
        "JOSS/paper.pdf",
        "JOSS/paper.md",
    ),
    Pair(
        6,
        "joss_w2w",
        "matthiasdemuzere/w2w",
        "22af8b54f7b2339ab04c74eaf6d018daddf34b95",
        "JOSS/paper.pdf",
        "JOSS/paper.md",
    ),
    Pair(
        6,
        "pandoc_horoscope_user_manual",
        "BlacMeW/horoscope_cli",
        "cc0ac29822342ce9ac7654fe18d984aba3e91924",
        "USER_MANUAL.pdf",
        "USER_MANUAL.md",
    ),
    Pair(
        6,
        "pandoc_rtp_summer_report",
        "clarkfitzg/rtp",
        "7a05c9b5752bf603285d8c6a57429617e77fb73a",
        "2020-08-13-summer-report.pdf",
        "2020-08-13-summer-report.md",
    ),
    Pair(
        6,
        "slides_beamer_talkmd",
        "BJCaasenbrood/TalkMd",
        "37d87fe63287c298c5a4a1af0f945227479373d0",
        "talk.pdf",
        "talk.md",
    ),
    Pair(
        6,
        "slides_marp_vue_practices",
        "AT-CE-VueJS/Talk---GoodPractices-Vue",
        "8c1f841b9b2b205b1096bd09ce8c451ac045147d",
        "talk.pdf",
        "talk.md",
    ),
    Pair(
        6,
        "slides_marp_git_lesson",
        "LiviaLelis/git-lesson-fog",
        "f74b0498e579e8c27671688bb40f044218031e4d",
        "deck.pdf",
        "deck.md",
    ),
    Pair(
        6,
        "chrome_flask_todo_writeup",
        "ACHolmes/flask-todo",
        "8f021cc31166f27b7e65a2f24f298892cbd7cdb1",
        "writeup.pdf",
        "writeup.md",
    ),
    Pair(
        6,
        "chrome_cs418_syllabus",
        "Allsx246/cs418518-s26",
        "5c645c77824b2a684f7a9804aa579fb6627d4745",
        "syllabus.pdf",
        "syllabus.md",
    ),
    Pair(
        6,
        "es_chrome_uapa_manual",
        "100066613/proyecto-grupo1-uapa",
        "974eca82718daae51f2dd5fec48f4029be741984",
        "MANUAL.pdf",
        "MANUAL.md",
    ),
    Pair(
        6,
        "libreoffice_flicker_protocol",
        "ahagelberg/optical-flicker-generator",
        "a9b5663771459d91a8c429ed57f3fe28c45635f9",
        "PROTOCOL.pdf",
        "firmware/PROTOCOL.md",
    ),
    Pair(
        6,
        "zh_cg_project_report",
        "EscoffierZhou/Computer_Grphics",
        "a9d44c850ee798146913c1dd1527d2fa9c7256b7",
        "项目报告.pdf",
        "项目报告.md",
    ),
    Pair(
        6,
        "zh_stock_analysis_report",
        "Carl-Li-zx/DM-Project_Stocks-Time-Series-Analysis-",
        "76822c8232022b2a0b29d03568e6362a672dbf27",
        "项目报告.pdf",
        "项目报告.md",
    ),
    Pair(
        6,
        "zh_weasyprint_family_event_report",
        "PeterWang723/summer_family_event",
        "5cfad66e1489a3ac39ba85785d87280de020869e",
        "项目报告.pdf",
        "项目报告.md",
    ),
    Pair(
        6,
        "zh_beginnerfull_guide",
        "Arasik/BeginnerFull",
        "cdb69da5f3a5e2ab41992edb215f55d1e68b966c",
        "说明文档.pdf",
        "说明文档.md",
    ),
    Pair(
        6,
        "zh_erisc_guide",
        "BladLust/ERISC",
        "77cc153abc5c36bc6d686a661b5c09830ff5bd45",
        "说明文档.pdf",
        "说明文档.md",
    ),
    Pair(
        6,
        "zh_webserver_guide",
        "Appleuiy/Simple-WebServer-Base-On-OpenSSL",
        "06c2c54da06d01766a85e42b13fc25521616e619",
        "说明文档.pdf",
        "说明文档.md",
    ),
    # set 7: source Markdown + the PDF built from it, committed side by side (new repositories)
    Pair(
        7,
        "chrome_heic_converter_user_guide",
        "SC-Swiderski-LLC/HEIC-Converter",
        "397b113191a96507116eedc3dbac8a9302213d17",
        "USER_GUIDE.pdf",
        "USER_GUIDE.md",
    ),
    Pair(
        7,
        "typora_cs305_project_readme",
        "121116123/cs305-computerNetwork",
        "3f11e377ac58dd72bbfaf8bddde3d7f9941aac04",
        "999project/my_project/README.pdf",
        "999project/my_project/README.md",
    ),
    Pair(
        7,
        "joss_wrfup",
        "jacobogabeiraspenas/wrfup",
        "982da4acac66d92ba6869d3a444c195bc73f3309",
        "JOSS/paper.pdf",
        "JOSS/paper.md",
    ),
    Pair(
        7,
        "joss_fastpca",
        "ACSoupir/FastPCA",
        "3a071798d05299b4a0ae2ba5e126795bf6972c5b",
        "paper/paper.pdf",
        "paper/paper.md",
    ),
    Pair(
        7,
        "joss_openquestion",
        "Alcampopiano/OpenQuestion",
        "4a19ab796241d2e069cea037d04a328a55a5a7b0",
        "paper/paper.pdf",
        "paper/paper.md",
    ),
    Pair(
        7,
        "pandoc_citypulse_etl_report",
        "pattersam/citypulse-etl",
        "1937f844cf63d09e8d5b206e89201ed55d611e25",
        "docs/report.pdf",
        "docs/report.md",
    ),
    Pair(
        7,
        "it_pandoc_db_project_report",
        "aledinato/Database-Project-SCP4065533",
        "4737910218f18803d35bb43f160465be660d1315",
        "report.pdf",
        "bozza.md",
    ),
    Pair(
        7,
        "slides_beamer_reason_basic",
        "jasim/jsfoo-talk-learning-to-learn-reason",
        "5c4936784f764786d904940c29082f989218b4f5",
        "basic.pdf",
        "basic.md",
    ),
    Pair(
        7,
        "slides_marp_speculative_decoding",
        "keyboardAnt/faster-inference-seminar-talk-2025",
        "42387d2ff3a51814e45a5fe1439b1c30e12008db",
        "talk.pdf",
        "talk.md",
    ),
    Pair(
        7,
        "zh_chrome_tasklist_report",
        "CxLnjucs/TaskListApp",
        "5c41b12a35f16b9d9d2363240664183e74ea0cd4",
        "实验报告.pdf",
        "实验报告.md",
    ),
    Pair(
        7,
        "zh_typora_bit_ml_report",
        "ChiZhang-bit/BIT-Machine-Learning",
        "ee92a70c908ad04c9f9bdbf978f1db27c5ff80d4",
        "实验报告.pdf",
        "实验报告.md",
    ),
    Pair(
        7,
        "zh_typora_software_test_report",
        "CodingYuanLiu/Software-Test",
        "9ac3c9c1660312c92fb9e635cbeafd01deca28f2",
        "测试报告.pdf",
        "测试报告.md",
    ),
    Pair(
        7,
        "zh_pandoc_hotel_tech_report",
        "Leucanthos/All-about-the-Hotel",
        "e5ee753e1933065254352816289f4aac623adadd",
        "技术报告.pdf",
        "技术报告.md",
    ),
    # set 8: source Markdown + the PDF built from it, committed side by side (new repositories)
    Pair(
        8,
        "pandoc_predict_install",
        "WintonCentre/predict-v21-main",
        "33766332f5933e05e78ba09520583e45583ebbcf",
        "INSTALL.pdf",
        "INSTALL.md",
    ),
    Pair(
        8,
        "qtwebkit_flight_tracking_architecture",
        "EdSwArchitect/ai-flight-tracking",
        "eae270354b2fd25033486e1c4496c82759ae7beb",
        "ARCHITECTURE.pdf",
        "ARCHITECTURE.md",
    ),
    Pair(
        8,
        "chrome_idsweep_architecture",
        "AspectSys/idSweep",
        "91136dca88c97b324f162a19aa6289de32ad7c2b",
        "ARCHITECTURE.pdf",
        "ARCHITECTURE.md",
    ),
    Pair(
        8,
        "vscode_swiftlogistics_cms_doc",
        "SahanG450/SwiftLogistics",
        "37d8e25a1ed17fbbbaad6bc979d95fc359588d8c",
        "doc/CMS_EXTENDED_DOCUMENTATION.pdf",
        "doc/CMS_EXTENDED_DOCUMENTATION.md",
    ),
    Pair(
        8,
        "vscode_embedding_trident_readme",
        "noahzhy/EmbeddingTrident",
        "94f355a6343c01f9a841fa6b5478d2c830126e31",
        "README.pdf",
        "README.md",
    ),
    Pair(
        8,
        "weasyprint_autometrology_tech_reference",
        "HotCat/AutoMetrology",
        "01905e9027c04f9be4ccd002a129bd46c38050ba",
        "TECHNICAL_REFERENCE.pdf",
        "TECHNICAL_REFERENCE.md",
    ),
    Pair(
        8,
        "fr_pandoc_hex_project_readme",
        "aaron-randreth/projet-hex-java",
        "4ec33bdfa9864b53880d89fa61fc44831a76b274",
        "README.pdf",
        "README_no_toc.md",
    ),
    Pair(
        8,
        "zh_pandoc_weasyprint_social_srs",
        "hzy201314/Social-Network-Project",
        "72e678aa6e03fc4154fe8aec40d87ebc8dadcfa4",
        "需求规格说明书.pdf",
        "需求规格说明书.md",
    ),
    Pair(
        8,
        "zh_typora_artshell_user_manual",
        "Artessay/Artshell",
        "eaa656d27bd9b30c8eebc2ca6310f52717fdabcb",
        "doc/用户手册.pdf",
        "doc/用户手册.md",
    ),
    Pair(
        8,
        "zh_typora_sd_express_readme",
        "cursorhu/sd_express_tester",
        "38383cb7c6c87fea856cbcb052a0c71d27ed4db0",
        "README.pdf",
        "README.md",
    ),
    Pair(
        8,
        "zh_vscode_flowbot_user_manual",
        "9triver/FlowBot",
        "6c5c9e094d751ab93244ee94dd9a934d27918152",
        "doc/用户手册.pdf",
        "doc/用户手册.md",
    ),
    Pair(
        8,
        "zh_ynote_kafka_monitor_guide",
        "QQhuxuhui/kafkaMonitor",
        "4349268eb4196f5ebd139d1eee69bd5bda61a5aa",
        "docs/使用说明.pdf",
        "docs/使用说明.md",
    ),
    Pair(
        8,
        "zh_pandoc_course_sim_readme",
        "cs-fisha/course_simulation",
        "e4452d91a918640ed3de35b159e0ec2fbe5c8fae",
        "README_zh.pdf",
        "README_zh.md",
    ),
    Pair(
        8,
        "zh_chrome_climate_monitor_handbook",
        "alfonsocheng1025/climate-policy-monitor",
        "a87f5e5f39fd4757cb4bfaa355ff222ff1deafb3",
        "HANDBOOK.pdf",
        "HANDBOOK.md",
    ),
    Pair(
        8,
        "zh_edge_homefin_srs",
        "ghjcfrt/HomeFin",
        "f2f250cabaf021a725ffe3d7a6389f72f1348c49",
        "需求规格说明书.pdf",
        "需求规格说明书.md",
    ),
    # set 9: source Markdown + the PDF built from it, committed side by side (new repositories)
    Pair(
        9,
        "pandoc_pankyll_readme",
        "ckuelker/pankyll-pandoc",
        "7e778b2c185404fcae3ec04611e2dfc7cfd97efc",
        "README.pdf",
        "README.md",
    ),
    Pair(
        9,
        "pandoc_shell_cmd_guide",
        "lostjared/shell-cmd",
        "57f599ad5571b351b3189308612c35ceca923dc6",
        "GUIDE.pdf",
        "GUIDE.md",
    ),
    Pair(
        9,
        "weasyprint_deepwiki_usage_examples",
        "LoganZechella/mcp-deepwiki-server",
        "5279f17deee6bca6bd07596472f983bb422452c5",
        "examples/usage-examples.pdf",
        "examples/usage-examples.md",
    ),
    Pair(
        9,
        "weasyprint_openclaw_after_setup",
        "RusDyn/moltbot-vps-guide",
        "b703bfc3f5b0513a70cea3f854ad42c5b3f66dd1",
        "AFTER.pdf",
        "AFTER.md",
    ),
    Pair(
        9,
        "phantomjs_drumkid_manual",
        "mattybrad/drumkid",
        "afcd6b0853cb7ee1c2e52094e9270c758ed9fe09",
        "manual.pdf",
        "docs/v6/manual.md",
    ),
    Pair(
        9,
        "reportlab_easy_ip_user_guide",
        "Rickardjd/Easy_IP",
        "98876c579cb302a000f28d9e69f521f23c54cd29",
        "docs/USER_GUIDE.pdf",
        "docs/USER_GUIDE.md",
    ),
    Pair(
        9,
        "chrome_maus_user_guide",
        "deepnmr/maus",
        "56cb9b45df057656a7cbf5f54066bb33cb6a2c18",
        "GUIDE.pdf",
        "GUIDE.md",
    ),
    Pair(
        9,
        "zh_typora_compiler_lab2_guide",
        "Naputao/Compiler-Docs",
        "b0d9d8f2cb64cc8be4beb30b708c25eec2e79b7d",
        "lab2/实验二.pdf",
        "lab2/实验二.md",
    ),
    Pair(
        9,
        "zh_typora_kf_gins_readme",
        "i2Nav-WHU/KF-GINS",
        "85a6f060e63b5226de8613404cd8716473f7ca76",
        "README_CN.pdf",
        "README_CN.md",
    ),
    Pair(
        9,
        "zh_typora_joystickbit_readme",
        "emakefun/pxt-joystickbit",
        "425616fec04c25945de583152fc2d7b2554f3e65",
        "README_zh.pdf",
        "README_zh.md",
    ),
    Pair(
        9,
        "zh_marktext_find_stones_readme",
        "windzu/find_stones_solution",
        "18ac36e18030acb131df6db0ac79739f06e95c68",
        "README_zh-CN.pdf",
        "README_zh-CN.md",
    ),
    Pair(
        9,
        "zh_fpdf_blender_weight_dev_doc",
        "skulunna-blip/blender-weight-manager",
        "d32d7ff7d2d58dd0cc841f863717afe59e701540",
        "docs/开发文档.pdf",
        "docs/开发文档.md",
    ),
    Pair(
        9,
        "zh_vscode_deploy_doc",
        "RioArisk/test",
        "d167b6998fe8fe22d14eb28b42898a1c603b041a",
        "部署文档.pdf",
        "部署文档.md",
    ),
    Pair(
        9,
        "ja_vscode_fenrir_spec",
        "midoriba/fenrir-assignment",
        "f9caf3ccc8919088c7ee8d7d765708ad19913db8",
        "仕様書.pdf",
        "仕様書.md",
    ),
    Pair(
        9,
        "ko_mdtopdf_genomic_readme",
        "nganlinh4/genomic_relatedness_classifier",
        "9ff976e6cdf8378e6e47729313ed2edfa66c9379",
        "README_KR.pdf",
        "README_KR.md",
    ),
    # set 10: source Markdown + the PDF built from it, committed side by side (new repositories)
    Pair(
        10,
        "pandoc_han2026_readme",
        "nk2110nk/han2026",
        "06c64a22c83cd56c42034b6257ef831148d2aba9",
        "README.pdf",
        "README.md",
    ),
    Pair(
        10,
        "pandoc_doegen_manual",
        "sebhaan/DoEgen",
        "349b947bf2a07c613e75b0841fb00f539627dc11",
        "docs/MANUAL.pdf",
        "MANUAL.md",
    ),
    Pair(
        10,
        "weasyprint_zf_microglia_statistics_guide",
        "CTichy/ZF-Microglia-AI",
        "a719dfe954a53f79cb34a9917abe16feb565aaf7",
        "STATISTICS_GUIDE.pdf",
        "STATISTICS_GUIDE.md",
    ),
    Pair(
        10,
        "weasyprint_docprocessor_readme",
        "HelixDevelopment/DocProcessor",
        "de8c1bbad9d384bac43ba4dc956d8104698451df",
        "README.pdf",
        "README.md",
    ),
    Pair(
        10,
        "qtwebkit_please_installation",
        "mgrady3/PLEASE",
        "ac31addb8f01132016d2b37c94477621e0e5126c",
        "INSTALLATION.pdf",
        "INSTALLATION.md",
    ),
    Pair(
        10,
        "chrome_txtree_usage",
        "diogomachado-bioinfo/txtree",
        "51348ad779ff28a9e3ca30b686145c3cc77f944a",
        "USAGE.pdf",
        "USAGE.md",
    ),
    Pair(
        10,
        "zh_typora_xv6_rust_design_doc",
        "Ko-oK-OS/xv6-rust",
        "c605d68bdf43dc58537815cc449434d15f396072",
        "doc/设计文档.pdf",
        "doc/设计文档.md",
    ),
    Pair(
        10,
        "zh_typora_wthh_tech_doc",
        "kxz2002/wthh",
        "0cbbc9d5432520408ce5c1bc71ed333a1e185a59",
        "docs/技术文档.pdf",
        "docs/技术文档.md",
    ),
    Pair(
        10,
        "zh_typora_thssdb_design_doc",
        "blueice-thu/ThssDB",
        "543d40c53197c34084fa66007e49a997509940c7",
        "docs/设计文档.pdf",
        "docs/设计文档.md",
    ),
    Pair(
        10,
        "zh_markdownplus_github_cheat_sheet",
        "Stanleygoo/github-cheat-sheet",
        "b47ef0206304c8fc6d81092772c61b14c44781eb",
        "README.zh-cn.pdf",
        "README.zh-cn.md",
    ),
    Pair(
        10,
        "zh_xelatex_visualnn_components",
        "flowerinheart/VisualNN",
        "fc4ed33629f107226d00afe2f240daf50c52d6bc",
        "docs/组件介绍.pdf",
        "docs/组件介绍.md",
    ),
    Pair(
        10,
        "ja_qt_vimarkdown_quickstart",
        "shigmas/viMarkdown",
        "77168ba55cb58946248b2cbfa5ca127e162f25d1",
        "docs/ja/quickstart.pdf",
        "docs/ja/quickstart.md",
    ),
    Pair(
        10,
        "ja_vscode_mitsue_readme",
        "robouden/mitsue-ai-data-center",
        "32f805b79873af8e6e06e7b4d7e7de7dc99e5f9c",
        "README_jp.pdf",
        "README_jp.md",
    ),
    Pair(
        10,
        "ko_chrome_pc_spec_checker_guide",
        "sodam-ai/PC-Spec_Checker",
        "b04380e922932e7e6dc462278a2efacacfa9dc8c",
        "GUIDE.ko.pdf",
        "GUIDE.ko.md",
    ),
    # set 11: source Markdown + the PDF built from it, committed side by side (new repositories)
    Pair(
        11,
        "chrome_storymaster_guide",
        "Bohndiggin/storymaster",
        "c4831268f674c49015ae7824ec5c21b45db5c622",
        "GUIDE.pdf",
        "GUIDE.md",
    ),
    Pair(
        11,
        "chrome_chitta_developer_onboarding",
        "navadimml/chitta-advanced",
        "60063426208a8ba5429a877e7cfc8066e8bb045c",
        "docs/DEVELOPER_ONBOARDING.pdf",
        "docs/DEVELOPER_ONBOARDING.md",
    ),
    Pair(
        11,
        "chrome_evalagent_guide",
        "ovaismehboob/evalagent",
        "6d08279cad7597a80fc67658dbe14e3e7de9071a",
        "GUIDE.pdf",
        "GUIDE.md",
    ),
    Pair(
        11,
        "chrome_uadc_poc_environment_tests_tutorial",
        "pontsoleil/UADC-PoC",
        "c504f88dab62a6e6e1248f1fbfa4eaaf169f81ac",
        "docs/01_ENVIRONMENT_TESTS_TUTORIAL.pdf",
        "docs/01_ENVIRONMENT_TESTS_TUTORIAL.md",
    ),
    Pair(
        11,
        "ko_chrome_weekly_roadmap_plan",
        "hkjang/weekly",
        "b08ca5251639717d0ca0c85244a579bbf92b651f",
        "docs/ROADMAP_PLAN.pdf",
        "docs/ROADMAP_PLAN.md",
    ),
    Pair(
        11,
        "zh_typora_buaa_compiler_optimization_doc",
        "darrenglow/BUAA_Compiler",
        "b2fec5df37420600d4ad3f27fee6ebc6a0fba6b1",
        "docs/优化文档.pdf",
        "docs/优化文档.md",
    ),
    Pair(
        11,
        "zh_typora_onehotkey_readme",
        "RUSRUSHB/OneHotkey",
        "ef69f989bb53d1811a6d4fbaea7e8a9ad23b9d35",
        "README_CN.pdf",
        "README_CN.md",
    ),
    Pair(
        11,
        "zh_typora_smart_city_education_readme",
        "quackson/Smart-City-Education",
        "26ede3a374a81f7885c89301e489ed3d6b7eb54e",
        "README-zh.pdf",
        "README-zh.md",
    ),
    Pair(
        11,
        "zh_wkhtmltopdf_webshark_manual",
        "EchoOfCloud/WEBShark",
        "3ae12f4f34c25a4af5e8d17f3fe8c867cbe8d074",
        "操作手册.pdf",
        "操作手册.md",
    ),
    Pair(
        11,
        "ja_wkhtmltopdf_caffemarkdown_readme",
        "keisuken/caffemarkdown",
        "a7c532d24962c86fd2c90123b52ba501287abde9",
        "README_ja.pdf",
        "README_ja.md",
    ),
)

SET_DIRS = {
    1: "heldout/pdf",
    2: "heldout2",
    3: "heldout3",
    4: "heldout4",
    5: "heldout5",
    6: "heldout6",
    7: "heldout7",
    8: "heldout8",
    9: "heldout9",
    10: "heldout10",
    11: "heldout11",
}


class FetchError(Exception):
    """A repository, commit or blob that the sets need is not available."""


def _git(git_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True)
    if check and proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise FetchError(f"git {' '.join(args)} failed in {git_dir}: {err}")
    return proc


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


class Repos:
    """Finds (mirror mode) or clones (cache mode) the git directory of each repository."""

    def __init__(self, mirrors: Path | None, cache: Path) -> None:
        self.mirrors = mirrors
        self.cache = cache
        self._dirs: dict[str, Path] = {}

    def git_dir(self, repo: str) -> Path:
        if repo not in self._dirs:
            self._dirs[repo] = self._find(repo) if self.mirrors else self._clone(repo)
        return self._dirs[repo]

    def _find(self, repo: str) -> Path:
        assert self.mirrors is not None
        stem = repo.replace("/", "+")
        tried = [
            self.mirrors / stem / "repo",
            self.mirrors / stem / "repo" / ".git",
            self.mirrors / f"{stem}.git",
            self.mirrors / stem,
            self.mirrors / stem / ".git",
        ]
        for path in tried:
            if _is_git_dir(path):
                return path
        raise FetchError(f"no git directory for {repo}; tried " + ", ".join(map(str, tried)))

    def _clone(self, repo: str) -> Path:
        path = self.cache / f"{repo.replace('/', '+')}.git"
        if not _is_git_dir(path):
            self.cache.mkdir(parents=True, exist_ok=True)
            url = f"https://github.com/{repo}.git"
            print(f"cloning {url} -> {path}", flush=True)
            proc = subprocess.run(
                ["git", "clone", "--bare", "--filter=blob:none", url, str(path)],
                capture_output=True,
            )
            if proc.returncode != 0:
                err = proc.stderr.decode(errors="replace").strip()
                raise FetchError(f"git clone {url} failed: {err}")
        return path

    def ensure_commit(self, repo: str, commit: str) -> Path:
        git_dir = self.git_dir(repo)
        if _git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0:
            return git_dir
        if self.mirrors is None:
            # not on any branch the clone saw (e.g. a pull-request merge): ask for it by id
            _git(git_dir, "fetch", "--filter=blob:none", "origin", commit, check=False)
            if _git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0:
                return git_dir
        raise FetchError(f"commit {commit} of {repo} is not in {git_dir}")


def _blob(repos: Repos, repo: str, commit: str, path: str) -> bytes:
    git_dir = repos.ensure_commit(repo, commit)
    spec = f"{commit}:{path}"
    if _git(git_dir, "cat-file", "-e", spec, check=False).returncode != 0:
        raise FetchError(
            f"missing blob {repo}@{commit}:{path} in {git_dir} "
            "(no such path, or the blob was left out of the snapshot)"
        )
    data = _git(git_dir, "cat-file", "blob", spec).stdout
    if data.startswith(b"version https://git-lfs.github.com/spec/"):
        raise FetchError(f"{repo}@{commit}:{path} is a Git LFS pointer, not the file")
    return data


def _docling_markdown(expected_json: bytes) -> bytes:
    from docling_core.types.doc import DoclingDocument

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "expected.json"
        path.write_bytes(expected_json)
        doc = DoclingDocument.load_from_json(path)
    return doc.export_to_markdown().encode("utf-8")


def _write(path: Path, data: bytes, source: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()[:16]
    print(f"wrote {path}  {len(data):>9} B  sha256 {digest}  <- {source}", flush=True)


def build(pairs: list[Pair], repos: Repos, root: Path) -> int:
    written = 0
    for pair in pairs:
        folder = root / SET_DIRS[pair.heldout_set]
        pdf = _blob(repos, pair.repo, pair.commit, pair.pdf)
        if not pdf.startswith(b"%PDF"):
            raise FetchError(f"{pair.repo}@{pair.commit}:{pair.pdf} does not start with %PDF")
        gt = _blob(repos, pair.repo, pair.commit, pair.gt)
        source = f"{pair.repo}@{pair.commit[:12]}:"
        if pair.gt_kind == DOCLING_JSON:
            gt = _docling_markdown(gt)
            gt_source = f"export_to_markdown({source}{pair.gt})"
        else:
            gt_source = source + pair.gt
        _write(folder / f"{pair.name}.pdf", pdf, source + pair.pdf)
        _write(folder / "groundtruth" / f"{pair.name}.md", gt, gt_source)
        written += 1
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Rebuild the held-out PDF evaluation sets.")
    ap.add_argument(
        "--mirrors",
        type=Path,
        help="folder of git dirs named owner+name, owner+name.git or owner+name/repo",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "corpusflow" / "heldout-repos",
        help="where to clone repositories when --mirrors is not given",
    )
    ap.add_argument("--root", type=Path, default=Path("/tmp"), help="parent of the set folders")
    ap.add_argument(
        "--sets", type=int, nargs="+", choices=sorted(SET_DIRS), default=sorted(SET_DIRS)
    )
    args = ap.parse_args(argv)

    if args.mirrors is not None and not args.mirrors.is_dir():
        print(f"error: --mirrors {args.mirrors} is not a folder", file=sys.stderr)
        return 2
    pairs = [p for p in PAIRS if p.heldout_set in args.sets]
    if any(p.gt_kind == DOCLING_JSON for p in pairs):
        try:
            import docling_core  # noqa: F401
        except ImportError:
            print(
                "error: set 3 needs docling-core for the dleval_* ground truths; "
                "run with the project's .venv/bin/python (or leave out set 3 with --sets)",
                file=sys.stderr,
            )
            return 2

    repos = Repos(args.mirrors, args.cache)
    try:
        written = build(pairs, repos, args.root)
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for heldout_set in args.sets:
        n = sum(p.heldout_set == heldout_set for p in pairs)
        print(f"set {heldout_set}: {n} pairs in {args.root / SET_DIRS[heldout_set]}")
    print(f"{written} pairs written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
