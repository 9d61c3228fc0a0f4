"""What invalidates cached work, in one place.

A document's parse is reused while its format's parser fingerprint holds; its chunks
while the chunker's (chunk settings, the tokenizer, and for LLM context the provider,
model and prompt version) holds; its vectors while the model's holds. A terminal
failure is left alone while the judge (``failure_judge``) holds, and a document held by
the retrieval check while ``pipeline_fingerprint`` holds. Every other module asks here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from chunking import chunker_fingerprint
from common.settings import Settings
from embedding import ModelSpec
from parsers import ParserFingerprints, format_reads, parser_fingerprints
from sources.archive import decoder as archive_decoder

if TYPE_CHECKING:
    from corpusflow.evaluate import RetrievalCheck


@dataclass(frozen=True, slots=True)
class Fingerprints:
    parsers: ParserFingerprints  # per format: see ParserFingerprints.of
    chunker: str
    model: str
    max_tokens: int
    table_suffix: str  # names the chunk, parent, staging and ledger tables of this model
    # What judged a terminal failure (see failure_judge): a failed document is left alone
    # until its bytes change only while the judge is the same.
    failures: str = ""

    @classmethod
    def of(cls, settings: Settings, spec: ModelSpec) -> Fingerprints:
        from embedding import tokenizer_fingerprint

        max_tokens = chunk_max_tokens(settings, spec)
        # Chunks depend on the tokenizer, not the weights: an upgrade that keeps the
        # tokenizer (a fine-tuned model) can reuse the active table's chunks.
        identity = tokenizer_fingerprint(spec.tokenizer_path or spec.path)
        if settings.chunk.contextual == "llm":
            from chunking.llm_context import TEMPLATE_VERSION

            identity += (
                f"|llm:{settings.llm.model}:{settings.llm.prompt_version}:{TEMPLATE_VERSION}"
            )
        parsers = parser_fingerprints(settings.parse)
        chunker = chunker_fingerprint(settings.chunk, max_tokens, identity)
        return cls(
            parsers=parsers,
            chunker=chunker,
            model=spec.fingerprint,
            max_tokens=max_tokens,
            table_suffix=spec.table_suffix,
            failures=failure_judge(settings, parsers, chunker),
        )


# Settings that change how a document is read but cannot turn a refusal into text.
_NOT_JUDGING = {"workers", "nice", "artifacts_path"}


def failure_judge(settings: Settings, parsers: ParserFingerprints, chunker: str) -> str:
    """What decided that a document failed for good (unsupported, corrupt, encrypted,
    empty, too large, quarantined): every format's parser, the chunker, and the limits
    that refuse or stop a document. A release that adds a format or fixes a parser, or a
    raised limit, tries each such failure once more; an unchanged judge leaves it alone
    until its bytes change."""
    limits = {
        "parse": settings.parse.model_dump(mode="json", exclude=_NOT_JUDGING),
        "chunk": {"timeout_s": settings.chunk.timeout_s},
        "source": {
            k: v
            for k, v in settings.source.model_dump(mode="json").items()
            if k in ("max_file_size_mb", "expand_archives") or k.startswith("archive_")
        },
        # Archive members in methods zipfile cannot read fail `unsupported` without 7-Zip
        # or unzip: installing one tries them again.
        "archive_decoder": archive_decoder(),
    }
    blob = json.dumps(
        {
            "parsers": sorted(parsers.by_format.items()),
            "reads": sorted(format_reads().items()),
            "chunker": chunker,
            "limits": limits,
        },
        sort_keys=True,
    )
    return "fail:" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def chunk_max_tokens(settings: Settings, spec: ModelSpec) -> int:
    configured = settings.chunk.max_tokens or spec.max_length
    return min(configured, spec.max_length)


def pipeline_fingerprint(fps: Fingerprints) -> str:
    """What turns bytes into chunks: every format's parser, the chunker and the model."""
    blob = {
        "parsers": sorted(fps.parsers.by_format.items()),
        "chunker": fps.chunker,
        "model": fps.model,
    }
    return "pipeline:" + _digest(blob)


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def check_fingerprint(check: RetrievalCheck | None) -> str:
    """The question set's content hash and the check's settings ("" without a check)."""
    if check is None:
        return ""
    try:
        content = hashlib.sha256(Path(check.source).read_bytes()).hexdigest()
    except OSError:  # loaded from elsewhere: its questions stand for the file
        content = _digest([(q.question, q.path, q.contains) for q in check.questions])
    return "check:" + _digest(
        {"questions": content, "margin": check.margin, "mode": check.mode, "k": check.k}
    )
