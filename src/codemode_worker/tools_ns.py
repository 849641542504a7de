"""The ``tools`` object in the agent's namespace, and the ``servers.*`` import hook.

Everything here is a thin RPC client: the worker holds no connection, credential or
schema validator. ``tools.<server>.<tool>(**kwargs)`` sends ``tools.call`` to the host,
which resolves, validates (errors name the fields and show the signature), runs the
middleware and the call, and converts the result. For concurrency::

    a, b = await asyncio.gather(tools.web.fetch_async(url=u1), tools.web.fetch.aio(url=u2))

``from servers.<server> import <tool>`` imports typed functions generated on the host
(``tools.stub_module``) from the tools' schemas.

Standard library only.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import json
import sys
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import bridge
from .errors import BudgetExceeded, CodemodeError, ToolArgumentError, ToolDenied, ToolError

_List = list  # ``Tools.list`` shadows the builtin inside the class

_METHODS = ("search", "list", "describe", "servers", "refresh")


def _private(name: str) -> bool:
    """Mapped names never start with ``_`` + letter (``_2fa`` can): skips ``_repr_html_`` probes."""
    return name.startswith("_") and not name[1:2].isdigit()


def _untitled(schema: Any) -> Any:
    """A JSON schema without its ``title`` keywords (generated noise like "Record Id")."""
    if isinstance(schema, list):
        return [_untitled(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        k: {n: _untitled(s) for n, s in v.items()}
        if k in ("properties", "$defs", "definitions") and isinstance(v, dict)
        else _untitled(v)
        for k, v in schema.items()
        if k != "title"
    }


class Tool:
    """One tool; call it with keyword arguments (or the required ones positionally)."""

    __slots__ = ("_described", "_server", "_tool")

    def __init__(self, server: str, tool: str) -> None:
        self._server = server
        self._tool = tool
        self._described: dict[str, Any] | None = None

    def _payload(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        if args:
            kwargs = {**self._positional(args, kwargs), **kwargs}
        return {"server": self._server, "tool": self._tool, "args": kwargs}

    def _positional(self, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        params = [p["name"] for p in self.describe().get("parameters", []) if p.get("required")]
        sig = self.describe().get("signature", "")
        if len(args) > len(params):
            raise ToolArgumentError(
                f"takes {len(params)} positional argument(s) but {len(args)} were given; "
                f"pass the others by keyword\nsignature: {sig}",
                server=self._server,
                tool=self._tool,
            )
        out = dict(zip(params, args, strict=False))
        both = [k for k in out if k in kwargs]
        if both:
            raise ToolArgumentError(
                f"got multiple values for argument {both[0]!r}\nsignature: {sig}",
                server=self._server,
                tool=self._tool,
            )
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return bridge.call("tools.call", self._payload(args, kwargs))

    async def aio(self, *args: Any, **kwargs: Any) -> Any:
        """The same call, awaitable: many can run at once with ``asyncio.gather``."""
        return await bridge.acall("tools.call", self._payload(args, kwargs))

    def describe(self) -> dict[str, Any]:
        """Signature, description and schemas (fetched once from the host)."""
        if self._described is None:
            self._described = bridge.call(
                "tools.describe", {"name": f"{self._server}.{self._tool}"}
            )
        return self._described

    @property
    def signature(self) -> str:
        return str(self.describe().get("signature", ""))

    @property
    def help(self) -> str:
        """What calling this tool takes: signature, docstring (arguments) and result schema."""
        d = self.describe()
        sig = str(d.get("signature", ""))
        sig = sig[sig.find("(") :] if "(" in sig else sig
        doc = str(d.get("docstring") or d.get("description") or "").strip()
        out = d.get("result_schema", d.get("output_schema"))
        returns = (
            "Returns (JSON schema): " + json.dumps(_untitled(out), separators=(",", ":"))
            if out
            else "Returns: no declared schema; print one result to see its shape."
        )
        return f"tools.{self._server}.{self._tool}{sig}\n{doc}\n{returns}"

    def __repr__(self) -> str:
        try:
            return f"<tool {self.signature}>"
        except Exception:  # noqa: BLE001 - repr must not fail (unknown tool, no host)
            return f"<tool {self._server}.{self._tool}>"


class Server:
    """The tools of one server, as attributes."""

    __slots__ = ("_cache", "_name", "_names")

    def __init__(self, name: str) -> None:
        self._name = name
        self._names: list[str] | None = None
        self._cache: dict[str, Tool] = {}

    def _tool_names(self, refresh: bool = False) -> list[str]:
        if self._names is None or refresh:
            rows = bridge.call("tools.list", {"server": self._name})
            self._names = [str(r["name"]).rpartition(".")[2] for r in rows]
        return self._names

    def _get(self, name: str) -> Any:
        tool = self._cache.get(name)
        if tool is not None:
            return tool
        for refresh in (False, True):
            names = self._tool_names(refresh)
            if name in names:
                tool = self._cache[name] = Tool(self._name, name)
                return tool
            if name.endswith("_async") and name[:-6] in names:
                return self._get(name[:-6]).aio
        # An original name (``getattr(server, "get-weather")``) resolves on the host; for an
        # unknown one the host raises ToolNotFound with close names. A tool the policy hides
        # is still handed out: calling it is refused (and recorded) by the host's chain.
        with contextlib.suppress(ToolDenied):
            bridge.call("tools.describe", {"name": f"{self._name}.{name}"})
        return Tool(self._name, name)

    def __getattr__(self, name: str) -> Any:
        if _private(name):
            raise AttributeError(name)
        return self._get(name)

    def __getitem__(self, name: str) -> Tool:
        """``tools["my-server"]["get-weather"]``: original names work too."""
        return Tool(self._name, name)

    def __dir__(self) -> list[str]:
        names = self._tool_names()
        return sorted({*names, *(f"{n}_async" for n in names)})

    def __repr__(self) -> str:
        names = self._tool_names()
        shown = ", ".join(names[:30]) + (f", ... ({len(names)} tools)" if len(names) > 30 else "")
        return f"<server {self._name}: {shown or 'no tools'}>"


class Tools:
    """Every tool server, and discovery: ``search``, ``list``, ``describe``, ``servers``."""

    __slots__ = ("_server_names", "_servers")

    def __init__(self) -> None:
        self._servers: dict[str, Server] = {}
        self._server_names: list[str] | None = None

    def search(self, query: str, detail: str = "name", limit: int = 10) -> _List[dict[str, Any]]:
        """Tools ranked for ``query``; ``detail``: "name", "description" or "full"."""
        return bridge.call("tools.search", {"query": query, "detail": detail, "limit": limit})  # type: ignore[no-any-return]

    def list(self, server: str | None = None, detail: str = "name") -> _List[dict[str, Any]]:
        """Every tool (of one server if given)."""
        return bridge.call("tools.list", {"server": server, "detail": detail})  # type: ignore[no-any-return]

    def describe(self, name: str) -> dict[str, Any]:
        """Signature, description, input and output schema of ``"server.tool"``."""
        return bridge.call("tools.describe", {"name": name})  # type: ignore[no-any-return]

    def servers(self) -> _List[dict[str, Any]]:
        """Each server with its tool count and status."""
        return bridge.call("tools.servers", {})  # type: ignore[no-any-return]

    def refresh(self) -> None:
        """Forget what this session cached about servers and tools."""
        self._servers.clear()
        self._server_names = None
        _purge_modules()

    def _names(self, refresh: bool = False) -> _List[str]:
        if self._server_names is None or refresh:
            rows = bridge.call("tools.servers", {"connect": False})
            self._server_names = [str(r["name"]) for r in rows]
        return self._server_names

    def _server(self, name: str, check: bool) -> Server:
        server = self._servers.get(name)
        if server is None:
            if check and name not in self._names() and name not in self._names(refresh=True):
                # An original name resolves on the host; else it raises with close names.
                bridge.call("tools.list", {"server": name})
            server = self._servers[name] = Server(name)
        return server

    def __getattr__(self, name: str) -> Server:
        if _private(name):
            raise AttributeError(name)
        return self._server(name, check=True)

    def __getitem__(self, name: str) -> Server:
        """``tools["my-server"]``: original server names work too."""
        return self._server(name, check=False)

    def __dir__(self) -> _List[str]:
        return sorted({*_METHODS, *self._names()})

    def __repr__(self) -> str:
        try:
            names = ", ".join(self._names()) or "none"
        except Exception:  # noqa: BLE001 - repr must not fail (e.g. outside a session)
            names = "?"
        return (
            f"<tools: servers {names}. tools.search(query), tools.list(server), "
            "tools.describe('server.tool'), tools.servers(); call tools.<server>.<tool>(**kwargs)>"
        )


# -- from servers.<server> import <tool> --------------------------------------------


class _ToolModule(types.ModuleType):
    """``servers.x.y`` as a module that is also callable, so ``servers.x.y(...)`` keeps
    working after ``import servers.x.y`` replaced the function attribute with the module."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, self.__name__.rpartition(".")[2])(*args, **kwargs)


