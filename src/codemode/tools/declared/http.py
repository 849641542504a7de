"""HTTP tools: a fixed origin, parameters only in the path and the query.

A request is built from the definition: ``base_url`` fixes scheme, host and port (and a
base path); each path placeholder becomes one percent-encoded segment (``/`` and ``%``
encoded, ``.``/``..`` refused), query values are encoded by ``urlencode``, the JSON body
is the ``body`` template with whole-placeholder strings replaced by typed values. Headers
come only from the definition; ``${VAR}`` in them (and in fixed query values) is read from
the host's environment at call time and never reaches the sandbox or the tool's
description. The built URL is checked once more against the origin.

Connections go through ``netguard.GuardedBackend`` (addresses checked at connect time).
Redirects are followed only within the origin (same scheme, host and port), at most
``max_redirects``; one to another origin is refused. Proxies from the environment are
not used (a proxy would connect on the tool's behalf, past the address check).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

import anyio
import httpcore2

from ...errors import ToolArgumentError, ToolError, ToolTimeout
from ..spec import TextContent, ToolCallResult
from .model import HttpServer, ToolDef, expand_env
from .netguard import AddressPolicy, AddressRefused, GuardedBackend
from .template import render, scalar_text, whole

_REDIRECTS = (301, 302, 303, 307, 308)
USER_AGENT = "codemode-http-tool"


def _segment(value: Any, name: str, tool: str) -> str:
    text = scalar_text(value, where=tool)
    if text in ("", ".", ".."):
        raise ToolArgumentError(f"{name}={text!r} is not allowed in a URL path", tool=tool)
    return quote(text, safe="")


def build_path(tool: ToolDef, args: Mapping[str, Any]) -> str:
    for name in _names(tool.path or "/"):
        if args.get(name) is None:
            raise ToolArgumentError(f"parameter {name!r} is required by the path", tool=tool.name)
    return render(tool.path or "/", {k: k for k in args}, lambda k: _segment(args[k], k, tool.name))


def _names(template: str) -> list[str]:
    from .template import placeholders

    return placeholders(template)


def build_query(tool: ToolDef, args: Mapping[str, Any], env: Mapping[str, str]) -> str:
    pairs: list[tuple[str, str]] = []
    for key, template in tool.query.items():
        names = _names(template)
        if any(args.get(n) is None for n in names):
            continue  # an optional parameter that was not given
        single = whole(template)
        if single is not None and isinstance(args[single], list):
            pairs += [(key, scalar_text(v, where=tool.name)) for v in args[single]]
            continue
        text = render(template, args, lambda v: scalar_text(v, where=tool.name))
        pairs.append((key, expand_env(text, env, where=tool.name) if not names else text))
    return urlencode(pairs)


def build_body(template: Any, args: Mapping[str, Any], tool: str) -> Any:
    """The JSON body: ``"{p}"`` becomes p's typed value; keys whose value is missing drop."""
    if isinstance(template, str):
        single = whole(template)
        if single is not None:
            return args.get(single)
        return render(template, args, lambda v: scalar_text(v, where=tool))
    if isinstance(template, dict):
        out = {}
        for key, value in template.items():
            single = whole(value) if isinstance(value, str) else None
            if single is not None and args.get(single) is None:
                continue
            out[key] = build_body(value, args, tool)
        return out
    if isinstance(template, list):
        return [build_body(v, args, tool) for v in template]
    return template


