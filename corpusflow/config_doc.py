"""Render docs/configuration.md from the settings model, so the reference cannot drift."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from common.settings import Settings

HEADER = """# Configuration reference

Generated from `common/settings.py` by `python -m corpusflow.config_doc > docs/configuration.md`
(a test fails when this file is out of date).

Precedence, highest first: command-line flags (`--db`, `--model`, `--collection`), environment
variables, the TOML file given with `--config`, defaults. Environment variables use the prefix
`CORPUSFLOW_` and `__` between levels: `storage.db` is `CORPUSFLOW_STORAGE__DB`; list values
are JSON (`CORPUSFLOW_SOURCE__EXCLUDE='["**/groundtruth/**"]'`). Unknown keys are errors.

Example TOML:

```toml
[source]
exclude = ["**/groundtruth/**"]

[embed]
model = "bge-m3"
batch_size = 16

[storage]
db = "/data/corpusflow"
collection = "handbooks"
```
"""


def _default(field: Any) -> str:
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return ""
    return json.dumps(value)


def render() -> str:
    out = [HEADER]
    for section, sfield in Settings.model_fields.items():
        model = sfield.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        out.append(f"\n## `[{section}]`\n")
        out.append("| key | default | environment variable | meaning |")
        out.append("|---|---|---|---|")
        for name, field in model.model_fields.items():
            env = f"CORPUSFLOW_{section.upper()}__{name.upper()}"
            desc = (field.description or "").replace("|", "\\|")
            annotation = getattr(field.annotation, "__args__", None)
            if annotation and all(isinstance(a, str) for a in annotation):
                desc += " One of: " + ", ".join(f"`{a}`" for a in annotation) + "."
            out.append(f"| `{name}` | `{_default(field)}` | `{env}` | {desc.strip()} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
