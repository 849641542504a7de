"""Every page of a server's ``tools/list``, for each place that lists.

A listing is paginated by ``nextCursor``; reading only the first page silently hides the
tools after it (and, in the output check, leaves their results unchecked). A server that
hands out the same cursor twice, or more pages than any real listing needs, gets a clear
error instead of an endless loop or a quietly truncated list.

A listing is also bounded as a whole, not only page by page: ``max_bytes`` (the server's
``max_message_bytes``) holds for all its pages together, as it would for the same listing
sent as one page, and it may hold at most ``MAX_TOOLS`` tools. Without that, a server
answering each page within the message limit with a fresh cursor made the host keep
``MAX_PAGES`` pages (32 GB of tools at the default limit) until the listing's deadline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import mcp_types as mt

MAX_PAGES = 1000  # far beyond a real listing (tens of tools a page), short of a hang
MAX_TOOLS = 50_000
"""Tools one server may list (the discovery benchmark's catalogue has 10,000 in all)."""


class ListingError(Exception):
    """The server's pagination never ends (a repeated cursor, or too many pages), or its
    listing is larger than any this host takes."""


def _size(tools: list[mt.Tool]) -> int:
    return sum(len(t.model_dump_json(by_alias=True, exclude_none=True)) for t in tools)


async def every_tool(
    page: Callable[[str | None], Awaitable[mt.ListToolsResult]],
    *,
    max_pages: int = MAX_PAGES,
    max_bytes: int | None = None,
    max_tools: int = MAX_TOOLS,
) -> list[mt.Tool]:
    """The tools of every page ``page(cursor)`` returns, first page at ``cursor=None``."""
    tools: list[mt.Tool] = []
    seen: set[str] = set()
    cursor: str | None = None
    size = 0
    for n in range(max_pages):
        result = await page(cursor)
        tools.extend(result.tools)
        if len(tools) > max_tools:
            raise ListingError(
                f"the server listed more than {max_tools:,} tools; codemode takes no more "
                "from one server"
            )
        cursor = result.next_cursor
        if max_bytes is not None and (n or cursor):
            # One page alone is within the limit already (the transport caps a message).
            size += _size(result.tools) + len(cursor or "")
            if size > max_bytes:
                raise ListingError(
                    f"the server's tool listing passed {max_bytes:,} bytes over {n + 1} pages, "
                    "more than max_message_bytes in its configuration allows for one listing"
                )
        if not cursor:
            return tools
        if cursor in seen:
            raise ListingError(
                f"the server returned the cursor {cursor[:40]!r} twice: its pagination loops"
            )
        seen.add(cursor)
    raise ListingError(f"the server's tool listing did not end within {max_pages} pages")
