"""The package dependency rule (docs/architecture.md): ground <- stages <- engine <- faces.

scripts/import_graph.py reads every import with ast (lazy and TYPE_CHECKING ones too);
this runs it on the real tree, and on a small tree that breaks the rule both ways, so a
checker that stopped seeing imports would fail here instead of passing silently.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "import_graph.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def test_the_real_tree_keeps_the_dependency_rule() -> None:
    done = _run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no upward import, no import circle" in done.stdout
    count = int(re.search(r"(\d+) modules", done.stdout).group(1))  # type: ignore[union-attr]
    assert count > 80  # the whole tree was read, not an empty folder


def test_a_lazy_upward_import_and_a_circle_are_both_reported(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "__init__.py").write_text("")
    (tmp_path / "storage").mkdir()
    # An upward import hidden inside a function still counts.
    (tmp_path / "storage" / "__init__.py").write_text(
        "import common\n\ndef later():\n    from corpusflow import engine\n    return engine\n"
    )
    (tmp_path / "corpusflow").mkdir()
    (tmp_path / "corpusflow" / "__init__.py").write_text("")
    (tmp_path / "corpusflow" / "engine.py").write_text("import storage\n")
    done = _run("--root", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "upward import: storage -> corpusflow.engine" in done.stdout
    assert "import circle of 2 modules: corpusflow.engine, storage" in done.stdout
