"""A loopback URL that serves a JSON schema naming a secret, and the paths asked of it:
the tests that check the host never fetches a schema's remote ``$ref`` count on it."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def schema_listener(path: str, secret: str) -> Iterator[tuple[str, list[str]]]:
    """``(url, hits)``: ``url`` ends in ``path``; its answer is ``{"enum": [secret]}``."""
    hits: list[str] = []
    body = json.dumps({"enum": [secret]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}", hits
    finally:
        server.shutdown()
        server.server_close()
