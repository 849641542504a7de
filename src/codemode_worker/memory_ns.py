"""``skills``, ``artifacts``, ``state`` and ``deps`` in the agent's namespace.

All four are thin clients of the host (``skills.*``, ``artifacts.*``... over the bridge),
except for running skills: the host only stores and hands out a skill's code; it runs
here, in the worker, in a fresh module namespace that also holds ``tools``, ``skills``,
``artifacts``, ``state`` and ``deps`` (so skills call tools and other skills). The
compiled module is cached by version: an unchanged skill costs one host round trip.

Standard library only.
"""

from __future__ import annotations

import builtins
import importlib
import linecache
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from . import bridge
from .errors import ValidationError
from .protocol import json_like_problem

if TYPE_CHECKING:
    import inspect

_List = list  # ``Skills.list`` and friends shadow the builtin inside the classes


def _check_json_like(value: Any, what: str) -> None:
    """Refuse values JSON would change (tuples, sets, non-str keys) before sending them."""
    problem = json_like_problem(value, what)
    if problem is not None:
        raise ValidationError(problem)


def _run_coroutine(coro: Any) -> Any:
    """Finish an async skill from synchronous code.

    Outside a running loop the session's loop (the one top-level ``await`` uses) runs it;
    inside a running loop (sync call from async code) a helper thread runs it, since the
    caller's loop cannot be re-entered.
    """
    import asyncio
    import warnings

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:
                loop = None
        if loop is not None and not loop.is_closed() and not loop.is_running():
            return loop.run_until_complete(coro)
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="codemode-skill", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _function_source(fn: Callable[..., Any]) -> str:
    """The source of a session-defined function, as a skill whose entry point is ``run``."""
    import inspect
    import re
    import textwrap

    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise ValidationError(
            f"cannot read the source of {fn!r} ({exc}); pass it as text"
        ) from None
    name = getattr(fn, "__name__", "run")
    if name != "run":
        header = re.compile(rf"^((?:async[ \t]+)?def[ \t]+){re.escape(name)}\b", re.M)
        src, n = header.subn(r"\1run", src, count=1)
        if n != 1:
            raise ValidationError(f"cannot find 'def {name}' in its source; pass it as text")
        src += f"\n\n{name} = run  # the function's original name, for recursion\n"
    return src


