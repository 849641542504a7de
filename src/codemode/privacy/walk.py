"""Walk a JSON-like value without recursion, and rewrite its strings copy-on-write.

``Leaves.collect(value)`` lists every string in ``value`` (dict keys included, UTF-8
text inside ``bytes`` and ``Blob`` data too), at any depth, with an explicit stack: a
result nested 100,000 levels deep costs time, not a ``RecursionError``. ``apply`` builds
the new value: only the containers on the path to a changed string are copied, so an
object a Python tool returned (and may still hold) is never modified.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codemode_worker.protocol import Blob

__all__ = ["Applier", "Leaves"]

# Leaf kinds
TEXT, KEY, BYTES, BLOB, LATIN1, BLOB_LATIN1 = 0, 1, 2, 3, 4, 5
_BIG_INT = 10**11  # ints of 12+ digits are checked too (a card number stored as an int)


@dataclass
class Leaves:
    """The strings of a value (``texts``, in order) and where each lies.

    Per string only its key in its container is kept (``keys``): the strings of one
    container's loop (a dict's keys and string values, a list's leading strings) are one
    *segment*, whose first string's index is in ``segments`` and whose container is in
    ``segment_nodes``. In a dict's segment a string is its key when it is the segment's
    first or when the string before it has another key (a value's key is the very
    object the key string before it is: dict keys are distinct), and a value otherwise.
    Any other kind (a string on its own, bytes, a value under a key that is no string)
    is in ``kinds``. Two appends per string instead of four: the walk of a 10 MB result
    was a sixth of its scan."""

    root: Any
    texts: list[str] = field(default_factory=list)
    keys: list[Any] = field(default_factory=list)
    segments: list[int] = field(default_factory=list)
    segment_nodes: list[int] = field(default_factory=list)
    kinds: dict[int, int] = field(default_factory=dict)
    """{index: kind} of the strings whose kind their segment does not tell."""
    # per node: (parent node index, key in the parent, the container)
    nodes: list[tuple[int, Any, Any]] = field(default_factory=list)
    binary: int = 0
    """Bytes of binary data that are not text and were not scanned."""
    chars: int = 0

    @classmethod
    def collect(cls, value: Any) -> Leaves:
        out = cls(value)
        if isinstance(value, str):  # the common case of a text result: no walk
            out.nodes.append((-1, None, [value]))
            out.texts.append(value)
            out.keys.append(0)
            out.segments.append(0)
            out.segment_nodes.append(0)
            out.kinds[0] = TEXT
            out.chars = len(value)
            return out
        holder = [value]
        nodes = out.nodes
        nodes.append((-1, None, holder))
        stack: list[tuple[Any, int, Any]] = [(value, 0, 0)]
        texts, kinds = out.texts, out.kinds
        add_text, add_key = texts.append, out.keys.append
        add_segment, add_segment_node = out.segments.append, out.segment_nodes.append
        # Exact type checks first (``type(x) is str``): several times cheaper than
        # isinstance over the many small leaves of a JSON result; subclasses fall through
        # to the isinstance branches.
        while stack:
            v, parent, key = stack.pop()
            tv = type(v)
            # (dict and list first: what a JSON result holds, with no isinstance call)
            if tv is dict:
                node = len(nodes)
                nodes.append((parent, key, v))
                add_segment(len(texts))
                add_segment_node(node)
                later = []
                for k, item in v.items():
                    if type(k) is str or isinstance(k, str):
                        add_text(k)
                        add_key(k)
                    elif type(item) is str or isinstance(item, str):
                        kinds[len(texts)] = TEXT  # (no key string before it)
                    t = type(item)
                    if t is str:  # right after its key: "phone" is context
                        add_text(item)
                        add_key(k)
                    elif t is list or t is dict:
                        later.append((item, node, k))
                    elif (
                        item is None
                        or t is float
                        or t is bool
                        or (t is int and -_BIG_INT < item < _BIG_INT)
                    ):
                        continue
                    elif isinstance(item, str):
                        add_text(item)
                        add_key(k)
                    elif not _small_number(item):
                        later.append((item, node, k))
                if later:
                    stack.extend(reversed(later))
            elif tv is not list and not isinstance(v, str) and isinstance(v, Mapping):
                # Any other mapping (rare): each string's kind said, not inferred (its
                # ``items`` may not be a dict's).
                node = len(nodes)
                nodes.append((parent, key, v))
                add_segment(len(texts))
                add_segment_node(node)
                later = []
                for k, item in v.items():
                    if isinstance(k, str):
                        kinds[len(texts)] = KEY
                        add_text(k)
                        add_key(k)
                    if isinstance(item, str):
                        kinds[len(texts)] = TEXT
                        add_text(item)
                        add_key(k)
                    elif not _small_number(item):
                        later.append((item, node, k))
                if later:
                    stack.extend(reversed(later))
            elif tv is list or (not isinstance(v, str) and isinstance(v, list | tuple)):
                node = len(nodes)
                nodes.append((parent, key, v))
                add_segment(len(texts))
                add_segment_node(node)
                n = len(v)
                for i in range(n):  # leading strings and scalars at once, in order
                    item = v[i]
                    t = type(item)
                    if t is str:
                        add_text(item)
                        add_key(i)
                    elif not (
                        item is None
                        or t is float
                        or t is bool
                        or (t is int and -_BIG_INT < item < _BIG_INT)
                    ):
                        stack.extend((v[j], node, j) for j in range(n - 1, i - 1, -1))
                        break
            else:  # a string on its own (its own segment), bytes, a big int
                if tv is str or isinstance(v, str):
                    leaf, kind = v, TEXT
                elif isinstance(v, bytes | bytearray | Blob):
                    data = bytes(v.data if isinstance(v, Blob) else v)
                    leaf, latin1 = _as_text(data)
                    if leaf is None:
                        out.binary += len(data)
                        continue
                    if isinstance(v, Blob):
                        kind = BLOB_LATIN1 if latin1 else BLOB
                    else:
                        kind = LATIN1 if latin1 else BYTES
                elif isinstance(v, int) and not isinstance(v, bool) and abs(v) >= _BIG_INT:
                    leaf, kind = str(v), TEXT
                else:
                    continue
                add_segment(len(texts))
                add_segment_node(parent)
                kinds[len(texts)] = kind
                add_text(leaf)
                add_key(key)
        out.chars = sum(map(len, texts))
        return out

    def apply(self, new_texts: list[str]) -> Any:
        """The value with ``texts[i]`` replaced by ``new_texts[i]`` where they differ."""
        return self.apply_changes(
            {
                i: new
                for i, (old, new) in enumerate(zip(self.texts, new_texts, strict=True))
                if old is not new and old != new
            }
        )

    def apply_changes(self, changes: Mapping[int, str]) -> Any:
        """The value with ``texts[i]`` replaced by ``changes[i]`` (only those are visited)."""
        if not changes:
            return self.root
        applier = Applier(self)
        applier.add(changes)
        return applier.done()


class Applier:
    """``Leaves.apply_changes`` in batches: each batch is written into the copies of the
    containers as it comes, so the changes of one part of a large result are written
    while the scanner process scans the next (``Privacy.protect``). A text's change must
    come once, with its final value (or again with a later one, which wins); ``done``
    gives the new value."""

    def __init__(self, leaves: Leaves) -> None:
        self.leaves = leaves
        self.reset()

    def reset(self) -> None:
        """Forget every change written so far (the value is as ``leaves`` found it)."""
        self.copies: dict[int, Any] = {}
        self.renames: dict[int, dict[str, str]] = {}
        # The segment walk's place (see ``add``), kept from one batch to the next.
        self._at: tuple[int, int, int, int, bool, Any] = (-1, 0, -1, 0, False, None)

    def _copy(self, node: int) -> Any:
        """The copy of ``node``, made (with its ancestors) on first use; no recursion."""
        copies, nodes = self.copies, self.leaves.nodes
        got = copies.get(node)
        if got is not None:
            return got
        path = []
        while node not in copies and node >= 0:
            path.append(node)
            node = nodes[node][0]
        for n in reversed(path):
            parent, key, container = nodes[n]
            dup: Any = dict(container) if isinstance(container, Mapping) else list(container)
            copies[n] = dup
            if parent >= 0:
                copies[parent][key] = dup
        return copies[path[0]]

    def add(self, changes: Mapping[int, str]) -> None:
        """Write ``changes`` ({index: new text}) into the copies."""
        leaves, copies, renames, copy = self.leaves, self.copies, self.renames, self._copy
        texts, nodes, keys, kinds = leaves.texts, leaves.nodes, leaves.keys, leaves.kinds
        segments, segment_nodes = leaves.segments, leaves.segment_nodes
        last = len(segments) - 1
        # The segment of each change, found by a walk along the segments (the changes
        # come in order, most often: a search per change when one goes back), and the
        # copy of its container, looked up once per segment.
        s, lo, hi, node, mapping, target = self._at
        for i, new in changes.items():
            if new == texts[i]:
                continue
            if not lo <= i < hi:
                if i < lo or i >= hi + 64:
                    s = bisect.bisect_right(segments, i) - 1
                else:
                    while s < last and segments[s + 1] <= i:
                        s += 1
                lo = segments[s]
                hi = segments[s + 1] if s < last else len(texts)
                node = segment_nodes[s]
                mapping = type(nodes[node][2]) is dict
                target = copies.get(node)
            key = keys[i]
            if mapping and i != lo and keys[i - 1] is key:
                kind = TEXT  # a dict's value, right after its key (most changes)
            else:
                got = kinds.get(i)
                kind = got if got is not None else KEY if mapping else TEXT
            if kind == KEY:
                target = copy(node)
                renames.setdefault(node, {})[key] = new
                continue
            if target is None:
                parent, pkey, container = nodes[node]
                up = copies.get(parent)
                if up is not None:  # the common case: a row of a list already copied
                    target = copies[node] = (
                        dict(container) if type(container) is dict else copy(node)
                    )
                    up[pkey] = target
                else:
                    target = copy(node)
            if kind == TEXT:
                target[key] = new
                continue
            current = target[key]
            if kind in (BYTES, LATIN1):
                target[key] = new.encode("utf-8" if kind == BYTES else "latin-1")
            elif kind in (BLOB, BLOB_LATIN1):
                data = new.encode("utf-8" if kind == BLOB else "latin-1")
                target[key] = Blob(data, current.mime_type, current.kind, current.uri)
            else:
                target[key] = new
        self._at = (s, lo, hi, node, mapping, target)

    def done(self) -> Any:
        """The new value (``leaves.root`` itself when nothing changed)."""
        copies = self.copies
        # Renamed keys: rebuild those dicts in place (their parents already point at them).
        for node, names in self.renames.items():
            d = copies[node]
            items = list(d.items())
            d.clear()
            d.update((names.get(k, k), v) for k, v in items)
        return copies[0][0] if 0 in copies else self.leaves.root


def _small_number(item: object) -> bool:
    """None, a bool, a float or an int of up to 11 digits: nothing to scan."""
    if item is None:
        return True
    if isinstance(item, int):
        return abs(item) < _BIG_INT
    return isinstance(item, float)


_CONTROL = bytes(c for c in range(32) if c not in (9, 10, 13)) + b"\x7f"


def _as_text(data: bytes) -> tuple[str | None, bool]:
    """(``data`` as text, whether it was read as Latin-1); (None, False) for binary.

    UTF-8 first; text in another 8-bit encoding (no control characters) is read as
    Latin-1, which maps every byte to one character and back, so the ASCII values
    detectors find are replaced and every other byte is written back unchanged.
    """
    if b"\x00" in data:
        return None, False
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        pass
    if data.translate(None, _CONTROL) != data:
        return None, False
    return data.decode("latin-1"), True
