"""The web console of ``codemode serve --transport http``: a read-only page at ``/ui``.

It shows open sessions, calls in progress, recent runs (their code, output and tool calls
as a timeline), questions waiting for a person's approval and the metrics' summary. The
page itself (``/ui``, its script and style) holds no data and needs no token; everything
it shows comes from ``GET /api/console``, behind the server's bearer token, which the
person types into the page once (kept in the tab's ``sessionStorage``).
"""

from __future__ import annotations

from .config import WebConfig

__all__ = ["WebConfig"]