if TYPE_CHECKING:
    from importlib.abc import Loader as _LoaderBase
    from importlib.abc import MetaPathFinder as _FinderBase
else:  # importing importlib.abc costs the worker ~7 ms of start-up

    class _FinderBase:
        pass

    class _LoaderBase:
        pass


class ServersFinder(_FinderBase, _LoaderBase):
    """Finds ``servers``, ``servers.<server>`` and ``servers.<server>.<tool>`` on the host.

    A meta path finder and loader (``find_spec``, ``create_module``, ``exec_module``).
    """

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "servers" and not fullname.startswith("servers."):
            return None
        depth = fullname.count(".")
        if depth > 2 or bridge._link is None:
            return None
        try:
            source = bridge.call("tools.stub_module", {"module": fullname})
        except CodemodeError:  # no host (e.g. a closed in-process session): not ours to find
            return None
        if not isinstance(source, str):
            return None
        spec = importlib.machinery.ModuleSpec(
            fullname, self, origin=f"codemode:{fullname}", is_package=depth < 2
        )
        spec.loader_state = source
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        if spec.name.count(".") == 2:
            return _ToolModule(spec.name)
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        spec = module.__spec__
        assert spec is not None
        code = compile(spec.loader_state, f"<{spec.name}>", "exec", dont_inherit=True)
        exec(code, module.__dict__)


_finder = ServersFinder()


def _purge_modules() -> None:
    for name in [n for n in sys.modules if n == "servers" or n.startswith("servers.")]:
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod.__spec__, "loader", None) is _finder:
            del sys.modules[name]


def install(g: dict[str, Any]) -> None:
    """Put ``tools`` in the namespace; install the ``servers`` import hook once."""
    g["tools"] = Tools()
    # So agents can write ``except ToolError`` / ``except ToolDenied`` without an import.
    for cls in (ToolError, ToolDenied, BudgetExceeded):
        g.setdefault(cls.__name__, cls)
    if not any(f is _finder for f in sys.meta_path):
        sys.meta_path.insert(0, _finder)
    _purge_modules()  # a reset session re-imports fresh stubs
