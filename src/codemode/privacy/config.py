"""The ``privacy`` section of the workspace config.

``"privacy": true`` turns it on with the defaults; an object sets options::

    "privacy": {
      "enabled": true,
      "exclude": ["IP_ADDRESS"],                 // leave these types alone
      "action": "tokenize",                      // or "redact", "block"
      "recognizers": [{"name": "EMPLOYEE_ID", "pattern": "EMP-\\\\d{6}"}],
      "deny": {"CUSTOMER": ["Acme Corp", "Globex"]},
      "allow": ["support@example.com"],
      "servers": {"files": {"sink": false, "scan": false},
                  "crm": {"tools": {"export_*": {"sink": false}}}},
      "vault": {"ttl": "P30D", "key_file": "/etc/codemode/privacy.key"}
    }

``CODEMODE_PRIVACY=1`` (or ``0``) and ``codemode serve --privacy`` override ``enabled``;
``CODEMODE_PRIVACY_<FIELD>`` sets a top-level field (``CODEMODE_PRIVACY_ACTION=redact``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .detectors import BUILTIN_ENTITIES
from .tokens import is_entity_name

__all__ = [
    "KEY_ENV",
    "NERConfig",
    "PrivacyConfig",
    "Recognizer",
    "ServerPolicy",
    "ToolPolicy",
    "VaultConfig",
]

KEY_ENV = "CODEMODE_PRIVACY_KEY"

DEFAULT_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "BR", "JP", "IN", "CA", "AU")


def _entity(name: str) -> str:
    if not is_entity_name(name):
        raise ValueError(
            f"{name!r} is not an entity type name: use UPPER_CASE letters, digits and _"
        )
    return name


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Recognizer(_Model):
    """A custom entity: a regular expression, optionally only after context words."""

    name: str
    pattern: str
    ignore_case: bool = False
    context: tuple[str, ...] = Field(
        (), description="Words of which one must appear in the 32 characters before a match."
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _entity(v)

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        try:
            compiled = re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        if compiled.fullmatch(""):
            raise ValueError("the pattern matches the empty string")
        return v


class ToolPolicy(_Model):
    """Per tool: ``sink`` (receives real values) and ``scan`` (its results are tokenized)."""

    sink: bool | None = None
    scan: bool | None = None


class ServerPolicy(ToolPolicy):
    """Per server; ``tools`` overrides by tool name or glob (``export_*``)."""

    tools: dict[str, ToolPolicy] = Field(default_factory=dict)


class VaultConfig(_Model):
    """Where tokens are kept and how long."""

    scope: Literal["workspace", "session"] = Field(
        "workspace",
        description="workspace: every session of the workspace (and tenant) shares one "
        "vault, persisted, so tokens in artifacts resolve later; session: in memory, "
        "per session.",
    )
    ttl: timedelta = Field(timedelta(days=30), description="A token unused this long expires.")
    key_file: Path | None = Field(
        None,
        description="Fernet key file (default: ~/.config/codemode/privacy/<workspace>.key, "
        f"created on first use); {KEY_ENV} takes precedence.",
    )

    @field_validator("ttl")
    @classmethod
    def _ttl(cls, v: timedelta) -> timedelta:
        if v.total_seconds() <= 0:
            raise ValueError("must be positive")
        return v


class NERConfig(_Model):
    """Names and addresses through a spaCy model the user installed (``codemode[ner]``)."""

    model: str = Field(description="An installed spaCy package name, or a model directory.")
    entities: tuple[str, ...] = ("PERSON", "LOCATION")
    labels: dict[str, str] = Field(
        default_factory=lambda: {
            "PERSON": "PERSON",
            "PER": "PERSON",
            "GPE": "LOCATION",
            "LOC": "LOCATION",
            "FAC": "LOCATION",
            "ADDRESS": "LOCATION",
        },
        description="Model label -> entity type.",
    )


class PrivacyConfig(_Model):
    """Personal-data tokenization and the credentials net (``codemode.privacy``)."""

    enabled: bool = False
    entities: tuple[str, ...] = Field(
        BUILTIN_ENTITIES, description="Built-in types to detect (custom ones are always on)."
    )
    exclude: tuple[str, ...] = Field(
        (), description="Types to leave alone, so code can compute on them (e.g. EMAIL)."
    )
    action: Literal["tokenize", "redact", "block"] = Field(
        "tokenize",
        description="On detection: tokenize (restorable into sinks), redact (gone for "
        "good), or block (the result is withheld with an error).",
    )
    recognizers: tuple[Recognizer, ...] = ()
    deny: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="Entity type -> literal values always tokenized."
    )
    allow: tuple[str, ...] = Field((), description="Values never tokenized (case-insensitive).")
    phone_regions: tuple[str, ...] = Field(
        DEFAULT_REGIONS, description="Regions whose national phone formats are recognised."
    )
    servers: dict[str, ServerPolicy] = Field(default_factory=dict)
    unknown_tokens: Literal["error", "pass"] = Field(
        "error", description="A token the vault never issued, in a tool's arguments."
    )
    secrets: bool = Field(True, description="Redact credentials too.")
    decode: bool = Field(
        True,
        description="Look inside base64, hex, URL-encoded and escaped text (\\u0040, "
        "&#64;): an encoded span holding personal data is tokenized whole.",
    )
    binary: Literal["allow", "block"] = Field(
        "allow",
        description="Binary results that cannot be scanned: pass with a warning, or refuse.",
    )
    parallel: bool = Field(
        True,
        description="Scan large results (128 KB and more) in a helper process too, on "
        "machines with two or more cores: text only goes there, positions come back.",
    )
    max_scan_mb: float = Field(
        64.0, gt=0, description="Larger results are refused rather than passed unscanned."
    )
    vault: VaultConfig = Field(default_factory=VaultConfig)
    ner: NERConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        """``"privacy": true`` / ``"1"`` is ``{"enabled": true}``."""
        return cls.shorthand(data) if not isinstance(data, dict) else data

    @classmethod
    def shorthand(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return {"enabled": value}
        if isinstance(value, str) and value.strip().lower() in _BOOLS:
            return {"enabled": _BOOLS[value.strip().lower()]}
        return value

    @field_validator("entities", "exclude")
    @classmethod
    def _names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_entity(x) for x in v)

    @field_validator("deny")
    @classmethod
    def _deny(cls, v: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for name in v:
            _entity(name)
        return v

    @field_validator("phone_regions")
    @classmethod
    def _regions(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        from phonenumbers import PhoneMetadata

        for region in v:
            if PhoneMetadata.metadata_for_region(region.upper()) is None:
                raise ValueError(f"unknown phone region {region!r} (ISO codes: US, GB, DE...)")
        return tuple(r.upper() for r in v)

    def active(self, entity: str) -> bool:
        return entity not in self.exclude

    def policy(self, server: str, tool: str, *more: str) -> tuple[bool | None, bool | None]:
        """(sink, scan) as configured for ``server.tool`` (None: not configured).

        ``more``: the other names the call has, ``server.tool`` each (the tool's names in
        Python identifiers, and as the code calls it): a rule written with the name the
        agent's code and discovery show (``my_crm``, ``export_contacts``) must hold for
        ``my-crm``'s ``export-contacts`` as the original spelling does. Rules under the
        original server name come first. (The original ``server.tool`` among ``more`` is
        that first pair: split at its first dot, ``acme.crm``'s ``send`` was ``acme``'s
        ``crm.send``, and ``acme``'s rules, ``"scan": false`` say, held for ``acme.crm``.
        The other names are Python identifiers: one dot, between server and tool.)"""
        own = f"{server}.{tool}"
        pairs = [(server, tool), *(n.partition(".")[::2] for n in more if n != own)]
        sp = next((p for s, _ in pairs if (p := self.servers.get(s)) is not None), None)
        if sp is None:
            return None, None
        sink, scan = sp.sink, sp.scan
        tools = {t for _, t in pairs}
        for pattern, tp in sp.tools.items():
            if any(pattern == t or fnmatchcase(t, pattern) for t in tools):
                sink = tp.sink if tp.sink is not None else sink
                scan = tp.scan if tp.scan is not None else scan
                break
        return sink, scan


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False}
_BOOLS |= {"no": False, "off": False}
