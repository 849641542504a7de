"""``Privacy``: the detectors, the vault and the policy of one scope, as operations.

- ``protect(value)``: every detected value in a JSON-like value (any depth, dict keys,
  text in bytes) becomes its token (or ``[EMAIL]`` with ``action: redact``; a
  ``PrivacyBlocked`` error with ``action: block``); credentials always become
  ``[redacted]``.
- ``restore(args, sink=...)``: tokens in a tool's arguments become real values when the
  tool is a sink; a token the vault never issued is refused.
- ``protect_result(result)``: the same net over a run's stdout, stderr, value, error
  and warnings.
- ``is_sink`` / ``scans``: the per-server and per-tool policy (see ``sinks.py``).

Strings of a value are scanned as one text joined by NUL characters (one pass of each
detector instead of one per string), so a dict key stands right before its value: a
bare number under ``"phone"`` is a phone, under ``"order_id"`` it is not.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.errors import PrivacyBlocked, ToolArgumentError, ToolError
from codemode.redact import REDACTED, remember_environment
from codemode.result import ErrorInfo, ExecutionResult

from .config import PrivacyConfig
from .detectors import DenyList, Detector, RegexDetector, builtin_detectors
from .scan import Scanner, Span
from .secrets import SecretDetector
from .sinks import SinkPolicy
from .tokens import TOKEN_RE
from .vault import Vault
from .walk import Leaves

if TYPE_CHECKING:
    from codemode.config import ServerConfig

__all__ = ["Privacy", "PrivacyBlocked", "Report", "build_scanner", "count_tokenized"]

SEP = "\x00"
REPEAT_MIN = 64
"""Texts this long are scanned once per distinct (context, text) in a value."""
CONTEXT = 32
"""Characters before a text that detectors may look at (context words, keys)."""
_WORD = re.compile(r"\w")


@dataclass
class Report:
    """What one ``protect`` found and did."""

    found: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return ", ".join(f"{e} x{n}" for e, n in sorted(self.found.items()))


def build_scanner(config: PrivacyConfig) -> Scanner:
    """The detectors ``config`` asks for (built-ins, custom, deny-lists, NER, secrets)."""
    wanted = [e for e in config.entities if config.active(e)]
    detectors: list[Detector] = []
    if config.secrets:
        detectors.append(SecretDetector())
    custom: list[str] = []
    for r in config.recognizers:
        if config.active(r.name):
            detectors.append(
                RegexDetector(r.name, r.pattern, ignore_case=r.ignore_case, context=r.context)
            )
            custom.append(r.name)
    for entity, values in config.deny.items():
        if config.active(entity):
            detectors.append(DenyList(entity, values))
            custom.append(entity)
    detectors.extend(builtin_detectors(wanted, phone_regions=config.phone_regions))
    if config.decode:
        from .encoded import EncodedDetector

        detectors.append(EncodedDetector(Scanner(detectors, allow=config.allow, custom=custom)))
    ner: tuple[str, ...] = ()
    if config.ner is not None:
        from .ner import NERDetector

        det = NERDetector(config.ner, exclude=config.exclude)
        detectors.append(det)
        ner = det.entities
    return Scanner(detectors, allow=config.allow, custom=custom, ner=ner)


class Privacy:
    """Tokenize, restore and scrub for one vault under one config."""

    def __init__(
        self,
        config: PrivacyConfig,
        vault: Vault,
        *,
        servers: Mapping[str, ServerConfig] | None = None,
        workspace: Path | None = None,
        scanner: Scanner | None = None,
    ) -> None:
        self.config = config
        self.vault = vault
        self.scanner = scanner if scanner is not None else build_scanner(config)
        self.sinks = SinkPolicy(config, servers or {}, workspace)
        self.max_chars = int(config.max_scan_mb * 1_000_000)
        if config.secrets:
            remember_environment()

    # -- policy ----------------------------------------------------------------------
    def is_sink(self, server: str, tool: str) -> bool:
        return self.sinks.is_sink(server, tool)

    def scans(self, server: str, tool: str) -> bool:
        return self.sinks.scans(server, tool)

    # -- outbound: real values -> tokens -----------------------------------------------
    def protect_text(self, text: str, *, where: str = "", literal: Mapping[str, str] = {}) -> str:
        out, _ = self.protect(text, where=where, literal=literal)
        return str(out)

    def protect(
        self,
        value: Any,
        *,
        where: str = "",
        literal: Mapping[str, str] = {},
        count: bool = True,
    ) -> tuple[Any, Report]:
        """``value`` with every detected value replaced (see the module doc).

        ``literal`` maps real values to their tokens that must be replaced wherever they
        appear (values just restored into a sink's arguments, which may come back in its
        result or error without any detector recognising them out of context).
        ``count``: report what was replaced to the metrics (not for copies of what the
        model sees anyway, such as the audit log's).
        """
        report = Report()
        leaves = Leaves.collect(value)
        label = f" from {where}" if where else ""
        if leaves.binary:
            if self.config.binary == "block":
                raise PrivacyBlocked(
                    f"{leaves.binary} bytes of binary data{label} cannot be scanned for "
                    "personal data and privacy.binary is 'block'"
                )
            report.warnings.append(
                f"privacy: {leaves.binary} bytes of binary data{label} were passed on "
                "without a scan (binary content cannot be checked for personal data)"
            )
        if leaves.chars > self.max_chars:
            raise PrivacyBlocked(
                f"the result{label} has {leaves.chars / 1e6:.1f} million characters, more "
                f"than privacy.max_scan_mb ({self.config.max_scan_mb:g}) allows to scan; it "
                "was withheld rather than passed unscanned. Ask the tool for less (a page, "
                "a filter), or raise privacy.max_scan_mb."
            )
        if not leaves.texts:
            return value, report
        texts = leaves.texts
        if literal:
            texts = [_replace_literals(t, literal) for t in texts]
        new = self._replace_all(texts, report)
        if self.config.action == "block" and report.found:
            raise PrivacyBlocked(
                f"personal data ({report.summary()}){label} was withheld: privacy.action is 'block'"
            )
        if count:
            count_tokenized(report.found)
        return leaves.apply(new), report

    def _replace_all(self, texts: list[str], report: Report) -> list[str]:
        spans, copies = self._scan_many(texts)
        out = list(texts)
        memo: dict[tuple[str, str], str] = {}  # a value repeated in many rows: one lookup
        for i, found in spans.items():
            out[i] = self._replace(texts[i], found, report, memo)
        for i, j in copies.items():  # a repeated text: the same tokens, counted again
            if j in spans:
                out[i] = out[j]
                report.found.update(sp.entity for sp in spans[j])
        return out

    def _scan_many(self, texts: list[str]) -> tuple[dict[int, list[Span]], dict[int, int]]:
        """(detections per text, {repeated text: its first occurrence}), from one scan
        of the texts joined by NUL.

        A long text seen before right after the same text (the same key: the notes of
        many rows from a few templates) is scanned once when the detectors' context is
        local (``Scanner.local_context``): in the joined text, a repeat is only its last
        ``CONTEXT`` characters, so the text after it keeps the context it had.
        """
        if len(texts) == 1:
            found = self.scanner.spans(texts[0])
            return ({0: found} if found else {}), {}
        starts: list[int] = []
        owners: list[int] = []  # per piece: its text, or -1 for the tail of a repeat
        pieces: list[str] = []
        copies: dict[int, int] = {}
        seen: dict[tuple[str, str], int] = {}
        pos = 0
        before = ""
        repeats = self.scanner.local_context
        for i, t in enumerate(texts):
            piece, owner = t, i
            if repeats and len(t) >= REPEAT_MIN and _WORD.search(before):
                first = seen.setdefault((before, t), i)
                if first != i:
                    copies[i] = first
                    piece, owner = t[-CONTEXT:], -1
            starts.append(pos)
            owners.append(owner)
            pieces.append(piece)
            pos += len(piece) + 1
            before = t[-CONTEXT:]
        joined = SEP.join(pieces)
        out: dict[int, list[Span]] = {}
        again: set[int] = set()
        for sp in self.scanner.spans(joined):
            k = bisect.bisect_right(starts, sp.start) - 1
            base = starts[k]
            if sp.end > base + len(pieces[k]):  # crosses into the next text: scan alone
                last = bisect.bisect_right(starts, sp.end - 1) - 1
                again.update(o for o in owners[k : last + 1] if o >= 0)
                continue
            if owners[k] >= 0:
                out.setdefault(owners[k], []).append(
                    Span(sp.start - base, sp.end - base, sp.entity)
                )
        for i in again:
            found = self.scanner.spans(texts[i])
            if found:
                out[i] = found
            else:
                out.pop(i, None)
        return out, copies

    def _replace(
        self, text: str, spans: list[Span], report: Report, memo: dict[tuple[str, str], str]
    ) -> str:
        parts: list[str] = []
        pos = 0
        for sp in spans:
            if sp.start < pos:
                continue
            parts.append(text[pos : sp.start])
            key = (sp.entity, text[sp.start : sp.end])
            token = memo.get(key)
            if token is None:
                token = memo[key] = self.substitute(*key)
            parts.append(token)
            report.found[sp.entity] += 1
            pos = sp.end
        parts.append(text[pos:])
        return "".join(parts)

    def substitute(self, entity: str, value: str) -> str:
        if entity == "SECRET":
            return REDACTED
        if self.config.action == "redact":
            return f"[{entity}]"
        return self.vault.token(entity, value)

    # -- inbound: tokens -> real values ------------------------------------------------
    def restore(self, value: Any, *, sink: bool, where: str = "") -> tuple[Any, dict[str, str]]:
        """(``value`` with tokens replaced by real values if ``sink``, {value: token}).

        Every token is checked, sink or not: one the vault never issued (or that expired)
        is a ``ToolArgumentError`` unless ``privacy.unknown_tokens`` is ``pass``.
        """
        leaves = Leaves.collect(value)
        restored: dict[str, str] = {}
        new: list[str] = []
        changed = False
        for text in leaves.texts:
            if "[" not in text or TOKEN_RE.search(text) is None:
                new.append(text)
                continue

            def real(m: Any) -> str:
                token = m.group(0)
                got = self.vault.value(token)
                if got is None:
                    if self.config.unknown_tokens == "pass":
                        return str(token)
                    raise ToolArgumentError(
                        f"unknown token {token}: no value was tokenized as {token} in this "
                        "workspace (or it expired). Pass tokens exactly as tools returned "
                        "them; never make one up."
                        + (f" (in the arguments of {where})" if where else "")
                    )
                if not sink:
                    return str(token)
                restored[got] = token
                return got

            replaced = TOKEN_RE.sub(real, text)
            changed = changed or replaced != text
            new.append(replaced)
        return (leaves.apply(new) if changed else value), restored

    # -- runs ------------------------------------------------------------------------
    def protect_result(self, result: ExecutionResult) -> ExecutionResult:
        """A run's result with the same net over stdout, stderr, value, error, warnings."""
        err = result.error
        doc: dict[str, Any] = {
            "stdout": result.stdout,
            "stderr": result.stderr,
            "warnings": list(result.warnings),
            "value": result.value,
        }
        if err is not None:
            doc["error"] = [err.type, err.message, err.traceback]
        try:
            out, report = self.protect(doc, where="the run's output")
        except PrivacyBlocked as exc:
            return ExecutionResult(
                error=ErrorInfo("PrivacyBlocked", exc.message),
                duration_ms=result.duration_ms,
                timed_out=result.timed_out,
                state_lost=result.state_lost,
            )
        if out is doc:
            return result if not report.warnings else _warn(result, report.warnings)
        new = replace(
            result,
            stdout=out["stdout"],
            stderr=out["stderr"],
            value=out["value"],
            warnings=tuple(out["warnings"]) + tuple(report.warnings),
        )
        if err is not None:
            etype, message, tb = out["error"]
            new = replace(new, error=replace(err, type=etype, message=message, traceback=tb))
        return new

    def protect_error(self, exc: ToolError, literal: Mapping[str, str] = {}) -> ToolError:
        """``exc`` with its message (and string fields) scrubbed, in place."""
        for name, val in list(vars(exc).items()):
            if isinstance(val, str) and val and not name.startswith("_"):
                setattr(exc, name, self.protect_text(val, literal=literal))
        if exc.args and isinstance(exc.args[0], str):
            exc.args = (self.protect_text(exc.args[0], literal=literal), *exc.args[1:])
        return exc

    def redact(self, text: str) -> str:
        """``text`` with detected values as ``[EMAIL]``..., nothing stored (logs)."""
        spans = self.scanner.spans(text)
        if not spans:
            return text
        parts: list[str] = []
        pos = 0
        for sp in spans:
            parts.append(text[pos : sp.start])
            parts.append(REDACTED if sp.entity == "SECRET" else f"[{sp.entity}]")
            pos = sp.end
        parts.append(text[pos:])
        return "".join(parts)


def count_tokenized(found: Mapping[str, int]) -> None:
    """Tell the metrics (``codemode_pii_tokenized``) what was replaced; credentials,
    redacted by the other net, are not personal data and not counted."""
    if not any(e != "SECRET" and n for e, n in found.items()):
        return
    from codemode.observability import signals

    for entity, n in found.items():
        if entity != "SECRET" and n:
            signals.pii_tokenized(entity, n)


def _replace_literals(text: str, literal: Mapping[str, str]) -> str:
    for value, token in literal.items():
        if value and value in text:
            text = text.replace(value, token)
    return text


def _warn(result: ExecutionResult, warnings: list[str]) -> ExecutionResult:
    return replace(result, warnings=(*result.warnings, *warnings))
