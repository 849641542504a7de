"""The walk of a value (``codemode.privacy.walk``): whatever strings change, the new value
holds exactly those changes, keys renamed in place, and the old value is untouched."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator, Mapping
from typing import Any

from codemode.privacy.walk import Applier, Leaves, _as_text
from codemode_worker.protocol import Blob


class _Str(str):
    pass


class _Rows(Mapping[Any, object]):
    """A mapping that is no dict (a tool's own record type)."""

    def __init__(self, data: dict[Any, object]) -> None:
        self._data = data

    def __getitem__(self, key: Any) -> object:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rows) and self._data == other._data

    __hash__ = None  # type: ignore[assignment]


def _leaf(rng: random.Random, i: int) -> object:
    return rng.choice(
        [
            f"s{i}",
            f"s{i}",
            _Str(f"sub{i}"),
            i,
            10**12 + i,
            None,
            True,
            1.5,
            f"b{i}".encode(),
            Blob(f"blob{i}".encode(), "text/plain"),
            b"\x00binary",
        ]
    )


def _value(rng: random.Random, depth: int, counter: list[int]) -> object:
    counter[0] += 1
    i = counter[0]
    if depth == 0 or rng.random() < 0.3:
        return _leaf(rng, i)
    n = rng.randrange(0, 5)
    kind = rng.randrange(4)
    if kind == 0:  # a dict, some keys no strings
        keys = [f"k{i}_{j}" if rng.random() < 0.85 else j for j in range(n)]
        return {k: _value(rng, depth - 1, counter) for k in keys}
    if kind == 1:
        return _Rows({f"m{i}_{j}": _value(rng, depth - 1, counter) for j in range(n)})
    items = [_value(rng, depth - 1, counter) for _ in range(n)]
    return items if kind == 2 else tuple(items)


def _in_order(v: object) -> list[str]:
    """The walk's order, recursively: a mapping's keys and strings first, then what it
    holds that is neither (in order, each whole); a sequence's items in order."""
    if isinstance(v, str):
        return [v]
    if isinstance(v, Mapping):
        out: list[str] = []
        later = []
        for k, item in v.items():
            if isinstance(k, str):
                out.append(k)
            if isinstance(item, str):
                out.append(item)
            else:
                later.append(item)
        return out + [t for item in later for t in _in_order(item)]
    if isinstance(v, list | tuple):
        return [t for item in v for t in _in_order(item)]
    if isinstance(v, bytes | Blob):
        text, _ = _as_text(v.data if isinstance(v, Blob) else v)
        return [] if text is None else [text]
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**11:
        return [str(v)]
    return []


def test_strings_are_collected_depth_first_a_dicts_own_strings_before_what_it_nests() -> None:
    rng = random.Random(3)
    for _ in range(400):
        value = _value(rng, 5, [0])
        assert Leaves.collect(value).texts == _in_order(value)
    rows = [{"id": "a", "ids": ["x", "y"], "tags": [], "more": [1, ["z"], "w"], "n": "b"}] * 2
    expected = ["id", "a", "ids", "tags", "more", "n", "b", "x", "y", "z", "w"]
    assert Leaves.collect(rows).texts == expected * 2
    assert Leaves.collect(rows).texts == _in_order(rows)


def test_changed_strings_land_where_they_were_and_nothing_else_moves() -> None:
    rng = random.Random(7)
    for _ in range(400):
        value = _value(rng, 4, [0])
        before = copy.deepcopy(value)
        leaves = Leaves.collect(value)
        texts = leaves.texts
        # (not a big int's digits: a string in its place is walked with the strings)
        picked = [i for i, t in enumerate(texts) if not t.isdigit() and rng.random() < 0.5]
        if rng.random() < 0.3:
            rng.shuffle(picked)  # changes out of order too
        changes = {i: f"<{i}>" for i in picked}
        out = leaves.apply_changes(changes)
        assert value == before  # copy on write: the old value is untouched
        expected = [changes.get(i, t) for i, t in enumerate(texts)]
        assert Leaves.collect(out).texts == expected
        if not changes:
            assert out is value


def test_changes_written_in_batches_give_the_value_one_batch_gives() -> None:
    """``Applier``: the engine writes the held values' changes and each part's as they
    come (in any order, a text again with a later value, after a reset afresh)."""
    rng = random.Random(11)
    for _ in range(400):
        value = _value(rng, 4, [0])
        before = copy.deepcopy(value)
        leaves = Leaves.collect(value)
        texts = leaves.texts
        picked = [i for i, t in enumerate(texts) if not t.isdigit() and rng.random() < 0.5]
        changes = {i: f"<{i}>" for i in picked}
        expected = leaves.apply_changes(changes)
        applier = Applier(leaves)
        if rng.random() < 0.2:  # written, then forgotten (the engine's crossing values)
            applier.add({i: "<old>" for i in picked})
            applier.reset()
        order = list(changes.items())
        if rng.random() < 0.5:
            rng.shuffle(order)
        stale = [(i, "<stale>") for i, _ in order if rng.random() < 0.2]
        order = stale + order  # a later value wins
        cuts = sorted(rng.sample(range(len(order) + 1), min(3, len(order) + 1)))
        for a, b in zip([0, *cuts], [*cuts, len(order)], strict=True):
            applier.add(dict(order[a:b]))
        out = applier.done()
        assert value == before
        assert out == expected
        assert Leaves.collect(out).texts == Leaves.collect(expected).texts
        assert (out is value) == (expected is value)


def test_a_dict_key_equal_to_its_value_is_renamed_and_its_value_replaced_apart() -> None:
    value = [{"a": "a", "x": "a"}, {1: "a", "b": "b"}]
    leaves = Leaves.collect(value)
    assert leaves.texts == ["a", "a", "x", "a", "a", "b", "b"]
    out = leaves.apply_changes({0: "K", 3: "V", 4: "W", 5: "B"})
    assert out == [{"K": "a", "x": "V"}, {1: "W", "B": "b"}]
