"""The one retry policy of a refresh: a document's parse+chunk and a batch's embed+commit.

Both are tried ``run.task_retries + 1`` times at most, only on a transient failure
(``common.errors.is_transient``), waiting ``run.retry_delay_s`` x the attempt number
between tries. Whichever executor runs the work applies this policy, and nothing under
it retries the same work again: Prefect's task retries are off (a Prefect task run
shows one attempt that took longer), and the encoder does not retry its calls (a
transient encoder error fails the batch attempt, which this policy retries; the
embedding checkpoint keeps the vectors computed before it). Requests to an LLM context
provider are a different unit (one HTTP call inside a document) with their own
backoff (chunking.llm_context).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_incrementing

from common.errors import is_transient
from common.settings import RunSettings

P = ParamSpec("P")
T = TypeVar("T")


def policy(run: RunSettings) -> Retrying:
    """The policy as a tenacity ``Retrying``: re-raises the last error when it gives up."""
    return Retrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(run.task_retries + 1),
        wait=wait_incrementing(start=run.retry_delay_s, increment=run.retry_delay_s),
        reraise=True,
    )


def call(run: RunSettings, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` under the policy; raises the error that stopped it."""
    return policy(run)(fn, *args, **kwargs)


def outcome(
    run: RunSettings, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T | Exception:
    """``call``, with the error that stopped it returned instead of raised."""
    try:
        return call(run, fn, *args, **kwargs)
    except Exception as exc:
        return exc
