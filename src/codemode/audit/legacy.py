"""A tenant's audit log written before tenants had keys of their own.

Under ``codemode serve --tenants`` a tenant's audit key is ``CODEMODE_AUDIT_KEY`` of its
``env_file``, else the server's key derived for its name (``codemode.tenants.keys``). A
log it wrote before was signed with the server's key as it is, whatever its ``env_file``
said: chained on with the new key, it would verify BROKEN at the first new line. So when
its last line verifies with the server's key and not with the tenant's, the tenant keeps
the server's key, with a warning that says so and what to do; a new or empty log gets
the tenant's key.

Why not a key-rotation record in the chain (a line signed with the old key naming the
new one)? Every line before it still needs the old key to verify, so the tenant would
not stop depending on it; the log format would change (an older ``codemode audit
verify`` would call the rotated chain broken); and ``verify`` would have to trust a
key change the log itself announces. Keeping the key changes nothing on disk.
"""

from __future__ import annotations

import logging
from pathlib import Path

from .keys import Keys
from .log import log_files, sign, split_line

__all__ = ["last_signed", "shared_if_written_so"]

log = logging.getLogger(__name__)

_warned: set[Path] = set()
_CHUNK = 1 << 16


def last_signed(path: Path) -> tuple[bytes, str] | None:
    """(the signed bytes, the mac) of the log's last signed line, in the newest file that
    has one (the active file may have just been rotated; a crash may have cut its end);
    None when there is none."""
    for file in reversed(log_files(path)):
        try:
            with file.open("rb") as f:
                size, chunk = f.seek(0, 2), _CHUNK
                while size:
                    start = max(size - chunk, 0)
                    f.seek(start)
                    lines = f.read(size - start).split(b"\n")
                    for raw in reversed(lines if start == 0 else lines[1:]):
                        parts = split_line(raw)
                        if parts is not None:
                            return parts
                    if start == 0:
                        break
                    chunk *= 4  # a line longer than the chunk: read more of the end
        except OSError:
            continue
    return None


def shared_if_written_so(own: Keys, shared: Keys, path: Path, tenant: str) -> Keys:
    """``shared`` when the last line of the log at ``path`` is signed with it and not with
    ``own`` (tenant ``tenant``'s key); else ``own``."""
    parts = last_signed(path)
    if parts is None:
        return own  # no log yet
    body, mac = parts
    if sign(own, body) == mac or sign(shared, body) != mac:
        return own
    source = (
        f"{shared.source} as it is, instead of its own key ({own.source}): its log {path} was "
        "written with that key before each tenant had a key of its own, so it keeps it "
        "(the chain goes on unbroken; it shares the key with the server). To say so "
        "explicitly, set the key in its env_file; a key of its own means a new log (verify "
        "and archive this one with its head file, then remove both)"
    )
    resolved = path.resolve()
    if resolved not in _warned:
        _warned.add(resolved)
        log.warning("audit: the key of tenant %s is %s", tenant, source)
    return Keys(shared.chain, shared.args, source)
