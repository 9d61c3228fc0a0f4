"""Language of a piece of text: small, offline, deterministic.

Scripts decide first (they are unambiguous and cheap): kana means Japanese,
Hangul Korean, and Han characters without either Chinese, when they make up at
least ``CJK_SHARE`` of the letters; a Chinese passage that quotes English terms
("RMA 编号", "Modbus TCP 网关") is still Chinese. Everything else goes to
langdetect (1.0.9, 55 languages) with its own seeded factory, so the same text
always gets the same code. Short text (a table row, a heading: fewer than
``MIN_LETTERS`` letters) is guessed badly by character statistics ("Hotel
Limits" reads as Estonian), so ``detect_languages`` gives such a chunk the
language of its document instead. Codes are ISO 639-1 without region (``zh-cn`` and
``zh-tw`` are both ``zh``); text with no letters, or that langdetect cannot
place, is ``und``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

UNDETERMINED = "und"
CJK_SHARE = 0.2  # share of letters in CJK scripts from which the script decides
MIN_LETTERS = 40  # below this many letters, a chunk takes its document's language
# langdetect averages 7 random walks over a text's n-grams by default. Three agree
# with seven on 170 of 171 Latin-script chunks of the shared corpus and samples (the
# one differing is a list of "List item4"-style stubs) at 0.6x the time; it is the
# largest cost of chunking a table (~20 ms a chunk of triplets with seven).
TRIALS = 3

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_CJK = re.compile(
    r"[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)

_lock = threading.Lock()
_factory: Any = None


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any Chinese, Japanese or Korean character."""
    return _CJK.search(text) is not None


def _detector_factory() -> Any:
    global _factory
    with _lock:
        if _factory is None:
            from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

            factory = DetectorFactory()
            factory.load_profile(PROFILES_DIRECTORY)
            factory.set_seed(0)  # langdetect samples n-grams at random: fix the draw
            _factory = factory
        return _factory


def detect_languages(texts: Sequence[str]) -> list[str]:
    """The language of each chunk of one document (in order).

    A chunk too short to judge (and not in a CJK script) takes the language of the
    whole document."""
    document = detect_language("\n".join(texts)[:20000])
    out = []
    for text in texts:
        letters = sum(1 for ch in text if ch.isalpha())
        script = _by_script(text, letters)
        if script:
            out.append(script)
        elif letters < MIN_LETTERS:
            out.append(document)
        else:
            out.append(detect_language(text))
    return out


def _by_script(text: str, letters: int) -> str | None:
    if letters == 0:
        return None
    han = len(_HAN.findall(text))
    kana = len(_KANA.findall(text))
    hangul = len(_HANGUL.findall(text))
    if (han + kana + hangul) / letters < CJK_SHARE:
        return None
    if kana:
        return "ja"
    return "ko" if hangul > han else "zh"


def detect_language(text: str) -> str:
    """ISO 639-1 code of the main language of ``text`` (``und`` when unknown)."""
    letters = sum(1 for ch in text if ch.isalpha())
    if letters == 0:
        return UNDETERMINED
    script = _by_script(text, letters)
    if script:
        return script
    from langdetect.lang_detect_exception import LangDetectException

    detector = _detector_factory().create()
    detector.n_trial = TRIALS
    detector.append(text[:2000])
    try:
        code = str(detector.detect())
    except LangDetectException:
        return UNDETERMINED
    return code.split("-")[0] if code != "unknown" else UNDETERMINED
