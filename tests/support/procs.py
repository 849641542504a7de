"""The live processes whose command line carries a marker: how tests check that what a
killed or closed owner started (jailed processes included) is gone."""

from __future__ import annotations

import os


def processes_with(marker: str) -> dict[int, str]:
    """{pid: its command line, NULs as spaces} of the processes whose command line
    holds ``marker``."""
    found: dict[int, str] = {}
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read()
        except OSError:  # not a process, or gone
            continue
        if needle in argv and entry.isdigit():
            found[int(entry)] = argv.replace(b"\0", b" ").decode(errors="replace")
    return found