class SkillFunction:
    """``skills.<name>``: call it like the skill's ``run``; ``await .aio(...)`` in async code."""

    __slots__ = ("_name", "_skills")

    def __init__(self, skills: Skills, name: str) -> None:
        self._skills = skills
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._skills.invoke(self._name, *args, **kwargs)

    async def aio(self, *args: Any, **kwargs: Any) -> Any:
        return await self._skills.ainvoke(self._name, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<skill {self._name}: call skills.get({self._name!r}) for its description>"


class Skills:
    """Saved skills: ``search``, ``invoke`` (or ``skills.<name>(...)``), ``create``...

    Create one with ``skills.create(name, source, description)``: ``source`` defines
    ``run(...)`` (plain or async); it is checked on the host without running it.
    """

    def __init__(self, g: dict[str, Any]) -> None:
        self._g = g
        self._cache: dict[str, tuple[int, Callable[..., Any], inspect.Signature | None]] = {}

    # -- host calls --------------------------------------------------------------------
    def search(self, query: str, limit: int = 10) -> _List[dict[str, Any]]:
        """Skills ranked by relevance to ``query`` (name, description, parameters, code)."""
        return bridge.call("skills.search", {"query": query, "limit": limit})  # type: ignore[no-any-return]

    def list(self) -> _List[dict[str, Any]]:
        """Every skill's name, description, signature and version (no code)."""
        return bridge.call("skills.list", {})  # type: ignore[no-any-return]

    def get(self, name: str) -> dict[str, Any]:
        """One skill in full: description, parameters, code, notes, SKILL.md."""
        return bridge.call("skills.get", {"name": name})  # type: ignore[no-any-return]

    def create(
        self,
        name: str,
        source: str | Callable[..., Any],
        description: str = "",
        *,
        parameters: Mapping[str, Any] | _List[Any] | None = None,
        tags: _List[str] | None = None,
        notes: str = "",
        replace: bool = False,
    ) -> dict[str, Any]:
        """Save ``source`` (which defines ``run``) as skill ``name``; returns its summary.

        ``source`` may also be a function defined in this session: its code is saved
        with the function renamed to ``run``.
        """
        if callable(source):
            source = _function_source(source)
        params = {
            "name": name, "code": source, "description": description,
            "parameters": parameters, "tags": tags, "notes": notes, "replace": replace,
        }  # fmt: skip
        return bridge.call("skills.create", params)  # type: ignore[no-any-return]

    def update(self, name: str, **changes: Any) -> dict[str, Any]:
        """Change ``source``/``code``, ``description``, ``parameters``, ``tags`` or ``notes``."""
        if "source" in changes:
            changes["code"] = changes.pop("source")
        return bridge.call("skills.update", {"name": name, **changes})  # type: ignore[no-any-return]

    def delete(self, name: str) -> bool:
        self._cache.pop(name, None)
        return bool(bridge.call("skills.delete", {"name": name}))

    def rollback(self, name: str, version: int | None = None) -> dict[str, Any]:
        """Restore an earlier version (default: the previous one) as the newest version."""
        return bridge.call("skills.rollback", {"name": name, "version": version})  # type: ignore[no-any-return]

    def versions(self, name: str) -> _List[dict[str, Any]]:
        return bridge.call("skills.versions", {"name": name})  # type: ignore[no-any-return]

    # -- running -----------------------------------------------------------------------
    def _load(
        self, name: str, src: dict[str, Any]
    ) -> tuple[Callable[..., Any], inspect.Signature | None]:
        import inspect  # only when a skill runs: keeps worker start-up lean

        cached = self._cache.get(name)
        version = int(src["version"])
        if "code" not in src and cached is not None and cached[0] == version:
            return cached[1], cached[2]
        code = str(src["code"])
        filename = f"<skill {name} v{version}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
        module = types.ModuleType(f"skills.{name}")
        module.__dict__.update(
            {
                k: self._g[k]
                for k in ("tools", "skills", "artifacts", "state", "deps")
                if k in self._g
            }
        )
        module.__dict__["__builtins__"] = builtins
        exec(compile(code, filename, "exec", dont_inherit=True), module.__dict__)
        run = module.__dict__.get("run")
        if not callable(run):
            raise ValidationError(f"skill {name!r} v{version} does not define run()")
        try:
            sig: inspect.Signature | None = inspect.signature(run)
        except (TypeError, ValueError):
            sig = None
        self._cache[name] = (version, run, sig)
        return run, sig

    def _prepare(
        self, name: str, src: dict[str, Any], args: Any, kwargs: Any
    ) -> Callable[..., Any]:
        run, sig = self._load(name, src)
        if sig is not None:
            try:
                sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"skills.{name}{sig}: {exc}") from None
        return run

    def _source(self, name: str) -> dict[str, Any]:
        cached = self._cache.get(name)
        have = cached[0] if cached else None
        return bridge.call("skills.source", {"name": name, "have_version": have})  # type: ignore[no-any-return]

    def invoke(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Run skill ``name`` here and return what its ``run`` returns (``name`` is
        positional-only: a skill may have a parameter called ``name`` too)."""
        run = self._prepare(name, self._source(name), args, kwargs)
        result = run(*args, **kwargs)
        if hasattr(result, "__await__"):
            return _run_coroutine(result)
        return result

    async def ainvoke(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """``invoke`` for async code: an async ``run`` is awaited on the caller's loop."""
        cached = self._cache.get(name)
        params = {"name": name, "have_version": cached[0] if cached else None}
        src = await bridge.acall("skills.source", params)
        run = self._prepare(name, src, args, kwargs)
        result = run(*args, **kwargs)
        if hasattr(result, "__await__"):
            return await result
        return result

    def __getattr__(self, name: str) -> SkillFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        return SkillFunction(self, name)

    def __dir__(self) -> _List[str]:
        names: _List[str] = []
        try:
            names = [s["name"] for s in self.list() if "error" not in s]
        except Exception:  # noqa: BLE001 - dir() must not fail because the host is away
            names = []
        return sorted({*super().__dir__(), *names})

    def __repr__(self) -> str:
        return (
            "skills: search(query), invoke(name, **kwargs) or skills.<name>(**kwargs), "
            "create(name, source, description), list(), get(name), update(name, ...), "
            "rollback(name), delete(name)"
        )


class Artifacts:
    """Named data kept across sessions: bytes, str or JSON-like values come back exactly."""

    def save(self, name: str, data: Any, description: str = "") -> dict[str, Any]:
        """Store ``data`` under ``name`` (replacing it); returns type, size and created."""
        if isinstance(data, bytearray | memoryview):
            data = bytes(data)
        elif not isinstance(data, bytes | str):
            _check_json_like(data, "data")
        params = {"name": name, "data": data, "description": description}
        return bridge.call("artifacts.save", params)  # type: ignore[no-any-return]

    def load(self, name: str) -> Any:
        return bridge.call("artifacts.load", {"name": name})

    def info(self, name: str) -> dict[str, Any]:
        return bridge.call("artifacts.info", {"name": name})  # type: ignore[no-any-return]

    def list(self) -> _List[dict[str, Any]]:
        """Name, type, size, created and description of every artifact (no data)."""
        return bridge.call("artifacts.list", {})  # type: ignore[no-any-return]

    def exists(self, name: str) -> bool:
        return bool(bridge.call("artifacts.exists", {"name": name}))

    def delete(self, name: str) -> bool:
        return bool(bridge.call("artifacts.delete", {"name": name}))

    def __repr__(self) -> str:
        return (
            "artifacts: save(name, data, description=''), load(name), list(), exists(name), "
            "delete(name)"
        )


class State:
    """The workspace's small JSON document; also usable like a dict (``state['k'] = v``)."""

    def get(self, key: str | None = None, default: Any = None) -> Any:
        """The whole document, or one key's value."""
        return bridge.call("state.get", {"key": key, "default": default})

    def set(self, key: str | Mapping[str, Any], value: Any = None) -> None:
        """``set(key, value)`` sets one key; ``set(mapping)`` replaces the whole document."""
        if isinstance(key, Mapping):
            data = dict(key)
            _check_json_like(data, "state")
            bridge.call("state.replace", {"data": data})
        else:
            _check_json_like(value, f"state[{key!r}]")
            bridge.call("state.set", {"key": key, "value": value})

    def update(self, values: Mapping[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        """Merge keys into the document; returns the new document."""
        data = {**(values or {}), **kw}
        _check_json_like(data, "state")
        return bridge.call("state.update", {"data": data})  # type: ignore[no-any-return]

    def delete(self, key: str) -> bool:
        return bool(bridge.call("state.delete", {"key": key}))

    def __getitem__(self, key: str) -> Any:
        doc = self.get()
        if key not in doc:
            raise KeyError(key)
        return doc[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self.get()

    def __iter__(self) -> Iterator[str]:
        return iter(_List(self.get()))

    def __len__(self) -> int:
        return len(self.get())

    def keys(self) -> _List[str]:
        return _List(self.get())

    def items(self) -> _List[tuple[str, Any]]:
        return _List(self.get().items())

    def __repr__(self) -> str:
        return f"state {self.get()!r}"


class Deps:
    """Packages for this workspace: ``add('pkg==1.2')``, ``remove``, ``list``, ``sync``."""

    def _refresh(self, result: Any) -> None:
        site = result.get("site") if isinstance(result, dict) else None
        if isinstance(site, str) and os.path.isdir(site) and site not in sys.path:
            sys.path.append(site)
        importlib.invalidate_caches()

    def add(self, spec: str) -> dict[str, Any]:
        """pip-install ``spec`` into the workspace's deps; then ``import`` it as usual."""
        result = bridge.call("deps.add", {"spec": spec})
        self._refresh(result)
        return result  # type: ignore[no-any-return]

    def remove(self, name: str) -> bool:
        """Uninstall (modules already imported stay loaded until ``reset``)."""
        removed = bool(bridge.call("deps.remove", {"name": name}))
        importlib.invalidate_caches()
        return removed

    def list(self) -> _List[dict[str, Any]]:
        return bridge.call("deps.list", {})  # type: ignore[no-any-return]

    def sync(self) -> dict[str, Any]:
        result = bridge.call("deps.sync", {})
        self._refresh(result)
        return result  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return "deps: add('pkg==1.0'), remove(name), list(), sync()"


def install(g: dict[str, Any]) -> None:
    """Put ``skills``, ``artifacts``, ``state`` and ``deps`` into the namespace ``g``."""
    g["skills"] = Skills(g)
    g["artifacts"] = Artifacts()
    g["state"] = State()
    g["deps"] = Deps()
