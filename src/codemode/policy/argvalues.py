"""Where a rule on an argument finds its values in a call, and how a call that gives it
several values is judged.

A rule names an argument (``to``) or a path to one (``message.to``, ``recipients[].email``;
the ``[]`` may be left out, list items are looked into anyway). The name is found at any
depth of the call's arguments, in every object and every list item, in any case (as Go's
JSON decoder matches names), so ``{"message": {"to": ...}}`` and ``{"recipients": [{"to":
...}]}`` meet a rule on ``to``; the values are the leaves under each place it is found
(strings; numbers and booleans as text), each also read as a lenient receiver reads it
(:func:`codemode.invisible.loose`, and the addresses a mail library reads in it).

A call whose arguments have several values is judged as the calls with one value each
would be, and the strictest of those decisions counts: a deny holds if any value meets it,
an allow-list (an ``allow`` rule, or a deny rule with ``not_matches``) only if every value
is on it. Values are grouped by which conditions they meet, so the work grows with the
number of distinct groups, not of values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import getaddresses
from fnmatch import translate
from functools import lru_cache
from itertools import product
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ..invisible import loose

Path = tuple[str, ...]
MAX_COMBINATIONS = 4096
"""Past this many ways to pick one value group per argument, a call is refused (failing
closed) rather than judged: only a policy with more than a dozen argument conditions on one
tool can reach it."""


class ArgMatch(BaseModel):
    """A condition on one value: ``{"matches": "*@evil.example"}`` holds when it matches one
    of the globs; ``{"not_matches": ["*@example.com"]}`` when it matches none of them.
    Globs are matched against the whole value, ignoring case."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    matches: tuple[str, ...] | None = None
    not_matches: tuple[str, ...] | None = None

    @field_validator("matches", "not_matches", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _exactly_one(self) -> ArgMatch:
        if (self.matches is None) == (self.not_matches is None):
            raise ValueError('give exactly one of "matches" or "not_matches"')
        if not (self.matches or self.not_matches):
            raise ValueError("give at least one glob")
        return self

    def one(self, value: str) -> bool:
        """Whether the condition holds for ``value`` (already case-folded)."""
        if self.matches is not None:
            return _pattern(self.matches).match(value) is not None
        return _pattern(self.not_matches or ()).match(value) is None

    def holds(self, value: Any) -> bool:
        """Whether it holds for some value of ``value`` (a whole argument)."""
        return any(self.one(v) for v in readings([value]))

    def describe(self) -> str:
        return json.dumps(self.model_dump(exclude_none=True))


@lru_cache(maxsize=1024)
def _pattern(globs: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{translate(g.casefold())})" for g in globs))


def parse(name: str) -> Path:
    """``"recipients[].email"`` -> ``("recipients", "email")``, each part as ``loose``
    reads a name."""
    parts = [p.replace("[]", "") for p in name.split(".")]
    if not name.strip() or any(not p.strip() for p in parts):
        raise ValueError(
            f"{name!r}: give an argument's name or a dotted path to one "
            '("to", "message.to", "recipients[].email")'
        )
    return tuple(_name(p) for p in parts)


def _name(key: str) -> str:
    name = _NAMES.get(key)
    if name is None:
        if len(_NAMES) > 10_000:
            _NAMES.clear()
        name = _NAMES[key] = loose(key)
    return name


_NAMES: dict[str, str] = {}
_NODE = (dict, list, tuple)


def found(args: Mapping[str, Any], paths: Sequence[Path]) -> list[list[Any]]:
    """For each path, every value found at it: its first part at any depth, the next ones
    directly below (through list items), names compared as ``loose`` reads them; a path of
    several parts also finds an argument named as the whole path (``"message.to"``). One
    walk of the arguments for all paths."""
    out: list[list[Any]] = [[] for _ in paths]
    firsts: dict[str, list[int]] = {}
    wholes: dict[str, list[int]] = {}  # "message.to" is also the name of one argument
    for k, path in enumerate(paths):
        firsts.setdefault(path[0], []).append(k)
        if len(path) > 1:
            wholes.setdefault(".".join(path), []).append(k)
    inside: list[tuple[Any, int, int]] = []  # (node, path, parts matched) of longer paths
    stack: list[Any] = [args if isinstance(args, dict) else dict(args)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                hit = firsts.get(key) or (firsts.get(_name(key)) if isinstance(key, str) else None)
                for k in hit or ():
                    if len(paths[k]) == 1:
                        out[k].append(value)
                    else:
                        inside.append((value, k, 1))
                if wholes and isinstance(key, str):
                    for k in wholes.get(key) or wholes.get(_name(key)) or ():
                        out[k].append(value)
                if isinstance(value, _NODE):
                    stack.append(value)
        else:
            stack.extend(v for v in node if isinstance(v, _NODE))
    while inside:
        node, k, at = inside.pop()
        if isinstance(node, dict):
            part = paths[k][at]
            for key, value in node.items():
                if isinstance(key, str) and (key == part or _name(key) == part):
                    if at + 1 == len(paths[k]):
                        out[k].append(value)
                    else:
                        inside.append((value, k, at + 1))
        elif isinstance(node, list | tuple):
            inside.extend((v, k, at) for v in node)
    return out


_PLAIN_ADDRESS = re.compile(r'[^\s<>,;:"()\[\]\\@]+@[^\s<>,;:"()\[\]\\@]+')
"""An address alone: a mail library reads nothing else in it (no need to ask one)."""


def readings(values: Iterable[Any]) -> set[str]:
    """The case-folded texts conditions look at: each leaf as written and as ``loose``
    reads it, and the addresses a mail library reads in it."""
    out: set[str] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.add(v.casefold())
            read = loose(v)
            out.add(read)
            if "@" in read and not _PLAIN_ADDRESS.fullmatch(read):
                out.update(loose(a) for _, a in getaddresses([read]) if "@" in a)
        elif isinstance(v, bool):
            out.add("true" if v else "false")
        elif isinstance(v, int | float):
            out.add(str(v))
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
    return out


@dataclass(frozen=True, slots=True)
class ArgPlan:
    """The argument conditions of a tool's rules, grouped by path: built once per tool."""

    rules: tuple[tuple[tuple[Path, ArgMatch], ...], ...]
    paths: tuple[tuple[Path, tuple[tuple[int, ArgMatch], ...]], ...]
    """Each path, with the conditions on it: (rule index, condition)."""
    names: tuple[tuple[str, Path], ...]
    """Each argument name as the rules write it: what an approval's scope digests."""

    @classmethod
    def of(cls, rules: Sequence[Sequence[tuple[str, ArgMatch]]]) -> ArgPlan:
        parsed = tuple(tuple((parse(name), cond) for name, cond in rule) for rule in rules)
        by_path: dict[Path, list[tuple[int, ArgMatch]]] = {}
        for i, rule in enumerate(parsed):
            for path, cond in rule:
                by_path.setdefault(path, []).append((i, cond))
        names = sorted({(name, parse(name)) for rule in rules for name, _ in rule})
        return cls(parsed, tuple((p, tuple(c)) for p, c in by_path.items()), tuple(names))

    def first(self, args: Mapping[str, Any], ranks: Sequence[int], otherwise: int) -> int | None:
        """The index of the rule deciding the strictest one-value reading of ``args``
        (-1: none holds, ``otherwise`` decides); None when there are too many readings to
        judge. ``ranks``: each rule's strictness; ties go to the earlier rule."""
        groups: list[list[frozenset[int]]] = []
        met: dict[int, list[int]] = {i: [] for i in range(len(self.rules))}
        slot = 0
        everywhere = found(args, [path for path, _ in self.paths])
        for (_, conds), at in zip(self.paths, everywhere, strict=True):
            values = readings(at)
            seen: set[frozenset[int]] = set()
            for v in values or ("",):
                seen.add(
                    frozenset(slot + k for k, (_, c) in enumerate(conds) if values and c.one(v))
                )
            for k, (i, _) in enumerate(conds):
                met[i].append(slot + k)
            slot += len(conds)
            groups.append(sorted(seen, key=sorted))
        count = 1
        for g in groups:
            count *= len(g)
        if count > MAX_COMBINATIONS:
            return None
        best: tuple[int, bool, int] | None = None  # strictest; then a rule; then the first
        for combo in product(*groups):
            held = frozenset().union(*combo)
            i = next((i for i, needed in met.items() if held.issuperset(needed)), -1)
            key = (ranks[i] if i >= 0 else otherwise, i >= 0, -i)
            if best is None or key > best:
                best = key
        assert best is not None  # product() of non-empty groups yields at least one
        return -best[2] if best[1] else -1

    def holds(self, rule: int, args: Mapping[str, Any]) -> bool:
        """Whether some one-value reading of ``args`` meets every condition of ``rule``."""
        for path, cond in self.rules[rule]:
            if not any(cond.one(v) for v in readings(found(args, [path])[0])):
                return False
        return True

    def seen(self, args: Mapping[str, Any]) -> str:
        """What the rules see of ``args``, as text: every value found at each name."""
        everywhere = found(args, [path for _, path in self.names])
        seen = [
            [name, sorted(json.dumps(v, sort_keys=True, default=repr) for v in at)]
            for (name, _), at in zip(self.names, everywhere, strict=True)
        ]
        return json.dumps(seen, ensure_ascii=True)


__all__ = ["MAX_COMBINATIONS", "ArgMatch", "ArgPlan", "Path", "found", "parse", "readings"]
