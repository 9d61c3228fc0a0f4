"""Keyword-query normalisation variants for bench/keyword_variants.py (issue #31)."""

from __future__ import annotations

import re
import unicodedata

# Interrogatives and sentence-final particles: words a question has and its answer does
# not, longest first so that 为什么 goes before 什么.
_ZH = [
    "为什么",
    "为何",
    "怎么样",
    "怎么办",
    "怎么",
    "怎样",
    "如何",
    "什么",
    "哪些",
    "哪个",
    "哪里",
    "哪儿",
    "哪",
    "谁",
    "是否",
    "有没有",
    "是不是",
    "多少",
    "多久",
    "几个",
    "几",
    "吗",
    "呢",
    "吧",
    "请问",
]
_JA = [
    "でしょうか",
    "ですか",
    "ますか",
    "でしょう",
    "どうやって",
    "どうすれば",
    "どうして",
    "どのように",
    "どのくらい",
    "どれくらい",
    "どんな",
    "どの",
    "どれ",
    "どこ",
    "どちら",
    "いつ",
    "いくつ",
    "いくら",
    "なぜ",
    "何",
    "誰",
    "だれ",
]
_KO_WORDS = frozenset(
    [
        "무엇",
        "무엇인가요",
        "무엇입니까",
        "무엇인가",
        "뭐",
        "뭔가요",
        "뭐예요",
        "어떤",
        "어떻게",
        "어떠한",
        "어느",
        "왜",
        "언제",
        "어디",
        "어디서",
        "어디에",
        "누가",
        "누구",
        "누구인가요",
        "몇",
        "얼마",
        "얼마나",
        "얼마인가요",
    ]
)
# A Korean word ending like this is an interrogative verb form ("있나요", "되나요").
_KO_ENDINGS = ("나요", "니까", "까요", "인가요", "한가요")
_EN = frozenset(
    [
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "does",
        "do",
        "did",
        "can",
        "could",
        "should",
        "would",
        "is",
        "are",
        "was",
        "were",
        "i",
        "me",
        "my",
        "you",
        "your",
        "we",
        "our",
        "much",
    ]
)
_PUNCT = re.compile(r"[^\w\s]+", re.UNICODE)
_HIRA = "\u3040-\u309f"
_JA_ENDINGS = frozenset(["でしょうか", "ですか", "ますか", "でしょう"])
# A hiragana question word counts only at a word start: after a non-hiragana character,
# or after one particle that follows one ("はどの"), not inside a word ("たどれる").
_JA_START = f"(?:(?<![{_HIRA}])|(?<=[^{_HIRA}][はがをにでともへの]))"
_CJK_WORDS = re.compile(
    "|".join(
        (_JA_START + re.escape(w))
        if "\u3040" <= w[0] <= "\u309f" and w not in _JA_ENDINGS
        else re.escape(w)
        for w in sorted(_ZH + _JA, key=len, reverse=True)
    )
)
_LATIN_HANGUL = re.compile(r"(?<=[a-z0-9_])(?=[\uac00-\ud7af])")
# Korean case and topic particles, longest first: "컴포넌트를" -> "컴포넌트".
_KO_JOSA = tuple(
    sorted(
        [
            "에서는",
            "에서",
            "으로",
            "에게",
            "까지",
            "부터",
            "처럼",
            "보다",
            "은",
            "는",
            "이",
            "가",
            "을",
            "를",
            "에",
            "의",
            "로",
            "와",
            "과",
            "도",
            "만",
        ],
        key=len,
        reverse=True,
    )
)
# Japanese sentence-final か after a verb/copula is handled by ですか/ますか above.


def fold(query: str) -> str:
    """NFKC (full-width Latin and digits to ASCII, ？ to ?), lower case, punctuation as
    spaces."""
    text = unicodedata.normalize("NFKC", query).lower()
    return " ".join(_PUNCT.sub(" ", text).split())


def strip_question_words(query: str) -> str:
    text = fold(query)
    text = _CJK_WORDS.sub(" ", text)
    out = []
    for word in text.split():
        if word in _EN or word in _KO_WORDS:
            continue
        if any("\uac00" <= ch <= "\ud7af" for ch in word) and word.endswith(_KO_ENDINGS):
            continue
        out.append(word)
    kept = " ".join(out)
    # A question made of nothing but question words keeps its folded form.
    return kept if kept.strip() else fold(query)


def korean(query: str) -> str:
    """strip_question_words, then a space between a Latin word and the Hangul particle
    glued to it ("rag가" -> "rag 가"; the ICU index keeps them one token), and each
    Hangul word with a trailing particle also queried without it ("컴포넌트를" ->
    "컴포넌트를 컴포넌트")."""
    text = _LATIN_HANGUL.sub(" ", strip_question_words(query))
    out = []
    for word in text.split():
        out.append(word)
        if len(word) > 1 and "\uac00" <= word[-1] <= "\ud7af":
            for j in _KO_JOSA:
                if word.endswith(j) and len(word) > len(j) + 1:
                    out.append(word[: -len(j)])
                    break
    return " ".join(out)


def normalize(query: str, level: str) -> str:
    if level == "raw":
        return query
    if level == "fold":
        return fold(query)
    if level == "strip":
        return strip_question_words(query)
    if level == "ko":
        return korean(query)
    raise ValueError(level)
