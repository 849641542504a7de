"""The small expression language of workflow files: ``${count > 3 and item["ok"]}``.

Why not ``eval``: a workflow's expressions run on the host, in the engine, with results of
tools (data from anywhere) in scope. ``eval`` (even with empty builtins) hands out Python
objects whose attributes lead back to the interpreter. Why not a library: the sandboxes
of such libraries have a history of escapes, and what workflows need is small.

So: Python's own parser (``ast.parse(mode="eval")``, which only parses) and an evaluator
of our own over a whitelist of node kinds, on JSON values only:

- literals (numbers, strings, ``true``/``false``/``null`` and Python's spellings), lists,
  dicts; names bound by earlier steps, ``inputs``, the loop variable, ``run``;
- ``a.b`` and ``a["b"]``/``a[0]``/``a[1:3]`` read keys and items of dicts, lists and
  strings (never attributes of objects: there are none);
- ``+ - * / // %``, comparisons (chains too), ``in``/``not in``, ``and``/``or``/``not``,
  ``x if c else y``;
- calls of a fixed set of functions: ``len str int float bool abs min max sum round
  sorted lower upper strip split join keys values items range``.

Limits: 2,000 characters and 50 levels of nesting per expression; strings and lists made
by ``*`` or ``+``, and the text ``str``/``join`` make, at most 1,000,000 items/characters
(what they print to: ``[[1] * 4000] * 4000`` is 16,000,000, weighed in the time of its
two distinct lists);
integers at most 65,536 bits; ``%`` on numbers only; ``sum`` of numbers only; a computed
value (not a plain read such as ``x.a[0]``) at most 10,000,000 items and characters, so
that ``[x, x, x]`` of a big ``x`` cannot grow into gigabytes; and at most 20,000,000
items read, built, compared or sorted in all (``MAX_WORK``), so that an expression
cannot hold the engine's event loop (the server's, on ``codemode serve``) for seconds.
What one ``render`` (a step's arguments, its text) makes is at most 10,000,000 in all.
Anything else is a ``WorkflowError`` naming the expression.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from .errors import WorkflowError

MAX_LENGTH = 2000
MAX_DEPTH = 50
MAX_SIZE = 1_000_000
MAX_BITS = 65_536
MAX_RESULT = 10 * MAX_SIZE
MAX_WORK = 20 * MAX_SIZE

_CONSTANTS = {"true": True, "false": False, "null": None, "none": None}
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class _Weights:
    """What values print to (characters and items, shared references counted each time:
    ``[s] * 1000`` weighs ``1000 * len(s)``), memoized per object for one expression or
    one rendered step. A value made of shared references, ``[[1] * 4000] * 4000``, is
    weighed in the time of its distinct parts (two lists), not of the 16,000,000 items it
    prints to: walking those item by item held the event loop for seconds."""

    __slots__ = ("_memo", "_walked")

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, int]] = {}  # id -> (the value, kept alive; weight)
        self._walked = 0

    def of(self, value: Any) -> int:
        one = _scalar(value)
        if one is not None:
            return one
        memo = self._memo
        got = memo.get(id(value))
        if got is not None:
            return got[1]
        stack: list[tuple[Any, bool]] = [(value, False)]
        while stack:
            v, ready = stack.pop()
            if id(v) in memo:
                continue
            parts = _parts(v)
            if ready:
                memo[id(v)] = (v, 1 + sum(self._known(p) for p in parts))
                continue
            self._walked += len(parts)
            if self._walked > MAX_RESULT:  # this many distinct parts print to more
                _too_big()
            stack.append((v, True))
            stack.extend((p, False) for p in parts if _scalar(p) is None and id(p) not in memo)
        return memo[id(value)][1]

    def _known(self, part: Any) -> int:
        one = _scalar(part)
        if one is not None:
            return one
        got = self._memo.get(id(part))
        if got is None:  # only a value that contains itself (never JSON) gets here
            raise WorkflowError("a value contains itself")
        return got[1]

    def check(self, value: Any, limit: int = MAX_SIZE) -> Any:
        if self.of(value) > limit:
            _too_big()
        return value


def _scalar(value: Any) -> int | None:
    """The weight of a value that holds no other, or None for a list, tuple or dict."""
    if isinstance(value, str):
        return 1 + len(value)
    if isinstance(value, list | tuple | dict):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return 1 + value.bit_length() // 3
    return 1


def _parts(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    return list(value)


def _join(sep: Any, items: Any, weights: _Weights | None = None) -> str:
    weights = weights or _Weights()
    items = list(items)
    text = str(weights.check(sep))
    if (len(items) - 1) * (1 + len(text)) + weights.of(items) > MAX_SIZE:
        _too_big()
    return text.join(str(i) for i in items)


def _str(value: Any = "", weights: _Weights | None = None) -> str:
    return str((weights or _Weights()).check(value))


def _sum(items: Any, start: Any = 0) -> Any:
    """Numbers only: ``sum`` of lists or strings would build big values quadratically."""
    values = [*list(items), start]
    if not all(isinstance(v, int | float) for v in values):
        raise WorkflowError("sum adds numbers only")
    return sum(values[:-1], start)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len,
    "str": _str,
    "int": int,
    "float": float,
    "bool": bool,
    "abs": abs,
    "min": min,
    "max": max,
    "sum": _sum,
    "round": round,
    "sorted": sorted,
    "lower": lambda s: str(s).lower(),
    "upper": lambda s: str(s).upper(),
    "strip": lambda s: str(s).strip(),
    "split": lambda s, sep=None: str(s).split(sep),
    "join": _join,
    "keys": lambda d: list(d.keys()),
    "values": lambda d: list(d.values()),
    "items": lambda d: [list(kv) for kv in d.items()],
    "range": lambda *a: list(range(*a)) if len(range(*a)) <= MAX_SIZE else _too_big(),
}

_WEIGHED = frozenset({"str", "join"})
"""Functions that check the size of what they would print (given the expression's
weights, so repeated checks of shared parts cost nothing)."""
_SCANS = frozenset(
    {"str", "min", "max", "sum", "sorted", "lower", "upper", "strip", "split", "join"}
    | {"keys", "values", "items"}
)
"""Functions whose time grows with their arguments (``len``, ``bool``... do not)."""

_TEMPLATE = re.compile(r"\$\{((?:[^{}\"']|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|\{[^{}]*\})*)\}")


def _too_big() -> Any:
    raise WorkflowError(f"a value would have more than {MAX_SIZE} items")


@lru_cache(maxsize=4096)
def parse(text: str) -> ast.expr:
    """The checked syntax tree of one expression (cached: workflows repeat them)."""
    if len(text) > MAX_LENGTH:
        raise WorkflowError(f"expression longer than {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise WorkflowError(f"invalid expression {text!r}: {exc.msg}") from None
    _check(tree, 0, text)
    return tree


_ALLOWED = (
    ast.Constant, ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.List, ast.Tuple,
    ast.Dict, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.Load,
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)  # fmt: skip


def _check(node: ast.AST, depth: int, text: str) -> None:
    if depth > MAX_DEPTH:
        raise WorkflowError(f"expression {text!r} is nested too deeply")
    if not isinstance(node, _ALLOWED) or isinstance(node, ast.Pow | ast.MatMult):
        raise WorkflowError(f"{type(node).__name__} is not allowed in expression {text!r}")
    if isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
        raise WorkflowError(f"operator {type(node.op).__name__} is not allowed in {text!r}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
            raise WorkflowError(
                f"only these functions can be called, with positional arguments: "
                f"{', '.join(sorted(FUNCTIONS))} (in {text!r})"
            )
        for arg in node.args:
            _check(arg, depth + 1, text)
        return
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        raise WorkflowError(f"names starting with '_' cannot be read (in {text!r})")
    for child in ast.iter_child_nodes(node):
        _check(child, depth + 1, text)


def evaluate(text: str, scope: Mapping[str, Any]) -> Any:
    """The value of expression ``text`` with ``scope``'s names."""
    return _evaluate(text, scope, _Weights())[0]


