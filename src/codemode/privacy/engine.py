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
import gc
from collections import Counter, deque
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import accumulate, chain, compress, repeat
from operator import add, itemgetter, sub
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.errors import PrivacyBlocked, ToolArgumentError, ToolError
from codemode.redact import REDACTED, remember_environment
from codemode.result import ErrorInfo, ExecutionResult

from . import splice
from .config import PrivacyConfig
from .detectors import DenyList, Detector, RegexDetector, builtin_detectors
from .echo import replace_literals, withhold_echoed_binary
from .known import KnownValues, replace_spans, resolve_held, with_held
from .scan import Scanner, Span
from .secrets import SecretDetector
from .sinks import SinkPolicy
from .splice import SEP, copy_repeats, rebuild
from .tokens import TOKEN_RE
from .vault import Vault
from .walk import Applier, Leaves

if TYPE_CHECKING:
    from codemode.config import ServerConfig

__all__ = ["Privacy", "PrivacyBlocked", "Report", "build_scanner", "count_tokenized"]

_start, _end, _entity = itemgetter(0), itemgetter(1), itemgetter(2)
_entity_of = itemgetter(0)  # of an (entity, value) pair


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
    builtins = builtin_detectors(wanted, phone_regions=config.phone_regions)
    detectors.extend(builtins)
    encoded = None
    if config.decode:
        from .disguise import DisguiseDetector
        from .encoded import EncodedDetector

        plain = Scanner(detectors, allow=config.allow, custom=custom)
        encoded = EncodedDetector(plain)
        detectors += [encoded, DisguiseDetector(plain)]
    ner: tuple[str, ...] = ()
    if config.ner is not None:
        from .ner import NERDetector

        det = NERDetector(config.ner, exclude=config.exclude)
        detectors.append(det)
        ner = det.entities
    shared = (wanted, config.phone_regions, builtins) if config.parallel else None
    return Scanner(
        detectors, allow=config.allow, custom=custom, ner=ner, shared=shared, encoded=encoded
    )


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
        self.known = KnownValues(
            vault.held(), lambda: vault.held_generation, disguised=config.decode
        )
        if config.secrets:
            remember_environment()

    # -- policy ----------------------------------------------------------------------
    def is_sink(self, server: str, tool: str, *names: str, in_workspace: bool = False) -> bool:
        return self.sinks.is_sink(server, tool, *names, in_workspace=in_workspace)

    def scans(self, server: str, tool: str, *names: str) -> bool:
        return self.sinks.scans(server, tool, *names)

    # -- outbound: real values -> tokens -----------------------------------------------
    def protect_text(self, text: str, *, where: str = "", literal: Mapping[str, str] = {}) -> str:
        out, _ = self.protect(text, where=where, literal=literal)
        return str(out)

    def replace_restored(self, value: Any, literal: Mapping[str, str]) -> Any:
        """``value`` with only the values of ``literal`` replaced by their tokens, no
        detector run: what a sink whose results are not scanned (``scan: false``) answers
        must still not hand back what its call just restored (an echo would be a
        detokenizer for the sandbox)."""
        if not literal:
            return value
        leaves = Leaves.collect(value)
        if leaves.binary:
            withhold_echoed_binary(value, literal, where="")
        changes = {}
        for i, text in enumerate(leaves.texts):
            replaced = replace_literals(text, literal)
            if replaced is not text:
                changes[i] = replaced
        return leaves.apply_changes(changes)

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
        # (``_gc_paused`` spelt out: a generator's context manager costs 1.4 us a call,
        # and protect runs for every tool result and run output)
        if not gc.isenabled():
            return self._protect(value, where, literal, count)
        gc.disable()
        try:
            return self._protect(value, where, literal, count)
        finally:
            gc.enable()

    def _protect(
        self, value: Any, where: str, literal: Mapping[str, str], count: bool
    ) -> tuple[Any, Report]:
        report = Report()
        leaves = Leaves.collect(value)
        label = f" from {where}" if where else ""
        if leaves.binary:
            if literal:
                withhold_echoed_binary(value, literal, where=label)
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
            texts = [replace_literals(t, literal) for t in texts]
        texts, whole, inside = self._replace_known(texts, report)
        # The changes are written into the copies as they come (``walk.Applier``): the
        # held values' and each part's while the scanner process scans the next part.
        held = {**inside, **whole} if inside else whole  # (final: "" in the scan)
        applier = Applier(leaves)
        new = self._replace_all(texts, report, applier, held)
        if self.config.action == "block" and report.found:
            raise PrivacyBlocked(
                f"personal data ({report.summary()}){label} was withheld: privacy.action is 'block'"
            )
        if count:
            count_tokenized(report.found)
        if literal:
            applier.add(
                {
                    i: t
                    for i, t in enumerate(texts)
                    if i not in new and t is not leaves.texts[i] and i not in held
                }
            )
        return applier.done(), report

    def index_soon(self) -> None:
        """Index the values the vault took for the held-values search in the background
        (``KnownValues.index_soon``), with the garbage collector paused as in a scan."""
        self.known.index_soon(_gc_paused)

    def _replace_known(
        self, texts: list[str], report: Report
    ) -> tuple[list[str], dict[int, str], dict[int, str]]:
        """(the texts left to scan, {index: token} of the texts that are a held value,
        {index: new text} of the texts holding some inside): the values the vault already
        holds replaced by their tokens (see ``known.py``), so a value tokenized where a
        detector recognised it (a field name, a context word, NER) gets the same token
        wherever it comes back.

        A text that is a held value is not scanned at all. One holding some is scanned
        whole, alone, and its spans and the held values' are resolved as
        ``known.resolve_held`` says (the longest wins; overlapping spans become one), as
        the stream scanner does (``spans``): a held ``Anna Lee`` inside a detected ``Anna
        Lee Smith`` is not ``[PERSON_1] Smith``. Both are "" in the texts left to scan."""
        self.vault.purge_due()  # an expired value is not held any more
        whole, inside = self.known.find(texts)
        if not whole and not inside:
            return texts, {}, {}
        resolved = {
            i: resolve_held(self.scanner.spans_raw(texts[i]), held) for i, held in inside.items()
        }
        # (C passes over the held texts: the same rows again hold 20,000 of them)
        keys = list(zip(whole.values(), map(texts.__getitem__, whole), strict=True))
        keys += [(e, texts[i][a:b]) for i, spans in resolved.items() for a, b, e in spans]
        tokens = self._tokens_for(keys)
        report.found.update(map(_entity_of, keys))
        replaced = replace_spans(texts, resolved, tokens[len(whole) :]) if resolved else texts
        scan = list(texts)
        deque(map(scan.__setitem__, chain(whole, resolved), repeat("")), 0)
        return scan, dict(zip(whole, tokens, strict=False)), {i: replaced[i] for i in resolved}

    def _replace_all(
        self, texts: list[str], report: Report, applier: Applier, held: dict[int, str]
    ) -> dict[int, str]:
        """{index: new text} for the texts of ``texts`` that hold detected values, from
        one scan of the texts joined by NUL; those and ``held`` (the held values'
        changes) written by ``applier``.

        A long text seen before right after the same text (the same key: the notes of
        many rows from a few templates) is scanned once when the detectors' context is
        local (``Scanner.local_context``): in the joined text, a repeat is only its last
        ``splice.CONTEXT`` characters, so the text after it keeps the context it had. A value
        found across the NUL between two texts sends them to be scanned alone.
        """
        pieces, copies = self._pieces(texts)
        joined = pieces[0] if len(pieces) == 1 else SEP.join(pieces)
        # In parts when the scanner process takes some (``Scanner.spans_parts``): the
        # host's tokens and new strings of its part while the process scans the rest.
        # Parts must not cut a text in two: not one text, nor a text holding a NUL.
        origin: tuple[int, int] | None = None
        if len(pieces) > 1 and joined.count(SEP) == len(pieces) - 1:
            parts = self.scanner.spans_parts(joined)
            origin = (0, 1)  # (no piece holds a NUL: ``splice.locate`` part by part)
        else:
            parts = _one(self.scanner.spans_raw(joined))
        try:
            return self._replace_parts(
                texts, pieces, joined, copies, parts, origin, report, applier, held
            )
        finally:
            parts.close()  # (an error meanwhile: the scanner process's part is given up)

    def _replace_parts(
        self,
        texts: list[str],
        pieces: list[str],
        joined: str,
        copies: dict[int, int],
        parts: Iterator[list[tuple[int, int, str]]],
        origin: tuple[int, int] | None,
        report: Report,
        applier: Applier,
        held: dict[int, str],
    ) -> dict[int, str]:
        out: dict[int, str] = {}
        all_kr: list[int] = []
        all_entities: list[str] = []
        seen: list[tuple[int, int, str]] = []
        unwritten = held
        for found in parts:
            if unwritten:  # after the host's part: while the scanner process scans
                applier.add(unwritten)
                unwritten = {}
            if not found:
                continue
            seen.extend(found)
            # Per value, the work runs in C (map, zip, str.count, slicing): the Python loop
            # is per text that changes, with a fast path for the common case of a text
            # that is one value (a JSON field holding an e-mail).
            ss = list(map(_start, found))
            ts = list(map(_end, found))
            values = [joined[a:b] for a, b, _ in found]
            located = splice.locate(pieces, joined, ss, ts, origin, values)
            if located is None:
                seen.extend(f for part in parts for f in part)
                # (what was written is written again from what this finds: afresh)
                applier.reset()
                out = self._replace_crossing(texts, pieces, joined, copies, seen, report)
                applier.add(held)
                applier.add(out)
                return out
            kr, bases = located
            if origin is not None:
                origin = (ss[-1], kr[-1])
            entities = list(map(_entity, found))
            if copies and any(map(copies.__contains__, map(sub, kr, repeat(1)))):
                keep = [k - 1 not in copies for k in kr]
                ss, ts = list(compress(ss, keep)), list(compress(ts, keep))
                kr, entities = list(compress(kr, keep)), list(compress(entities, keep))
                bases, values = list(compress(bases, keep)), list(compress(values, keep))
            # (values by a comprehension: a third less than maps of slice objects)
            keys = list(zip(entities, values, strict=True))
            changed = rebuild(texts, bases, kr, ss, ts, self._tokens_for(keys))
            out.update(changed)
            applier.add(changed)  # (while the scanner process scans the next part)
            all_kr += kr
            all_entities += entities
        if unwritten:
            applier.add(unwritten)
        report.found.update(all_entities)
        if copies:
            copy_repeats(out, copies, all_kr, all_entities, report.found)
            applier.add({c: out[c] for c in copies if c in out})
        return out

    def _replace_crossing(
        self,
        texts: list[str],
        pieces: list[str],
        joined: str,
        copies: dict[int, int],
        found: list[Any],
        report: Report,
    ) -> dict[int, str]:
        """``_replace_all`` when a value was found across the NUL between two texts:
        those texts are scanned again alone (rare: the slow path)."""
        starts = list(accumulate(map(add, map(len, pieces), repeat(1)), initial=0))
        where = bisect.bisect_right
        # (text, start, end, (entity, value)), start and end in ``joined``
        hits: list[tuple[int, int, int, tuple[str, str]]] = []
        again: set[int] = set()
        for start, end, entity in found:
            k = where(starts, start) - 1
            if end >= starts[k + 1]:  # crosses into the next text: scan those alone
                again.update(range(k, where(starts, end - 1)))
            elif k not in copies:
                hits.append((k, start, end, (entity, joined[start:end])))
        hits = [h for h in hits if h[0] not in again]
        for i in sorted(again - copies.keys()):
            base, text = starts[i], texts[i]
            hits.extend(
                (i, base + a, base + b, (e, text[a:b])) for a, b, e in self.scanner.spans(text)
            )
        hits.sort()
        keys = [h[3] for h in hits]
        tokens = self._tokens_for(keys)
        kr = [h[0] + 1 for h in hits]
        bases = [starts[h[0]] for h in hits]
        out = rebuild(texts, bases, kr, [h[1] for h in hits], [h[2] for h in hits], tokens)
        entities = [k[0] for k in keys]
        report.found.update(entities)
        if copies:
            copy_repeats(out, copies, kr, entities, report.found)
        return out

    def _tokens_for(self, keys: list[tuple[str, str]]) -> list[str]:
        """What replaces each ``(entity, value)`` of ``keys``; a value repeated in many
        rows is looked up once."""
        distinct = list(dict.fromkeys(keys))
        if len(distinct) == len(keys):
            return self.substitute_many(keys)
        table = dict(zip(distinct, self.substitute_many(distinct), strict=True))
        return list(map(table.__getitem__, keys))

    def _pieces(self, texts: list[str]) -> tuple[list[str], dict[int, int]]:
        """(the pieces to join, {repeated text: its first occurrence}): ``splice.pieces``
        when the detectors' context is local (see ``_replace_all``)."""
        if len(texts) == 1 or not self.scanner.local_context:
            return texts, {}
        return splice.pieces(texts)

    def substitute(self, entity: str, value: str) -> str:
        if entity == "SECRET":
            return REDACTED
        if self.config.action == "redact":
            return f"[{entity}]"
        return self.vault.token(entity, value)

    def substitute_many(self, items: Iterable[tuple[str, str]]) -> list[str]:
        """What replaces each ``(entity, value)``: a token, ``[EMAIL]`` or ``[redacted]``."""
        items = list(items)
        if self.config.action == "redact":
            return [REDACTED if e == "SECRET" else f"[{e}]" for e, _ in items]
        if "SECRET" not in map(_entity_of, items):  # (C passes: no generator step per value)
            return self.vault.token_many(items)
        tokens = iter(self.vault.token_many([it for it in items if it[0] != "SECRET"]))
        return [REDACTED if e == "SECRET" else next(tokens) for e, _ in items]

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

    def spans(self, text: str) -> list[Span]:
        """The detectors' spans in ``text`` and the held values', resolved as ``protect``
        resolves them (``known.resolve_held``), for the stream scanner, which replaces
        values chunk by chunk."""
        return with_held(self.scanner.spans(text), self.known, text)

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


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused during one scan.

    A scan allocates a few small tuples per string and per value found (none in a
    cycle): at 120,000 strings the collector's passes, which traverse the whole heap
    when they reach the oldest generation, took a third of the scan's time. Reference
    counting still frees everything; collection resumes right after. A scan that finds
    the collector already off (another thread's scan, or the application) leaves it so.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def count_tokenized(found: Mapping[str, int]) -> None:
    """Tell the metrics (``codemode_pii_tokenized``) what was replaced; credentials,
    redacted by the other net, are not personal data and not counted."""
    if not any(e != "SECRET" and n for e, n in found.items()):
        return
    from codemode.observability import signals

    signals.pii_tokenized_counts({e: n for e, n in found.items() if e != "SECRET"})


def _one(found: list[tuple[int, int, str]]) -> Generator[list[tuple[int, int, str]], None, None]:
    yield found


def _warn(result: ExecutionResult, warnings: list[str]) -> ExecutionResult:
    return replace(result, warnings=(*result.warnings, *warnings))
