"""Generate a synthetic corpus of N documents (PDF-heavy) for refresh-cost benchmarks.

PDFs are written directly (text layer, Helvetica, headings set larger), DOCX with
python-docx, HTML and Markdown as text. Content is deterministic per index.
"""

from __future__ import annotations

import random
from pathlib import Path

WORDS = [
    "turbine",
    "gearbox",
    "bearing",
    "inspection",
    "maintenance",
    "schedule",
    "torque",
    "sensor",
    "vibration",
    "blade",
    "pitch",
    "yaw",
    "generator",
    "converter",
    "transformer",
    "cable",
    "substation",
    "alarm",
    "threshold",
    "report",
    "technician",
    "safety",
    "procedure",
    "checklist",
    "warranty",
    "supplier",
    "invoice",
    "budget",
    "forecast",
    "quarter",
    "availability",
    "downtime",
    "repair",
    "spare",
    "logistics",
    "depot",
    "courier",
    "calibration",
    "firmware",
    "network",
]


def _sentences(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        out.append(" ".join(words).capitalize() + ".")
    return out


def _pdf(path: Path, title: str, sections: list[tuple[str, list[str]]]) -> None:
    from tests.helpers.pdfgen import write_pdf

    lines: list[tuple[int, str]] = [(18, title)]
    for heading, paras in sections:
        lines.append((14, heading))
        for para in paras:
            words = para.split()
            for i in range(0, len(words), 12):
                lines.append((10, " ".join(words[i : i + 12])))
    write_pdf(path, [lines])


def _docx(path: Path, title: str, sections: list[tuple[str, list[str]]]) -> None:
    import docx

    d = docx.Document()
    d.add_heading(title, 0)
    for heading, paras in sections:
        d.add_heading(heading, 1)
        for para in paras:
            d.add_paragraph(para)
    d.save(str(path))


def _html(path: Path, title: str, sections: list[tuple[str, list[str]]]) -> None:
    body = "".join(f"<h2>{h}</h2>" + "".join(f"<p>{p}</p>" for p in ps) for h, ps in sections)
    path.write_text(
        f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"
    )


def _md(path: Path, title: str, sections: list[tuple[str, list[str]]]) -> None:
    path.write_text(
        f"# {title}\n\n" + "".join(f"## {h}\n\n" + "\n\n".join(ps) + "\n\n" for h, ps in sections)
    )


def document(path: Path, index: int, revision: int = 0) -> None:
    rng = random.Random(index * 1000 + revision)
    title = f"Report {index} {rng.choice(WORDS)} {rng.choice(WORDS)}"
    sections = [
        (
            f"{s + 1}. {rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}",
            [" ".join(_sentences(rng, 3)) for _ in range(2)],
        )
        for s in range(3)
    ]
    {".pdf": _pdf, ".docx": _docx, ".html": _html, ".md": _md}[path.suffix](path, title, sections)


def generate(root: Path, n: int) -> list[Path]:
    """n documents: 60% PDF, 20% DOCX, 10% HTML, 10% Markdown."""
    root.mkdir(parents=True, exist_ok=True)
    kinds = [".pdf"] * 6 + [".docx"] * 2 + [".html", ".md"]
    paths = []
    for i in range(n):
        path = root / f"d{i // 100:02d}" / f"doc{i:05d}{kinds[i % 10]}"
        path.parent.mkdir(exist_ok=True)
        document(path, i)
        paths.append(path)
    return paths
