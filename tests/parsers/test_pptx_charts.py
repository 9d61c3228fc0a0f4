"""PPTX charts: the text docling's PowerPoint backend leaves out is recovered.

The decks are written here with python-pptx (the same chart XML PowerPoint
writes), so each case states exactly what the chart holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from parsers import parse_file


def _deck(path: Path) -> Path:
    from lxml import etree
    from pptx import Presentation
    from pptx.chart.data import BubbleChartData, CategoryChartData, XyChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    prs = Presentation()
    layout = prs.slide_layouts[5]  # title only
    box = (Inches(1), Inches(2), Inches(6), Inches(4))

    slide = prs.slides.add_slide(layout)
    slide.shapes.title.text = "Pump trials"
    xy = XyChartData()
    series = xy.add_series("Pump efficiency")
    for x, y in [(1.5, 10), (2.5, 22), (3.5, 31)]:
        series.add_data_point(x, y)
    chart = slide.shapes.add_chart(XL_CHART_TYPE.XY_SCATTER, *box, xy).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Flow versus efficiency"
    chart.category_axis.has_title = True
    chart.category_axis.axis_title.text_frame.text = "Flow rate"
    chart.value_axis.has_title = True
    chart.value_axis.axis_title.text_frame.text = "Efficiency percent"

    slide = prs.slides.add_slide(layout)
    slide.shapes.title.text = "Sites"
    bubbles = BubbleChartData()
    series = bubbles.add_series("Wind farms")
    for x, y, size in [(1, 2, 30), (4, 5, 60)]:
        series.add_data_point(x, y, size)
    slide.shapes.add_chart(XL_CHART_TYPE.BUBBLE, *box, bubbles)

    slide = prs.slides.add_slide(layout)
    slide.shapes.title.text = "Revenue"
    data = CategoryChartData()
    for year in ("2023", "2024"):
        group = data.add_category(year)
        for quarter in ("Q1", "Q2"):
            group.add_sub_category(quarter)
    data.add_series("Revenue", (11, 12, 21, 22))
    chart = slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, *box, data).chart
    chart.value_axis.has_title = True
    chart.value_axis.axis_title.text_frame.text = "Million EUR"
    # A title linked to a worksheet cell, as Excel-made charts often have.
    chart.has_title = True
    chart.chart_title.text_frame.text = "placeholder"
    c = "http://schemas.openxmlformats.org/drawingml/2006/chart"
    tx = chart.element.find(f"{{{c}}}chart/{{{c}}}title/{{{c}}}tx")
    for child in list(tx):
        tx.remove(child)
    tx.append(
        etree.fromstring(
            f'<c:strRef xmlns:c="{c}"><c:f>Sheet1!$F$1</c:f><c:strCache><c:ptCount val="1"/>'
            '<c:pt idx="0"><c:v>Revenue by quarter</c:v></c:pt></c:strCache></c:strRef>'
        )
    )
    prs.save(path)
    return path


@pytest.fixture(scope="module")
def charts_md(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    doc = parse_file(_deck(tmp_path_factory.mktemp("charts") / "charts.pptx"))
    assert doc.parser == "docling"
    return doc.markdown, json.loads(doc.docling_json)


def _rows(markdown: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|") and not set(line) <= set("|-: ")
    ]


def test_scatter_keeps_x_values_and_axis_titles(charts_md: tuple[str, dict]) -> None:
    markdown, _ = charts_md
    rows = _rows(markdown)
    assert ["Flow rate", "Pump efficiency"] in rows
    assert ["1.5", "10"] in rows and ["3.5", "31"] in rows
    assert "Flow versus efficiency (Y axis: Efficiency percent)" in markdown


def test_bubble_keeps_x_and_sizes(charts_md: tuple[str, dict]) -> None:
    rows = _rows(charts_md[0])
    assert ["X", "Wind farms", "Wind farms (size)"] in rows
    assert ["1", "2", "30"] in rows and ["4", "5", "60"] in rows


def test_multilevel_categories_and_linked_title(charts_md: tuple[str, dict]) -> None:
    markdown, _ = charts_md
    rows = _rows(markdown)
    assert ["", "", "Revenue"] in rows
    assert ["2023", "Q1", "11"] in rows and ["2024", "Q2", "22"] in rows
    assert "Revenue by quarter (Value axis: Million EUR)" in markdown


def test_chart_stays_a_picture_with_its_data_on_its_slide(charts_md: tuple[str, dict]) -> None:
    """The table lives in the chart picture's meta (what docling's serializers and the
    chunker read), on the chart's own slide, with the caption linked to the picture."""
    _, data = charts_md
    pictures = data["pictures"]
    assert len(pictures) == 3 and not data["tables"]
    pages = [p["prov"][0]["page_no"] for p in pictures]
    assert pages == [1, 2, 3]
    for picture in pictures:
        chart = picture["meta"]["tabular_chart"]["chart_data"]
        assert chart["num_rows"] >= 3
    assert all(picture["captions"] for picture in (pictures[0], pictures[2]))


def test_plain_category_chart_reads_like_docling(shared_corpus: Path) -> None:
    doc = parse_file(shared_corpus / "pptx" / "pptx_chart.pptx")
    rows = _rows(doc.markdown)
    assert ["", "Freshwater Ducks", "Saltwater Ducks"] in rows
    assert ["2022", "175", "130"] in rows
    assert "Wild Duck Observations by Year" in doc.markdown
