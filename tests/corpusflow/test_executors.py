"""Every executor of a refresh passes the conformance suite (corpusflow.testing.executors)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from common.settings import Settings
from corpusflow.engine import RefreshEngine
from corpusflow.executors import InProcessExecutor
from corpusflow.testing.executors import ExecutorConformance


class TestInProcessExecutor(ExecutorConformance):
    def make_executor(self) -> Any:
        return InProcessExecutor()


class TestPlainThreadPool(ExecutorConformance):
    """A bare concurrent.futures executor is an executor: batches run on its threads too."""

    def make_executor(self) -> Any:
        return ThreadPoolExecutor(max_workers=2)


@pytest.mark.usefixtures("prefect_server")
class TestPrefectExecutor(ExecutorConformance):
    def make_executor(self) -> Any:
        from flows.refresh import PrefectExecutor

        return PrefectExecutor()

    def run(self, engine: RefreshEngine, executor: Any) -> dict[str, Any]:
        from flows.refresh import run_planned

        return run_planned(engine.prepare(), executor, publish=False)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_server")
class TestPrefectDaskExecutor(TestPrefectExecutor):
    """Documents on a LocalCluster of two worker processes, each building its own kit."""

    documents_in_this_process = False

    def settings(self, tmp_path: Path, batch: int = 1, **run: Any) -> Settings:
        return super().settings(tmp_path, batch, task_runner="dask", dask_workers=2, **run)
