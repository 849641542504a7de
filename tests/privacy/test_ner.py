"""Names and addresses through a spaCy model the user installed (here: one the test makes).

The model is a blank English pipeline with an entity ruler, saved to a directory: the
real loading code (``spacy.load`` of a path) runs, and nothing is downloaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from codemode.errors import ConfigError
from codemode.privacy.config import NERConfig, PrivacyConfig
from codemode.privacy.engine import Privacy
from codemode.privacy.vault import Vault

spacy = pytest.importorskip("spacy", reason="the ner extra: pip install 'codemode[ner]'")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns(
        [
            {"label": "PERSON", "pattern": [{"LOWER": "alice"}, {"LOWER": "martin"}]},
            {"label": "GPE", "pattern": "Springfield"},
            {"label": "ORG", "pattern": "Acme"},
        ]
    )
    path = tmp_path_factory.mktemp("model") / "tiny_ner"
    nlp.to_disk(path)
    return path


def test_names_and_places_become_tokens_with_an_installed_model(model: Path) -> None:
    engine = Privacy(PrivacyConfig(enabled=True, ner=NERConfig(model=str(model))), Vault(b"k" * 32))
    out, report = engine.protect(
        {"note": "Alice Martin of Acme moved to Springfield", "mail": "alice@example.com"}
    )
    assert "Alice Martin" not in out["note"] and "Springfield" not in out["note"]
    assert "Acme" in out["note"]  # ORG is not mapped to an entity type
    assert report.found == {"PERSON": 1, "LOCATION": 1, "EMAIL": 1}


def test_a_missing_model_is_a_clear_error_and_nothing_is_downloaded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="never downloads"):
        Privacy(
            PrivacyConfig(enabled=True, ner=NERConfig(model="xx_not_installed_sm")),
            Vault(b"k" * 32),
        )


def test_the_core_never_imports_spacy() -> None:
    code = (
        "import sys\n"
        "from codemode.privacy.config import PrivacyConfig\n"
        "from codemode.privacy.engine import Privacy\n"
        "from codemode.privacy.vault import Vault\n"
        "p = Privacy(PrivacyConfig(enabled=True), Vault(b'k' * 32))\n"
        "p.protect({'a': 'alice@example.com'})\n"
        "assert 'spacy' not in sys.modules and 'presidio_analyzer' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