def _evaluate(text: str, scope: Mapping[str, Any], weights: _Weights) -> tuple[Any, bool]:
    """The value, and whether it is one of ``scope``'s as it is (a plain read)."""
    try:
        tree = parse(text)
        value = _eval(tree, scope, _Work(text, weights))
        read = _reads_only(tree)
        if not read:  # e.g. [x, x, x, ...] of a big x: a value far bigger than its parts
            weights.check(value, MAX_RESULT)
        return value, read
    except WorkflowError:
        raise
    # Every error a whitelisted operation or function can raise on JSON values: an
    # OverflowError (int(float('inf'))) or AttributeError (keys(1)) must fail the step
    # like the others, not escape the engine and leave its run "running" for ever.
    except (TypeError, ValueError, KeyError, IndexError, ArithmeticError, AttributeError) as exc:
        raise WorkflowError(f"expression {text!r} failed: {type(exc).__name__}: {exc}") from None


def _reads_only(node: ast.AST) -> bool:
    """``a``, ``a.b``, ``a[0]``, ``a["k"]``: the value is one already in scope."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return False
        node = node.value
    return isinstance(node, ast.Name)


def _eval(node: ast.AST, scope: Mapping[str, Any], work: _Work) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        low = node.id.lower()
        if low in _CONSTANTS:
            return _CONSTANTS[low]
        raise WorkflowError(f"unknown name {node.id!r} (known: {', '.join(sorted(scope))})")
    if isinstance(node, ast.Attribute):
        return _item(_eval(node.value, scope, work), node.attr)
    if isinstance(node, ast.Subscript):
        base = _eval(node.value, scope, work)
        if isinstance(node.slice, ast.Slice):
            parts = [_eval(p, scope, work) if p is not None else None
                     for p in (node.slice.lower, node.slice.upper, node.slice.step)]  # fmt: skip
            if not isinstance(base, list | str):
                raise WorkflowError("only lists and strings can be sliced")
            return work.spend(base[slice(*parts)])
        return _item(base, _eval(node.slice, scope, work))
    if isinstance(node, ast.List | ast.Tuple):
        return [_eval(e, scope, work) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {
            _eval(k, scope, work): _eval(v, scope, work)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, scope, work), _eval(node.right, scope, work)
        _check_size(node.op, left, right, work.weights)
        work.spend(left, right)
        return work.spend(_BINOPS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, scope, work)
        if isinstance(node.op, ast.Not):
            return not value
        if isinstance(node.op, ast.USub):
            return -value
        if isinstance(node.op, ast.UAdd):
            return +value
        raise WorkflowError("~ is not allowed")
    if isinstance(node, ast.BoolOp):
        result: Any = None
        for value_node in node.values:
            result = _eval(value_node, scope, work)
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, scope, work)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, scope, work)
            work.charge(_compare_cost(op, left, right))
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, scope, work) else node.orelse, scope, work)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args = [_eval(a, scope, work) for a in node.args]
        if node.func.id in _SCANS:
            work.spend(*args)
        if node.func.id == "range":  # charged before it is built
            work.spend(range(*args) if all(isinstance(a, int) for a in args) else 0)
        function = FUNCTIONS[node.func.id]
        if node.func.id in _WEIGHED:
            result = function(*args, weights=work.weights)
        else:
            result = function(*args)
        if isinstance(result, list | str) and len(result) > MAX_SIZE:
            _too_big()
        return work.spend(result)
    raise WorkflowError(f"{type(node).__name__} is not allowed")


class _Work:
    """The items one expression may still touch (``MAX_WORK``): each operation spends
    the lengths of what it reads and builds (a comparison of two lists, a sort, a
    ``range``). Sizes alone did not bound time: sixty ``range(1000000) ==
    range(1000000)`` fit in 2,000 characters and held the server's event loop for
    seconds, every time a step (or each iteration of a ``foreach``) evaluated them."""

    __slots__ = ("left", "text", "weights")

    def __init__(self, text: str, weights: _Weights) -> None:
        self.left = MAX_WORK
        self.text = text
        self.weights = weights

    def spend(self, *values: Any) -> Any:
        """Charge the sizes of ``values``; returns the last one."""
        self.charge(sum(_length(v) for v in values))
        return values[-1] if values else None

    def charge(self, items: int) -> None:
        self.left -= items
        if self.left < 0:
            raise WorkflowError(
                f"expression {self.text[:200]!r} does too much work (more than {MAX_WORK:,} "
                "items read, built, compared or sorted): split it into steps, or do it in a "
                "code step"
            )


def _length(value: Any) -> int:
    return len(value) if isinstance(value, list | str | dict | range) else 1


def _compare_cost(op: ast.cmpop, left: Any, right: Any) -> int:
    """What a comparison may read: ``in`` scans its right side; ``==`` and order compare
    as far as the shorter side."""
    if isinstance(op, ast.In | ast.NotIn):
        return _length(left) + _length(right)
    return min(_length(left), _length(right))


def _item(base: Any, key: Any) -> Any:
    if isinstance(base, dict):
        if key not in base:
            raise WorkflowError(f"no key {key!r} (keys: {', '.join(map(str, list(base)[:20]))})")
        return base[key]
    if isinstance(base, list | str) and isinstance(key, int) and not isinstance(key, bool):
        return base[key]
    raise WorkflowError(f"cannot read {key!r} of a {type(base).__name__}")


def _check_size(op: ast.operator, left: Any, right: Any, weights: _Weights) -> None:
    if isinstance(op, ast.Mod) and not (
        isinstance(left, int | float) and isinstance(right, int | float)
    ):
        raise WorkflowError("% works on numbers only (no string formatting)")
    numbers = isinstance(left, int) and isinstance(right, int)
    if isinstance(op, ast.Mult) and numbers and left.bit_length() + right.bit_length() > MAX_BITS:
        _too_big()
    if isinstance(op, ast.Mult):
        seq, n = (left, right) if isinstance(left, list | str) else (right, left)
        if isinstance(seq, list | str) and isinstance(n, int) and n > 0:
            # What the copies print to, not just how many items: [[1] * 4000] * 4000
            # has 4,000 items of 4,001 each.
            each = len(seq) if isinstance(seq, str) or n == 1 else weights.of(seq) - 1
            if max(len(seq), each) * n > MAX_SIZE:
                _too_big()
    sequences = isinstance(left, list | str) and isinstance(right, list | str)
    if isinstance(op, ast.Add) and sequences and len(left) + len(right) > MAX_SIZE:
        _too_big()


def render(value: Any, scope: Mapping[str, Any]) -> Any:
    """``value`` with every ``${expr}`` evaluated: a string that is exactly one ``${...}``
    becomes the expression's value (any type); other strings get the text of each value;
    lists and dicts are rendered item by item. ``$${`` is a literal ``${``.

    What one call renders is bounded as a whole (``MAX_RESULT``): each expression is
    bounded alone, but a step with thousands of them (``{a: "${x}", b: "${x}", ...}``,
    or ``"${x}${x}..."`` in one string) would otherwise hand its tool, its journal and
    ``json.dumps`` gigabytes. A plain read of a value counts once, as it is stored once."""
    return _Render(scope).value(value)


class _Render:
    __slots__ = ("left", "scope", "seen", "weights")

    def __init__(self, scope: Mapping[str, Any]) -> None:
        self.scope = scope
        self.weights = _Weights()
        self.left = MAX_RESULT
        self.seen: set[int] = set()

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            if "${" not in value:
                return value
            whole = _TEMPLATE.fullmatch(value)
            if whole is not None:
                return self._evaluate(whole.group(1))
            escaped = value.replace("$${", "\x00")
            out = _TEMPLATE.sub(lambda m: _text(self._evaluate(m.group(1))), escaped)
            return out.replace("\x00", "${")
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value

    def _evaluate(self, text: str) -> Any:
        value, read = _evaluate(text, self.scope, self.weights)
        if read and id(value) not in self.seen:
            self.seen.add(id(value))  # the first plain read of a stored value is free
            return value
        self.left -= self.weights.of(value)
        if self.left < 0:
            raise WorkflowError(
                f"the expressions of one step would make more than {MAX_RESULT:,} items "
                f"and characters in all (at {text[:200]!r}): split the step, or do it in a "
                "code step"
            )
        return value


def _text(value: Any) -> str:
    import json

    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def expressions(value: Any) -> list[str]:
    """Every ``${...}`` expression in ``value`` (for validation before a run)."""
    if isinstance(value, str):
        return [m.group(1) for m in _TEMPLATE.finditer(value.replace("$${", ""))]
    if isinstance(value, list):
        return [e for v in value for e in expressions(v)]
    if isinstance(value, dict):
        return [e for v in value.values() for e in expressions(v)]
    return []


__all__ = ["FUNCTIONS", "evaluate", "expressions", "parse", "render"]
