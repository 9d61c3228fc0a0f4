"""Language of a piece of text: small, offline, deterministic.

Scripts decide first (they are unambiguous and cheap): kana means Japanese (from a
fifth of the CJK characters),
Hangul Korean, and Han characters without either Chinese, when they make up at
least ``CJK_SHARE`` of the letters; a Chinese passage that quotes English terms
("RMA 编号", "Modbus TCP 网关") is still Chinese. Other text goes to langdetect
(1.0.9, 55 languages) with its own seeded factory, so the same text always gets
the same code. But langdetect answers with certainty on text that has no language
in it: a table row "2019, Freshwater Ducks = 120" is German to it, "Kestrel Ridge,
Open orders = 14" Dutch, "Hotel Limits" Estonian, each at probability 1.0. So for
Latin-script text its answer counts only with evidence: at least
``MIN_FUNCTION_WORDS`` of that language's function words (articles, prepositions,
pronouns: what prose has and a table, a name or a heading has not), for the
languages with a list below; for others, a long text. Text without evidence says
nothing about its language.

``detect_languages`` tags one document's chunks: the document's language by
default (found on its prose, or ``FALLBACK`` when nothing in it is evidence: a
spreadsheet of names and numbers), and a chunk differs only when its script
says so or its own words are evidence of another language. Tables, numbers,
headings and short chunks inherit. Codes are ISO 639-1 without region (``zh-cn``
and ``zh-tw`` are both ``zh``); text with no letters is ``und``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

UNDETERMINED = "und"
CJK_SHARE = 0.2  # share of letters in CJK scripts from which the script decides
KANA_SHARE = 0.2  # share of the CJK characters in kana from which text is Japanese
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

# Latin-script text without evidence of any language: the corpora this product serves
# are Chinese and English above all, and a table of English headers is the common case.
FALLBACK = "en"
MIN_FUNCTION_WORDS = 2
# Letters from which a Latin-script text in a language without a list below is taken
# on langdetect's word alone.
LONG_TEXT = 200
# Function words, lower case: frequent in any prose of the language, rare as table cells.
_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in {
        "en": "the of and to in is are was for with that this from by on be or an it as not "
        "which at have has will can should must",
        "de": "der die das und ist nicht mit von zu den dem des ein eine einer auf für sich "
        "auch wird werden sind im nach bei",
        "fr": "le la les et est des du une un dans pour que qui sur par pas avec au aux "
        "sont ce cette être",
        "es": "el la los las y es de del en un una que por para con no se al como más son está",
        "it": "il la le gli e è di del della che per con non un una sono nel alla come anche",
        "pt": "o a os as e é de do da em um uma que para com não se por no na são mais",
        "nl": "de het een en is van in op te dat die niet met voor zijn ook er aan wordt "
        "worden bij",
        "sv": "och att det som en på är av för med till den har inte om ett de",
        "da": "og at det som en på er af for med til den har ikke om et de",
        "no": "og at det som en på er av for med til den har ikke om et de",
        "pl": "i w na z że się do nie to jest o jak po od przez dla",
        "id": "dan yang di ke dari untuk dengan ini itu adalah dalam tidak pada akan",
    }.items()
}
# What is not language: URLs, Markdown link targets, code (fenced blocks, inline spans).
_NOT_LANGUAGE = re.compile(
    r"```.*?(?:```|\Z)|`[^`\n]*`|\]\([^)\s]*\)|(?:https?://|www\.)\S+", re.DOTALL
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_TRIPLET = re.compile(r"\S = \S")

_lock = threading.Lock()
_factory: Any = None


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any Chinese, Japanese or Korean character."""
    return _CJK.search(text) is not None


_CJK_RUN = re.compile(_CJK.pattern + "+")


def cjk_runs(text: str) -> str:
    """The runs of Chinese, Japanese and Korean characters of ``text``, space-separated:
    what the CJK bigram index holds of a chunk and is asked of a query."""
    return " ".join(_CJK_RUN.findall(text))


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
    """The language of each chunk of one document (in order): the document's, unless a
    chunk's script or its own words say otherwise."""
    tables = [_is_table(t) for t in texts]
    prose = [t for t, table in zip(texts, tables, strict=True) if not table]
    document = detect_language("\n".join(prose or texts)[:20000], fallback=FALLBACK)
    out = []
    for text, table in zip(map(_language_text, texts), tables, strict=True):
        letters = sum(1 for ch in text if ch.isalpha())
        script = _by_script(text, letters)
        if script == "zh" and document in ("ja", "ko") and (letters < MIN_LETTERS or table):
            # A few Han characters without kana or Hangul (names, a table of them) are
            # as much Japanese (or Korean hanja) as Chinese: the document decides. Han
            # prose without a single kana is Chinese.
            out.append(document)
        elif script:
            out.append(script)
        elif letters < MIN_LETTERS or table:
            out.append(document)
        else:
            # Latin prose in a CJK document: its own language (English without evidence);
            # in any other document: the document's unless the words say otherwise.
            fallback = FALLBACK if document in ("zh", "ja", "ko") else document
            out.append(_langdetect(text, letters, fallback))
    return out


def _language_text(text: str) -> str:
    """``text`` without what carries no language (URLs, link targets, code)."""
    return _NOT_LANGUAGE.sub(" ", text)


def _is_table(text: str) -> bool:
    """A linearised table (``row, column = value`` triplets) rather than prose."""
    return len(_TRIPLET.findall(text)) >= 2


def _by_script(text: str, letters: int) -> str | None:
    if letters == 0:
        return None
    han = len(_HAN.findall(text))
    kana = len(_KANA.findall(text))
    hangul = len(_HANGUL.findall(text))
    if (han + kana + hangul) / letters < CJK_SHARE:
        return None
    # Japanese prose is a third or more kana; a Chinese text that names "日本語のREADME"
    # in a list of languages is not Japanese.
    if kana >= KANA_SHARE * (han + kana + hangul):
        return "ja"
    return "ko" if hangul > han else "zh"


def detect_language(text: str, fallback: str = FALLBACK) -> str:
    """ISO 639-1 code of the main language of ``text``: ``und`` when it has no letters,
    ``fallback`` when its words are no evidence of any language."""
    text = _language_text(text)
    letters = sum(1 for ch in text if ch.isalpha())
    if letters == 0:
        return UNDETERMINED
    return _by_script(text, letters) or _langdetect(text, letters, fallback)


def _langdetect(text: str, letters: int, fallback: str) -> str:
    """langdetect's answer for ``text`` (already without URLs and code, not in a CJK
    script), if its words bear it out; else ``fallback``."""
    from langdetect.lang_detect_exception import LangDetectException

    detector = _detector_factory().create()
    detector.n_trial = TRIALS
    detector.append(text[:2000])
    try:
        code = str(detector.detect())
    except LangDetectException:
        return fallback
    code = code.split("-")[0] if code != "unknown" else UNDETERMINED
    return code if _evidence(text, code, letters) else fallback


def _evidence(text: str, code: str, letters: int) -> bool:
    """Whether ``text``'s own words bear out langdetect's ``code``."""
    if code == UNDETERMINED:
        return False
    words = _FUNCTION_WORDS.get(code)
    if words is None:
        # No list: a non-Latin script (Cyrillic, Greek, Arabic, Thai...) is evidence
        # in itself; Latin text needs length.
        latin = sum(1 for ch in text if ch.isascii() and ch.isalpha())
        return latin < letters / 2 or letters >= LONG_TEXT
    found = sum(1 for w in _WORD.findall(text[:4000].lower()) if w in words)
    return found >= MIN_FUNCTION_WORDS
