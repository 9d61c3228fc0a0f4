"""Regenerate the bundled sample corpus (samples/corpus).

The files are committed; this script documents how they were made. It needs
reportlab, python-docx, python-pptx, openpyxl and Pillow (not runtime
dependencies): python samples/tools/make_samples.py
"""

from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "corpus"
# Chinese and mixed Chinese/English documents: a corpus of their own, so the English
# sample corpus (and the tests and quick start built on its seven files) stays as is.
BILINGUAL = Path(__file__).resolve().parents[1] / "bilingual"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def make_pdf() -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer

    styles = getSampleStyleSheet()
    story = [
        Paragraph("Northwind Field Operations Handbook", styles["Title"]),
        Paragraph("1. Site Safety", styles["Heading1"]),
        Paragraph(
            "Every technician completes the lockout-tagout checklist before opening a cabinet. "
            "Hard hats are mandatory inside the turbine hall, and hearing protection is required "
            "whenever the noise level exceeds 85 decibels.",
            styles["BodyText"],
        ),
        Paragraph("1.1 Working at Height", styles["Heading2"]),
        Paragraph(
            "A second person must hold the ladder for any climb above 2 metres. Harness "
            "inspections are logged weekly in the maintenance register by the shift lead.",
            styles["BodyText"],
        ),
        PageBreak(),
        Paragraph("2. Spare Parts Logistics", styles["Heading1"]),
        Paragraph(
            "Critical spares such as gearbox bearings are stocked at the Rotterdam depot. "
            "An emergency order placed before 14:00 ships the same day by courier; later "
            "orders ship the next morning.",
            styles["BodyText"],
        ),
        Paragraph("2.1 Returns", styles["Heading2"]),
        Paragraph(
            "Defective parts are returned within 30 days with the original RMA number written "
            "on the box. Parts returned without an RMA number are scrapped.",
            styles["BodyText"],
        ),
    ]
    SimpleDocTemplate(str(OUT / "field_handbook.pdf"), pagesize=A4, title="Northwind Field Operations Handbook").build(story)


def make_scan() -> None:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (1240, 1754), "white")
    draw = ImageDraw.Draw(img)
    title = ImageFont.truetype(FONT, 44)
    body = ImageFont.truetype(FONT, 30)
    draw.text((120, 140), "Incident Report 2024-117", font=title, fill="black")
    lines = [
        "On 12 March the cooling pump at substation B",
        "tripped after a voltage dip. The standby pump",
        "started automatically within 40 seconds.",
        "Root cause: a worn contactor in the starter panel.",
        "Action: replace contactors every 18 months.",
    ]
    for i, line in enumerate(lines):
        draw.text((120, 260 + i * 52), line, font=body, fill="black")
    img.save(OUT / "scanned_incident_report.pdf", "PDF", resolution=150)


def make_docx() -> None:
    import docx

    d = docx.Document()
    d.add_heading("Travel and Expense Policy", 0)
    d.add_heading("Booking Rules", 1)
    d.add_paragraph(
        "Flights are booked through the corporate travel portal at least 14 days before "
        "departure. Economy class is the default for flights shorter than six hours."
    )
    d.add_heading("Hotel Limits", 1)
    d.add_paragraph("The nightly hotel cap depends on the city tier:")
    t = d.add_table(rows=1, cols=3)
    t.style = "Table Grid"
    for cell, text in zip(t.rows[0].cells, ["Tier", "Nightly cap", "Currency"]):
        cell.text = text
    for row in [("Tier 1", "500", "CNY"), ("Tier 2", "180", "EUR"), ("Tier 3", "120", "EUR")]:
        cells = t.add_row().cells
        for cell, text in zip(cells, row):
            cell.text = text
    d.add_heading("Meals", 1)
    d.add_paragraph("Meal receipts above 25 EUR must show the names of all attendees.")
    d.add_paragraph("Alcohol is never reimbursed.", style="List Bullet")
    d.add_paragraph("Tips are reimbursed up to 10 percent.", style="List Bullet")
    d.save(OUT / "travel_policy.docx")


def make_pptx() -> None:
    from pptx import Presentation
    from pptx.util import Inches

    p = Presentation()
    s = p.slides.add_slide(p.slide_layouts[0])
    s.shapes.title.text = "Quarterly Service Review"
    s.placeholders[1].text = "Wind farm maintenance, third quarter"
    s = p.slides.add_slide(p.slide_layouts[1])
    s.shapes.title.text = "Availability"
    s.placeholders[1].text = (
        "Fleet availability reached 97.4 percent in the third quarter.\n"
        "Unplanned downtime fell by 12 hours compared with the second quarter."
    )
    s = p.slides.add_slide(p.slide_layouts[5])
    s.shapes.title.text = "Open Work Orders"
    rows = [("Site", "Open orders", "Oldest (days)"), ("Kestrel Ridge", "14", "41"), ("Harbour Point", "6", "9")]
    table = s.shapes.add_table(3, 3, Inches(1), Inches(2), Inches(8), Inches(1.5)).table
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    p.save(OUT / "service_review.pptx")


def make_xlsx() -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Warranty"
    ws.append(["Component", "Supplier", "Warranty (years)", "Annual failure rate"])
    for row in [
        ("Gearbox", "Hansen Drives", 5, "1.2%"),
        ("Generator", "Volta Machines", 7, "0.6%"),
        ("Blade bearing", "Rotek", 10, "0.3%"),
        ("Yaw motor", "Bonfiglio", 3, "2.1%"),
    ]:
        ws.append(row)
    wb.save(OUT / "component_warranty.xlsx")


