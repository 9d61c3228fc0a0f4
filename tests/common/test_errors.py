"""Terminal and transient failures are exception types, decided by one table (common.errors.RETRY)."""

from __future__ import annotations

import pickle

import pytest

from common.errors import (
    RETRY,
    Category,
    DocumentError,
    Retry,
    TerminalError,
    TransientError,
    is_transient,
)
from embedding.base import EmbeddingError
from parsers.errors import ParseError


def test_every_category_has_one_retry_rule() -> None:
    assert set(RETRY) == set(Category)


@pytest.mark.parametrize("category", list(Category))
def test_the_table_decides_the_type(category: Category) -> None:
    err = ParseError(category, "boom")
    assert isinstance(err, ParseError) and isinstance(err, DocumentError)
    assert type(err).__name__ == "ParseError"
    assert isinstance(err, TerminalError) == (RETRY[category] is Retry.NEVER) == err.terminal
    assert isinstance(err, TransientError) == (RETRY[category] is Retry.NOW) == is_transient(err)
    # It survives the trip to and from a parser child or a Prefect worker, typed again.
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and back.category is category and back.message == "boom"


def test_except_clauses_catch_by_kind() -> None:
    with pytest.raises(TerminalError):
        raise ParseError("encrypted", "password protected")
    with pytest.raises(TransientError):
        raise DocumentError(Category.CRASHED, "parser child died")
    timed_out = DocumentError("timeout", "slow")
    assert not isinstance(timed_out, TerminalError | TransientError)
    assert timed_out.retry is Retry.NEXT_RUN


def test_an_embedding_error_is_left_to_the_next_run() -> None:
    err = EmbeddingError("encoder failed")
    assert err.category is Category.EMBEDDING and err.retry is Retry.NEXT_RUN
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is EmbeddingError and back.message == "encoder failed"


def test_an_unknown_category_is_refused() -> None:
    with pytest.raises(ValueError):
        DocumentError("sad", "nope")
