"""A generated long Markdown manual (hundreds of chunks) and a one-paragraph edit of it:
the input of the edit-cost test and of bench/edit_cost.py."""

from __future__ import annotations

_TOPICS = (
    "pump",
    "valve",
    "filter",
    "sensor",
    "relay",
    "boiler",
    "chiller",
    "compressor",
    "inverter",
    "gearbox",
)


def paragraph(section: int, n: int, revised: bool = False) -> str:
    topic = _TOPICS[(section + n) % len(_TOPICS)]
    text = (
        f"Step {n} of procedure {section}: inspect the {topic} on line {section}-{n}, record "
        f"the pressure in register {section * 13 + n} and sign the {topic} log sheet."
    )
    if revised:  # one clause rewritten: the paragraph stays one chunk, with new text
        text = text.replace("and sign the", "then torque it to 14 Nm (revised) and sign the")
    return text


def heading(section: int) -> str:
    return f"Procedure {section}: {_TOPICS[section % len(_TOPICS)]} line {section}"


def long_manual(
    sections: int = 64, paragraphs: int = 5, edited: tuple[int, int] | None = None
) -> str:
    """``sections`` x ``paragraphs`` short paragraphs under their own headings; with
    ``edited=(section, paragraph)``, that one paragraph gains a sentence."""
    parts = ["# Plant operations manual"]
    for s in range(sections):
        parts.append(f"## {heading(s)}")
        parts.extend(paragraph(s, p, revised=edited == (s, p)) for p in range(paragraphs))
    return "\n\n".join(parts) + "\n"
