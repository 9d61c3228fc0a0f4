"""The chunker's tokenizer: tokenizers' fast path gives what AutoTokenizer gives, falls
back to transformers when it could not, and chunking never imports transformers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from embedding.presets import _bundled_minilm
from embedding.tokenizer import FastTokenizer, TransformersTokenizer, load_tokenizer
from tests.helpers.scripts import heavy_imports

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples" / "corpus"

TEXTS = [
    "",
    "   ",
    "Hello, world! It's a test . Don't stop ; we're here , aren't we ?",
    "中文文本，没有空格。日本語のテキストです。한국어 텍스트입니다.",
    "Ünïcödé façade naïve — “quotes” ’tis, CAFÉ au lait",
    "[MASK] [CLS] <s> </s> <mask> [UNK]",
    "tab\tand\nnewline  double  space\u00a0nbsp\u200bzero-width",
]


def _texts() -> list[str]:
    out = list(TEXTS)
    for path in sorted(SAMPLES.glob("*.md")) + sorted(SAMPLES.glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        out += [text[i : i + 2000] for i in range(0, len(text), 2000)]
    return out


def _assert_same_as_transformers(path: Path) -> None:
    from transformers import AutoTokenizer

    ours = load_tokenizer(path)
    ref = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    for text in _texts():
        ids = ref.encode(text, add_special_tokens=False)
        assert ours.encode(text) == ids, text[:60]
        assert ours.encode(text, add_special_tokens=True) == ref.encode(text), text[:60]
        offsets = ref(text, add_special_tokens=False, return_offsets_mapping=True)
        assert ours.offsets(text) == [tuple(o) for o in offsets["offset_mapping"]], text[:60]
        assert len(ours.encode(text)) == len(ref.tokenize(text))
        for cut in (ids[:7], ids[3:40]):
            assert ours.decode(cut) == ref.decode(cut, skip_special_tokens=True), text[:60]


def test_fast_path_matches_transformers_for_the_bundled_minilm() -> None:
    assert isinstance(load_tokenizer(_bundled_minilm()), FastTokenizer)
    _assert_same_as_transformers(_bundled_minilm())


def test_fast_path_matches_transformers_for_a_bge_m3_shaped_model(tiny_bgem3: Path) -> None:
    assert isinstance(load_tokenizer(tiny_bgem3), FastTokenizer)
    _assert_same_as_transformers(tiny_bgem3)


def _minilm_with(tmp_path: Path, **config: object) -> Path:
    """A copy of the bundled MiniLM whose tokenizer_config.json says ``config``."""
    model = tmp_path / "minilm"
    shutil.copytree(_bundled_minilm(), model)
    path = model / "tokenizer_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return model


def test_decode_cleans_up_spaces_when_the_config_says_so(tmp_path: Path) -> None:
    model = _minilm_with(tmp_path, clean_up_tokenization_spaces=True)
    tok = load_tokenizer(model)
    assert isinstance(tok, FastTokenizer)
    assert tok.decode(tok.encode("it's done , isn't it ?")) == "it's done, isn't it?"
    _assert_same_as_transformers(model)


def test_a_tokenizer_transformers_would_change_loads_through_transformers(
    tmp_path: Path,
) -> None:
    # A BERT config asking for cased text over a lower-casing tokenizer.json: transformers
    # rebuilds the normaliser, so the fast path would count different tokens.
    model = _minilm_with(tmp_path, do_lower_case=False)
    tok = load_tokenizer(model)
    assert isinstance(tok, TransformersTokenizer)
    assert tok.encode("Hello") != load_tokenizer(_bundled_minilm()).encode("Hello")
    _assert_same_as_transformers(model)


def test_chunking_a_document_imports_neither_transformers_nor_torch(tmp_path: Path) -> None:
    # As a refresh does it: parsed in a parser child, chunked in this process.
    source = f"""