class HttpRunner:
    """Sends one file's HTTP tools' requests through a guarded connection pool."""

    def __init__(self, server: HttpServer, env: Mapping[str, str] | None = None) -> None:
        self.server = server
        self.env = os.environ if env is None else env
        origin = urlsplit(server.base_url)
        self.scheme = origin.scheme
        self.host = origin.hostname or ""
        self.port = origin.port or (443 if origin.scheme == "https" else 80)
        self.base_path = origin.path.rstrip("/")
        self.policy = AddressPolicy(server.allow_networks)
        self._pool: httpcore2.AsyncConnectionPool | None = None

    def _connections(self) -> httpcore2.AsyncConnectionPool:
        if self._pool is None:
            self._pool = httpcore2.AsyncConnectionPool(
                network_backend=GuardedBackend(self.policy), max_connections=20
            )
        return self._pool

    def url(self, tool: ToolDef, args: Mapping[str, Any]) -> str:
        netloc = self.host if ":" not in self.host else f"[{self.host}]"
        url = f"{self.scheme}://{netloc}:{self.port}{self.base_path}{build_path(tool, args)}"
        query = build_query(tool, args, self.env)
        if query:
            url += "?" + query
        self._same_origin(url, tool.name)
        return url

    def _same_origin(self, url: str, tool: str) -> None:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if (parts.scheme, parts.hostname, port) != (self.scheme, self.host, self.port):
            raise AddressRefused(
                f"refused: {parts.scheme}://{parts.hostname}:{port} is not this tool's "
                f"origin ({self.scheme}://{self.host}:{self.port})",
                tool=tool,
            )

    def headers(self, tool: ToolDef, has_body: bool) -> list[tuple[str, str]]:
        merged = {"User-Agent": USER_AGENT, "Accept": "application/json, text/*;q=0.9"}
        merged |= {**self.server.headers, **tool.headers}
        if has_body:
            merged.setdefault("Content-Type", "application/json")
        return [(k, expand_env(v, self.env, where=tool.name)) for k, v in merged.items()]

    async def run(
        self, tool: ToolDef, args: Mapping[str, Any], timeout: float | None
    ) -> ToolCallResult:
        limit = min(timeout or tool.timeout, tool.timeout)
        url = self.url(tool, args)
        body = build_body(tool.body, args, tool.name) if tool.body is not None else None
        content = json.dumps(body).encode() if body is not None else None
        headers = self.headers(tool, content is not None)
        method = tool.method or "GET"
        try:
            with anyio.fail_after(limit):
                for _ in range(self.server.max_redirects + 1):
                    status, resp_headers, data = await self._send(method, url, headers, content)
                    location = _header(resp_headers, "location")
                    if status not in _REDIRECTS or location is None:
                        return self._result(tool, status, resp_headers, data)
                    url = urljoin(url, location)
                    self._same_origin(url, tool.name)
                    if status == 303 or (status in (301, 302) and method == "POST"):
                        method, content = "GET", None
                        headers = [h for h in headers if h[0].lower() != "content-type"]
                raise ToolError(f"more than {self.server.max_redirects} redirects", tool=tool.name)
        except TimeoutError:
            raise ToolTimeout(f"timed out after {limit} s", tool=tool.name) from None
        except httpcore2.TimeoutException as exc:
            raise ToolTimeout(f"timed out: {exc}", tool=tool.name) from None
        except httpcore2.NetworkError as exc:
            raise ToolError(f"{method} {url.split('?')[0]} failed: {exc}", tool=tool.name) from None
        except httpcore2.ProtocolError as exc:
            raise ToolError(f"bad HTTP answer: {exc}", tool=tool.name) from None

    async def _send(
        self, method: str, url: str, headers: list[tuple[str, str]], content: bytes | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        pool = self._connections()
        async with pool.stream(method, url, headers=headers, content=content) as response:
            data = bytearray()
            async for chunk in response.aiter_stream():
                data += chunk
                if len(data) > self.server.max_response_bytes:
                    raise ToolError(
                        f"the response is larger than {self.server.max_response_bytes} bytes"
                    )
            return response.status, list(response.headers), bytes(data)

    def _result(
        self, tool: ToolDef, status: int, headers: list[tuple[bytes, bytes]], data: bytes
    ) -> ToolCallResult:
        ctype = (_header(headers, "content-type") or "").lower()
        text = data.decode("utf-8", "replace")
        if status >= 400:
            return ToolCallResult(
                content=[TextContent(f"HTTP {status}: {text[:2000]}")], is_error=True
            )
        if "json" in ctype and data:
            try:
                return ToolCallResult(structured=json.loads(data))
            except ValueError:
                pass
        return ToolCallResult(structured=text)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None


def _header(headers: list[tuple[bytes, bytes]], name: str) -> str | None:
    for key, value in headers:
        if key.decode("latin-1").lower() == name:
            return value.decode("latin-1")
    return None


__all__ = ["HttpRunner", "build_body", "build_path", "build_query"]
