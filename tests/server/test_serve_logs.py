"""``codemode serve`` logs quote upstream servers; what they planted is shown escaped."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from .conftest import start_http_server

DYING = (
    "import sys; sys.stderr.write('starting\\n\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\rOK\\n');"
    " sys.exit(1)"
)


def test_a_failed_server_s_stderr_reaches_the_log_escaped(tmp_path: Path) -> None:
    servers = {"dying": {"command": sys.executable, "args": ["-c", DYING]}}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    server = start_http_server(tmp_path)
    try:
        deadline = time.monotonic() + 60
        while "could not be listed" not in "".join(server.lines):
            assert time.monotonic() < deadline, "".join(server.lines)
            time.sleep(0.1)
    finally:
        server.stop()
    text = "".join(server.lines)  # the whole record: stop() waits for the log's end
    assert "]52;c;" in text
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text, text
