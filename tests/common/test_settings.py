from pathlib import Path

import pytest
from pydantic import ValidationError

from common.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def _no_model_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the settings' own defaults and precedence: without the
    suite's MiniLM pin (conftest)."""
    monkeypatch.delenv("CORPUSFLOW_EMBED__MODEL", raising=False)


def test_defaults_are_offline_and_local() -> None:
    s = load_settings()
    assert s.embed.model is None  # the active table's model, else the default use-m3
    assert s.storage.db == ".corpusflow/db"
    assert s.storage.collection == "default"


def test_precedence_override_env_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[embed]\nbatch_size = 7\nmodel = "bge-m3"\n[storage]\ndb = "/from/toml"\n')
    monkeypatch.setenv("CORPUSFLOW_EMBED__BATCH_SIZE", "9")
    s = load_settings(cfg, {"storage": {"db": "/from/flag"}})
    assert s.embed.batch_size == 9  # env beats TOML
    assert s.embed.model == "bge-m3"  # TOML beats default
    assert s.storage.db == "/from/flag"  # explicit override beats all


def test_unknown_keys_and_bad_values_are_rejected(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[embed]\nbatchsize = 7\n")
    with pytest.raises(ValidationError):
        load_settings(cfg)
    with pytest.raises(ValidationError):
        Settings.model_validate({"parse": {"workers": 0}})


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_settings(tmp_path / "nope.toml")


def test_settings_round_trip_json() -> None:
    s = load_settings(None, {"chunk": {"max_tokens": 128}})
    assert Settings.model_validate_json(s.model_dump_json()) == s


def test_configuration_reference_is_up_to_date() -> None:
    from corpusflow.config_doc import render

    doc = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert doc.read_text() == render(), (
        "run: python -m corpusflow.config_doc > docs/configuration.md"
    )
