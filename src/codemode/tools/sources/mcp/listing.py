"""Every page of a server's ``tools/list``, for each place that lists.

A listing is paginated by ``nextCursor``; reading only the first page silently hides the
tools after it (and, in the output check, leaves their results unchecked). A server that
hands out the same cursor twice, or more pages than any real listing needs, gets a clear
error instead of an endless loop or a quietly truncated list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import mcp_types as mt

MAX_PAGES = 1000  # far beyond a real listing (tens of tools a page), short of a hang


class ListingError(Exception):
    """The server's pagination never ends (a repeated cursor, or too many pages)."""


async def every_tool(
    page: Callable[[str | None], Awaitable[mt.ListToolsResult]], *, max_pages: int = MAX_PAGES
) -> list[mt.Tool]:
    """The tools of every page ``page(cursor)`` returns, first page at ``cursor=None``."""
    tools: list[mt.Tool] = []
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(max_pages):
        result = await page(cursor)
        tools.extend(result.tools)
        cursor = result.next_cursor
        if not cursor:
            return tools
        if cursor in seen:
            raise ListingError(
                f"the server returned the cursor {cursor[:40]!r} twice: its pagination loops"
            )
        seen.add(cursor)
    raise ListingError(f"the server's tool listing did not end within {max_pages} pages")
