"""The embedding model's tokenizer as chunking uses it, without importing transformers.

Chunking counts tokens with the model's own tokenizer. Through ``AutoTokenizer`` that
costs transformers' import (with torch and scikit-learn, ~10 s of CPU) in every run that
chunks anything, for what ``tokenizers`` does from the model's ``tokenizer.json`` in
0.1 s. ``load_tokenizer`` returns that fast path when it reproduces what AutoTokenizer
would build, and the transformers tokenizer behind the same small interface otherwise:

- the tokenizer class is one whose fast implementation leaves ``tokenizer.json`` as it
  is (BERT, XLM-RoBERTa, the generic fast tokenizer), or BERT's normaliser already
  matches the lower-casing, accent and CJK options of ``tokenizer_config.json``;
- the pre-tokenizer's ``add_prefix_space`` matches the config's (transformers rewrites it);
- every added and special token of the config is already in ``tokenizer.json``;
- truncation and padding are off (transformers turns them off for unpadded encodes).

``decode`` cleans up tokenization spaces exactly when transformers would (the config's
``clean_up_tokenization_spaces``, default off for fast tokenizers).
tests/embedding/test_tokenizer.py checks ids, offsets, token counts and decodes against
AutoTokenizer for the bundled MiniLM and a BGE-M3-shaped model.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

# Fast tokenizer classes whose __init__ changes nothing in tokenizer.json beyond what
# ``_faithful`` checks (BERT's normaliser options, add_prefix_space, added tokens).
_AS_IS = {
    "PreTrainedTokenizerFast",
    "BertTokenizer",
    "BertTokenizerFast",
    "XLMRobertaTokenizer",
    "XLMRobertaTokenizerFast",
}
_BERT = {"BertTokenizer", "BertTokenizerFast"}
_SPECIAL_KEYS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


class Tokenizer(Protocol):
    """What chunking needs from a model's tokenizer (no special tokens anywhere)."""

    name_or_path: str

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]: ...

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of each token of ``text`` in ``text``."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` without special tokens, as transformers' ``decode`` gives it."""
        ...


def _clean_up(text: str) -> str:
    # transformers' PreTrainedTokenizerBase.clean_up_tokenization, same replacements.
    for old, new in (
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ):
        text = text.replace(old, new)
    return text


class FastTokenizer:
    """``tokenizers.Tokenizer`` from ``tokenizer.json``: same ids as AutoTokenizer."""

    def __init__(self, path: Path, clean_up_spaces: bool) -> None:
        from tokenizers import Tokenizer as RustTokenizer

        tok = RustTokenizer.from_file(str(path / "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self._clean_up = clean_up_spaces
        self.name_or_path = str(path)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens).ids)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return [
            (int(a), int(b)) for a, b in self._tok.encode(text, add_special_tokens=False).offsets
        ]

    def decode(self, ids: Sequence[int]) -> str:
        text = self._tok.decode(list(ids), skip_special_tokens=True)
        return _clean_up(text) if self._clean_up else text


class TransformersTokenizer:
    """AutoTokenizer behind the same interface, for tokenizers the fast path cannot copy."""

    def __init__(self, path: Path) -> None:
        from transformers import AutoTokenizer

        self._tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.name_or_path = str(path)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens))

    def offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self._tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(int(a), int(b)) for a, b in enc["offset_mapping"]]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=True))


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _faithful(root: Path, config: Any) -> tuple[bool, str]:
    """Whether tokenizer.json alone gives what AutoTokenizer builds with ``config`` (the
    parsed tokenizer_config.json), and if not why."""
    spec = _read(root / "tokenizer.json")
    if not isinstance(config, dict) or not isinstance(spec, dict):
        return False, "no readable tokenizer.json and tokenizer_config.json"
    cls = str(config.get("tokenizer_class") or "")
    if cls not in _AS_IS:
        return False, f"tokenizer class {cls or '(none)'}"
    if config.get("split_special_tokens"):
        return False, "split_special_tokens"
    if cls in _BERT:
        norm = spec.get("normalizer") or {}
        wanted = {
            "lowercase": config.get("do_lower_case", True),
            "strip_accents": config.get("strip_accents"),
            "handle_chinese_chars": config.get("tokenize_chinese_chars", True),
        }
        if any(norm.get(k, v) != v for k, v in wanted.items()):
            return False, "BERT normaliser options differ from tokenizer_config.json"
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("add_prefix_space", config.get("add_prefix_space", False)) != config.get(
        "add_prefix_space", False
    ):
        return False, "add_prefix_space differs"
    have = {str(t.get("content")) for t in spec.get("added_tokens") or []}
    wanted_tokens = [
        str(t.get("content")) for t in (config.get("added_tokens_decoder") or {}).values()
    ]
    values = [config.get(key) for key in _SPECIAL_KEYS]
    values += list(config.get("additional_special_tokens") or [])
    for value in values:
        wanted_tokens.append(str(value.get("content")) if isinstance(value, dict) else str(value))
    missing = [t for t in wanted_tokens if t not in have and t != "None"]
    if missing:
        return False, f"tokens not in tokenizer.json: {missing[:3]}"
    return True, ""


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer of the model in ``path``: the fast path when it is faithful."""
    root = Path(path)
    config = _read(root / "tokenizer_config.json")
    ok, why = _faithful(root, config)
    if ok:
        return FastTokenizer(root, bool(config.get("clean_up_tokenization_spaces", False)))
    log.debug("tokenizer of %s loads through transformers: %s", root, why)
    return TransformersTokenizer(root)
