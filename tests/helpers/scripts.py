"""Run a snippet in a fresh Python process and see which heavy libraries it imported."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "sentence_transformers", "sklearn", "docling")


def heavy_imports(source: str, tmp_path: Path, timeout: float = 600) -> list[str]:
    """Run ``source`` (which defines ``main()``) as a script with the repository on its
    path, under ``if __name__ == "__main__"`` as spawned parser children need; the heavy
    libraries loaded in that process when ``main()`` returned."""
    footer = f"""
if __name__ == "__main__":
    import sys as _sys

    main()
    print(sorted(m for m in {HEAVY!r} if m in _sys.modules))
"""
    script = tmp_path / "heavy_imports_check.py"
    script.write_text(source + footer)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return list(ast.literal_eval(out.stdout.strip().splitlines()[-1]))
