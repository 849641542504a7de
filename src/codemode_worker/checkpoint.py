"""Checkpoints of a session's namespace, pickled and unpickled here, inside the worker.

The host never unpickles: it stores the bytes this module sends (``checkpoint.save``) and
hands them back (``checkpoint.load``) to a fresh worker, which restores them. Only the
standard library is used (``pickle``, ``marshal``), so the sandbox needs no extra package.
Plain pickle saves functions and classes by reference (``__main__.f``), which a fresh
worker cannot resolve; the pickler below saves what the session's code defined by value:

- functions defined in the session: code (``marshal``), defaults, closure, attributes;
  bound to the restored namespace (or to a copy of the globals they name);
- classes defined in the session (metaclass ``type`` or ``ABCMeta``) with their methods;
- modules by name (re-imported on restore), module-level singletons (``dataclasses.MISSING``)
  by name.

What cannot be saved (open files, sockets, locks, generators, threads, frames, objects
whose ``__reduce__`` refuses, classes with other metaclasses such as ``Enum``) is skipped
and listed by name with the reason; the rest is saved together, so shared references
between names stay shared. ``marshal`` ties a checkpoint to the Python version that wrote
it: restoring under another version is refused with both versions named.
"""

from __future__ import annotations

import abc
import gc
import importlib
import io
import json
import marshal
import pickle
import sys
import types
from typing import Any

from . import bridge
from .errors import CodemodeError

MAGIC = b"CMCKPT1\n"
PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"
_EMPTY = "__cm_empty_cell__"
_SKIP_NAMES = frozenset({"__builtins__", "__name__", "__doc__", "__cm_value__"})
_OWN = __name__.rsplit(".", 1)[0] + "."


class CheckpointError(CodemodeError):
    """A checkpoint could not be written or restored (too large, another Python...)."""


_target: dict[str, Any] | None = None  # the namespace a restore binds functions to


def _make_function(code: bytes, name: str, in_ns: bool, ncells: int) -> types.FunctionType:
    g: dict[str, Any] = _target if in_ns and _target is not None else {}
    closure = tuple(types.CellType() for _ in range(ncells)) or None
    return types.FunctionType(marshal.loads(code), g, name, None, closure)


def _set_function_state(f: types.FunctionType, state: dict[str, Any]) -> None:
    if state["globals"] is not None:
        f.__globals__.update(state["globals"])
        f.__globals__.setdefault("__builtins__", __builtins__)
    for cell, value in zip(f.__closure__ or (), state["cells"], strict=True):
        if not (isinstance(value, str) and value == _EMPTY):
            cell.cell_contents = value
    f.__defaults__ = state["defaults"]
    f.__kwdefaults__ = state["kwdefaults"]
    f.__qualname__ = state["qualname"]
    f.__module__ = state["module"]
    f.__doc__ = state["doc"]
    f.__annotations__ = state["annotations"]
    f.__dict__.update(state["dict"])


def _proxy(d: dict[str, Any]) -> types.MappingProxyType[str, Any]:
    return types.MappingProxyType(d)


def _make_class(meta: type, name: str, bases: tuple[type, ...], base: dict[str, Any]) -> type:
    cls: type = meta(name, bases, dict(base))
    return cls


def _set_class_state(cls: type, state: dict[str, Any]) -> None:
    for key, value in state.items():
        setattr(cls, key, value)
    if isinstance(cls, abc.ABCMeta):
        abc.update_abstractmethods(cls)  # type: ignore[arg-type]


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


