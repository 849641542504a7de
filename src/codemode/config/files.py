"""Config documents: JSON with comments or YAML, read once, with positions for messages.

``load_document`` reads ``config.json``/``mcp.json`` (JSON; ``//`` and ``/* */`` comments
and ``"$comment"`` keys are ignored) or ``config.yaml`` (YAML, ``safe_load``). Values come
from the real parser of each format; ``Document.position(path)`` finds where a key or value
is written (line and column, 1-based) by composing the same text with PyYAML, whose nodes
carry marks. JSON is (nearly) YAML, so this works for both; where it cannot, messages
simply omit the position.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from codemode.errors import ConfigError

from .messages import excerpt

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")

YAML_SUFFIXES = (".yaml", ".yml")

Key = str | int


def strip_json_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments outside JSON strings.

    Comment characters become spaces (newlines stay), so every line and column of what
    remains is where it was: positions in messages point into the file as written.
    """
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            end = n if j == -1 else j
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            end = n if j == -1 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _drop_comment_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_comment_keys(v) for k, v in value.items() if k != "$comment"}
    if isinstance(value, list):
        return [_drop_comment_keys(v) for v in value]
    return value


@dataclass
class Document:
    """One config file: its top-level object, and where each part of it is written."""

    path: Path
    data: dict[str, Any]
    text: str
    _root: Any = field(default=None, repr=False)
    _composed: bool = field(default=False, repr=False)

    def position(self, keys: Sequence[Key], *, key: bool = False) -> tuple[int, int] | None:
        """(line, column) of the value at ``keys`` (of its key with ``key=True``), or None."""
        import yaml

        node = self._compose()
        if node is None:
            return None
        mark = node.start_mark
        for k in keys:
            if isinstance(node, yaml.SequenceNode) and isinstance(k, int):
                if not 0 <= k < len(node.value):
                    return None
                node = node.value[k]
                mark = node.start_mark
            elif isinstance(node, yaml.MappingNode):
                pair = next(
                    (
                        (kn, vn)
                        for kn, vn in reversed(node.value)
                        if isinstance(kn, yaml.ScalarNode) and kn.value == str(k)
                    ),
                    None,
                )
                if pair is None:
                    return None
                node = pair[1]
                mark = pair[0].start_mark if key else node.start_mark
            else:
                return None
        return mark.line + 1, mark.column + 1

    def where(self, keys: Sequence[Key], *, key: bool = False) -> str:
        """``path:line:column`` (or just ``path``) for messages."""
        pos = self.position(keys, key=key)
        return f"{self.path}:{pos[0]}:{pos[1]}" if pos else str(self.path)

    def _compose(self) -> Any:
        if not self._composed:
            self._composed = True
            import yaml

            try:
                self._root = yaml.compose(self.text, Loader=yaml.SafeLoader)
            except yaml.YAMLError:
                self._root = None
        return self._root


def load_document(path: Path) -> Document:
    """Read a JSON-with-comments or YAML object; a ConfigError names the file and place."""
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if path.suffix in YAML_SUFFIXES:
        import yaml

        text = raw
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or exc
            if mark is None:
                raise ConfigError(f"{path}: invalid YAML: {problem}") from None
            line, col = mark.line + 1, mark.column + 1
            raise ConfigError(
                f"{path}:{line}:{col}: invalid YAML: {problem}{excerpt(text, line, col)}"
            ) from None
        if data is None:
            data = {}
        kind = "a YAML mapping"
    else:
        text = strip_json_comments(raw)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}{_json_hint(exc)}"
                + excerpt(raw, exc.lineno, exc.colno)
            ) from None
        kind = "a JSON object"
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected {kind} at the top level")
    return Document(path, _drop_comment_keys(data), text)


def validate_document(doc: Document, model: type[M], *, under: Sequence[Key] = ()) -> M:
    """``model`` from the document's data (at ``under``); every problem is one line of a
    ConfigError naming the file, line, column and field (``tools.yaml:7:12: tools[0].name:
    Field required``)."""
    from pydantic import ValidationError

    data: Any = doc.data
    for k in under:
        data = data[k]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = [*under, *err.get("loc", ())]
            keys = [k for k in loc if isinstance(k, str | int)]
            found = list(keys)
            while found and doc.position(found) is None:
                found.pop()  # a missing field: point at its parent
            field_name = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys)
            lines.append(f"{doc.where(found)}: {field_name.lstrip('.') or '(top)'}: {err['msg']}")
        raise ConfigError("\n".join(lines)) from None


def _json_hint(exc: json.JSONDecodeError) -> str:
    """The usual cause of JSON's terse messages, when it can be seen."""
    before = exc.doc[: exc.pos].rstrip()
    if before.endswith(",") and exc.doc[exc.pos : exc.pos + 1] in ("}", "]"):
        return " (a comma before a closing bracket: JSON allows no trailing comma)"
    if exc.msg.startswith("Expecting property name") and exc.doc[exc.pos : exc.pos + 1] == "'":
        return " (JSON strings and keys take double quotes)"
    if exc.msg.startswith("Expecting ',' delimiter"):
        return " (a comma missing before this?)"
    return ""


def load_json_file(path: Path) -> dict[str, Any]:
    """The top-level object of a JSON-with-comments (or YAML) file."""
    return load_document(path).data


__all__ = [
    "Document",
    "load_document",
    "load_json_file",
    "strip_json_comments",
    "validate_document",
]