def make_html() -> None:
    (OUT / "onboarding.html").write_text(
        """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>New Starter Onboarding</title></head>
<body>
<h1>New Starter Onboarding</h1>
<p>Welcome to Northwind. Your first week follows the plan below.</p>
<h2>Day One</h2>
<p>Collect your badge from reception on the ground floor before 9:30. IT hands out laptops
in room 2.14 after the security briefing.</p>
<h2>Accounts</h2>
<ul>
<li>Email and calendar are active from your first morning.</li>
<li>VPN access needs a manager's approval ticket.</li>
</ul>
<h2>Contacts</h2>
<table>
<tr><th>Topic</th><th>Team</th><th>Extension</th></tr>
<tr><td>Payroll</td><td>People Services</td><td>4410</td></tr>
<tr><td>Laptop problems</td><td>IT Service Desk</td><td>4000</td></tr>
</table>
</body></html>
""",
        encoding="utf-8",
    )


def make_md() -> None:
    (OUT / "release_notes.md").write_text(
        "# Release Notes\n\n## Version 2.3\n\nThe vibration sensor firmware now reports in "
        "millimetres per second. Calibration drift alarms fire after three consecutive "
        "out-of-range readings.\n\n## Version 2.2\n\nAdded support for the Modbus TCP gateway.\n",
        encoding="utf-8",
    )


def make_change_management_zh() -> None:
    (BILINGUAL / "change_management_zh.md").write_text(
        "# 运维变更管理规范\n\n"
        "## 变更窗口\n\n"
        "固定变更窗口为每周四凌晨一点至五点。窗口之外的普通变更一律顺延到下一个窗口。"
        "节假日前一天不安排任何变更。\n\n"
        "## 紧急变更\n\n"
        "紧急变更须由值班经理电话批准，并在二十四小时内补录变更单。"
        "涉及核心数据库的紧急变更还需要数据库负责人在场。\n\n"
        "## 审批流程\n\n"
        "普通变更至少提前三个工作日提交变更单，由变更评审委员会在每周二的例会上审批。"
        "变更单必须写明回滚方案和影响范围。\n\n"
        "## 回滚\n\n"
        "变更后三十分钟内监控指标异常的，执行人必须立即回滚，不得尝试现场修复。"
        "回滚完成后由执行人撰写事故复盘报告。\n\n"
        "## 通知\n\n"
        "变更开始前一小时，通过运维群和邮件通知受影响的业务方。\n",
        encoding="utf-8",
    )


def make_expense_rules_zh() -> None:
    import docx

    d = docx.Document()
    d.add_heading("差旅报销细则", 0)
    d.add_heading("报销时限", 1)
    d.add_paragraph("出差结束后十五个自然日内提交报销单，逾期不予报销。")
    d.add_heading("交通", 1)
    d.add_paragraph("高铁二等座为默认标准；单程超过六小时可乘坐飞机经济舱。出租车费用需附行程单。")
    d.add_heading("住宿标准", 1)
    d.add_paragraph("每晚住宿费用按城市分级报销：")
    t = d.add_table(rows=1, cols=3)
    t.style = "Table Grid"
    for cell, text in zip(t.rows[0].cells, ["城市", "每晚上限", "币种"]):
        cell.text = text
    for row in [
        ("北京、上海", "600", "人民币"),
        ("其他省会城市", "450", "人民币"),
        ("其他城市", "350", "人民币"),
    ]:
        cells = t.add_row().cells
        for cell, text in zip(cells, row):
            cell.text = text
    d.add_heading("餐补", 1)
    d.add_paragraph("每天餐补一百元，按出差天数发放，无需发票。")
    d.save(BILINGUAL / "expense_rules_zh.docx")


def make_warehouse_handbook() -> None:
    (BILINGUAL / "warehouse_handbook.html").write_text(
        """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Rotterdam Warehouse Handbook 鹿特丹仓库手册</title></head>
<body>
<h1>Rotterdam Warehouse Handbook 鹿特丹仓库手册</h1>
<h2>Opening Hours</h2>
<p>The warehouse is open from 07:00 to 19:00 on weekdays. Weekend pick-ups must be booked a
day ahead with the duty clerk.</p>
<h2>开放时间</h2>
<p>仓库工作日早上七点到晚上七点开放。周末提货须提前一天向值班文员预约。</p>
<h2>Forklift Licences</h2>
<p>Only staff holding a valid forklift licence may drive in aisle C. Licences are renewed every
three years at the Delft training centre.</p>
<h2>叉车证</h2>
<p>只有持有有效叉车证的员工才能在C通道驾驶叉车。叉车证每三年在代尔夫特培训中心更新一次。</p>
<h2>Hazardous Goods 危险品</h2>
<p>Lithium batteries are stored in the fire-proof cage next to gate 4.
锂电池存放在4号门旁边的防火笼内，每周一由安全员检查。</p>
<h2>東京からの出荷</h2>
<p>東京からの出荷は毎週月曜日に倉庫で検品されます。破損した箱は写真を撮ってから返送してください。</p>
</body></html>
""",
        encoding="utf-8",
    )


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    make_pdf()
    make_scan()
    make_docx()
    make_pptx()
    make_xlsx()
    make_html()
    make_md()
    print("wrote", sorted(p.name for p in OUT.iterdir()))
    BILINGUAL.mkdir(parents=True, exist_ok=True)
    make_change_management_zh()
    make_expense_rules_zh()
    make_warehouse_handbook()
    print("wrote", sorted(p.name for p in BILINGUAL.iterdir()))