class _Pickler(pickle.Pickler):
    """Saves the session's own functions and classes by value (see the module doc)."""

    def __init__(self, file: io.BytesIO, ns: dict[str, Any]) -> None:
        super().__init__(file, protocol=5)
        self._ns = ns
        self._singletons: dict[str, dict[int, str]] = {}

    def reducer_override(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is types.FunctionType:
            if obj.__globals__ is self._ns or obj.__module__ == "__main__":
                return self._function(obj)
            return NotImplemented
        if kind is types.ModuleType:
            return importlib.import_module, (obj.__name__,)
        if kind is types.MappingProxyType:  # dataclass fields' metadata
            return _proxy, (dict(obj),)
        if isinstance(obj, type):
            if obj.__module__ == "__main__":
                return self._class(obj)
            return NotImplemented
        return self._singleton(obj)

    def _function(self, f: types.FunctionType) -> Any:
        in_ns = f.__globals__ is self._ns
        g = None
        if not in_ns:
            names = _global_names(f.__code__)
            g = {k: v for k, v in f.__globals__.items() if k in names}
        cells = []
        for cell in f.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:
                cells.append(_EMPTY)
        state = {
            "globals": g,
            "cells": cells,
            "defaults": f.__defaults__,
            "kwdefaults": f.__kwdefaults__,
            "qualname": f.__qualname__,
            "module": f.__module__,
            "doc": f.__doc__,
            "annotations": f.__annotations__,
            "dict": f.__dict__,
        }
        args = (marshal.dumps(f.__code__), f.__name__, in_ns, len(cells))
        return _make_function, args, state, None, None, _set_function_state

    def _class(self, cls: type) -> Any:
        meta = type(cls)
        if meta not in (type, abc.ABCMeta):
            raise pickle.PicklingError(
                f"class {cls.__qualname__} has metaclass {meta.__qualname__}: only classes "
                "of metaclass type or ABCMeta defined in the session can be saved"
            )
        d = dict(cls.__dict__)
        for key in ("__dict__", "__weakref__", "_abc_impl"):
            d.pop(key, None)
        slots = d.get("__slots__", ())
        for slot in [slots] if isinstance(slots, str) else slots:
            d.pop(slot, None)
        base = {k: d.pop(k) for k in ("__slots__", "__module__", "__qualname__") if k in d}
        args = (meta, cls.__name__, cls.__bases__, base)
        return _make_class, args, d, None, None, _set_class_state

    def _singleton(self, obj: Any) -> Any:
        """``getattr(module, name)`` for an object its type's module holds by name."""
        modname = type(obj).__module__
        if modname in ("builtins", "__main__") or modname.startswith(_OWN):
            return NotImplemented
        table = self._singletons.get(modname)
        if table is None:
            module = sys.modules.get(modname)
            table = {}
            if module is not None:
                for attr, value in vars(module).items():
                    if not isinstance(value, type | types.FunctionType | types.ModuleType):
                        table.setdefault(id(value), attr)
            self._singletons[modname] = table
        found = table.get(id(obj))
        if found is None:
            return NotImplemented
        return getattr, (sys.modules[modname], found)


def _saveable(ns: dict[str, Any]) -> dict[str, Any]:
    """The user's names: not dunders, not what codemode installs (namespaces such as
    ``tools``, its exception classes): a fresh worker has those already."""
    return {
        k: v
        for k, v in ns.items()
        if k not in _SKIP_NAMES
        and not (k.startswith("__") and k.endswith("__"))
        and not type(v).__module__.startswith(_OWN)
        and not str(getattr(v, "__module__", "")).startswith(_OWN)
    }


class _GcPaused:
    """The cyclic GC off while (un)pickling: it would scan the young objects again and
    again as millions are made (3x the time of a 50 MB restore of small dicts)."""

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was:
            gc.enable()


def _dump(values: dict[str, Any], ns: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    with _GcPaused():
        _Pickler(buf, ns).dump(values)
    return buf.getvalue()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _problem(name: str, value: Any, ns: dict[str, Any]) -> str | None:
    """Why ``value`` cannot be saved, or None when it can."""
    try:
        _dump({name: value}, ns)
    except Exception as exc:  # noqa: BLE001 - any failure means "cannot be saved"
        return f"{type(exc).__name__}: {_reason(exc)}"
    return None


_last_skipped: set[str] = set()
"""Names the last checkpoint could not save: tried alone first next time (usually a lock
or a file, refused at once), so a namespace with one of them is not pickled three times."""


def dumps(ns: dict[str, Any]) -> tuple[bytes, list[str], dict[str, str]]:
    """The namespace as checkpoint bytes, the names saved, and {name: why} of those not."""
    global _last_skipped
    values = _saveable(ns)
    skipped: dict[str, str] = {}
    for name in _last_skipped & set(values):
        why = _problem(name, values[name], ns)
        if why is not None:
            skipped[name] = why
            del values[name]
    try:
        body = _dump(values, ns)
    except Exception:  # noqa: BLE001 - find the names that cannot be saved, keep the rest
        for name, value in list(values.items()):
            why = _problem(name, value, ns)
            if why is not None:
                skipped[name] = why
                del values[name]
        body = _dump(values, ns)
    _last_skipped = set(skipped)
    header = json.dumps({"python": PYTHON, "names": sorted(values)}).encode()
    return MAGIC + header + b"\n" + body, sorted(values), skipped


def loads(data: bytes, ns: dict[str, Any]) -> list[str]:
    """Restore a checkpoint into ``ns``; returns the names restored."""
    global _target
    if not data.startswith(MAGIC):
        raise CheckpointError("this is not a codemode checkpoint")
    end = data.index(b"\n", len(MAGIC))
    header = json.loads(data[len(MAGIC) : end])
    if header.get("python") != PYTHON:
        raise CheckpointError(
            f"this checkpoint was written by Python {header.get('python')}; this worker runs "
            f"Python {PYTHON}: restore it with the same Python version"
        )
    _target = ns
    try:
        with _GcPaused():
            values = pickle.loads(memoryview(data)[end + 1 :])
    finally:
        _target = None
    ns.update(values)
    return sorted(values)


def save_to_host(ns: dict[str, Any], max_bytes: int) -> None:
    """Pickle ``ns`` and send it to the host (which stores it for this session)."""
    data, names, skipped = dumps(ns)
    if max_bytes and len(data) > max_bytes:
        raise CheckpointError(
            f"the checkpoint is {len(data):,} bytes, over the limit of {max_bytes:,} "
            "(checkpoint.max_mb); delete large variables or raise the limit",
            size=len(data),
            limit=max_bytes,
        )
    bridge.call(
        "checkpoint.save", {"data": data, "names": names, "skipped": skipped, "python": PYTHON}
    )


def restore_from_host(ns: dict[str, Any]) -> None:
    """Fetch this session's checkpoint from the host and restore it into ``ns``."""
    data = bridge.call("checkpoint.load", {})
    if not isinstance(data, bytes):
        raise CheckpointError("the host sent no checkpoint")
    bridge.call("checkpoint.restored", {"names": loads(data, ns)})