from common.settings import ChunkSettings, EmbedSettings, ParseSettings
from embedding import load_embedder
from chunking.structure import chunk_document
from parsers import ParserPool

def main():
    with ParserPool(ParseSettings(workers=1)) as pool:
        parsed = pool.parse({str(SAMPLES / "release_notes.md")!r})
    tok = load_embedder(EmbedSettings()).tokenizer()
    chunks = chunk_document(parsed, "d", tok, 64, ChunkSettings()).children
    assert len(chunks) >= 2, len(chunks)
"""
    assert heavy_imports(source, tmp_path, timeout=300) == []


@pytest.mark.parametrize("strategy", ["structure", "fixed"])
def test_chunks_are_the_same_with_either_tokenizer(strategy: str, tmp_path: Path) -> None:
    from chunking.structure import chunk_document
    from common.settings import ChunkSettings
    from parsers.registry import parse_file

    parsed = parse_file(SAMPLES / "release_notes.md")
    fast = load_tokenizer(_bundled_minilm())
    slow = TransformersTokenizer(_bundled_minilm())
    settings = ChunkSettings(strategy=strategy)  # type: ignore[arg-type]
    a = chunk_document(parsed, "d", fast, 48, settings)
    b = chunk_document(parsed, "d", slow, 48, settings)
    assert len(a.children) >= 2
    assert a == b


def test_threads_importing_the_chunker_at_once_all_get_it_whole(tmp_path: Path) -> None:
    """The first documents of a run are chunked on several threads at once, each importing
    docling-core's chunker through ``import_without``: a thread arriving while another is
    still executing the module must wait for it, not get the half-initialised module
    (which failed 18 of 100 documents of a Prefect flow run started without the CLI's
    warm-up, as a served deployment starts it)."""
    source = """
import threading, time
from chunking.docling_chunker import chunker_module

errors = []

def use():
    try:
        chunker_module().HybridChunker
    except Exception as exc:
        errors.append(repr(exc))

def main():
    threads = []
    for _ in range(150):  # one thread every 20 ms while the first imports (~1-3 s)
        threads.append(threading.Thread(target=use))
        threads[-1].start()
        time.sleep(0.02)
    for t in threads:
        t.join()
    assert not errors, errors[:3]
"""
    assert "transformers" not in heavy_imports(source, tmp_path, timeout=300)


def test_import_without_blocks_only_its_thread_and_leaves_the_finder_list_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """importlib walks ``sys.meta_path`` while other threads import: a finder put on and
    taken off for each ``import_without`` made a concurrent import skip one, and a run's
    first document failed with ``No module named 'langdetect.detector_factory'``."""
    import sys
    import threading

    from common.imports import import_without

    (tmp_path / "cf_optional_pkg.py").write_text("VALUE = 1\n")
    (tmp_path / "cf_probe_mod.py").write_text(
        "import sys, threading\n"
        "SEEN = list(sys.meta_path)\n"
        "try:\n    import cf_optional_pkg\n    HAS = True\nexcept ImportError:\n    HAS = False\n"
        "OTHER = []\n"
        "def other():\n"
        "    import cf_optional_pkg\n"
        "    OTHER.append(cf_optional_pkg.VALUE)\n"
        "t = threading.Thread(target=other)\nt.start()\nt.join()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    before = list(sys.meta_path)
    try:
        probe = import_without("cf_probe_mod", "cf_optional_pkg")
        assert before == probe.SEEN  # nothing put on or taken off during the import
        assert sys.meta_path == before
        assert probe.HAS is False  # blocked for the importing thread
        assert probe.OTHER == [1]  # another thread, during the same import, is not blocked
        assert threading.current_thread() is threading.main_thread()
        import cf_optional_pkg  # type: ignore[import-not-found]

        assert cf_optional_pkg.VALUE == 1  # and the block ends with the import
    finally:
        for name in ("cf_probe_mod", "cf_optional_pkg"):
            sys.modules.pop(name, None)
