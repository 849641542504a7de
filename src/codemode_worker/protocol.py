"""Length-prefixed JSON frames, and the JSON encoding of bytes and blobs.

Shared by host and worker; standard library only. Nothing is ever pickled: data coming
out of a worker is untrusted.

Every frame's first key is ``op`` (``{"op":"call","id":7,...``): the encoder keeps the
order it is given, so the host can tell what a frame claims to be from its first bytes
and apply that kind's size cap before buffering the rest (see ``codemode.execution.frames``).

Large bytes and strings are not put inside the JSON (base64 would grow them by a third and
cost a parse): they follow it raw, as *attachments*. A frame's body is then the JSON, a
newline (compact JSON never holds one), and the attachments back to back; the JSON points
at each with ``{"__cm_att__": [start, end, "b" or "s"]}`` (offsets into the attachments).
A large reply is written without a copy, and a reader slices instead of parsing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct
import threading
from collections.abc import Sequence
from typing import Any

VERSION = 1
"""The worker <-> host protocol this worker speaks (frames, ops and the methods it calls);
sent in its ``ready`` frame. Bump it with any incompatible change."""

HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30
MAX_VALUES = 1_000_000
"""JSON values one frame may hold: parsing costs ~60 bytes of objects per value."""

B64_KEY = "__cm_b64__"
BLOB_KEY = "__cm_blob__"
ATT_KEY = "__cm_att__"
ATTACH_MIN = 1 << 16
"""bytes (and, when a frame's JSON would be too large, strings) from this size on travel
as attachments."""
MAX_JSON = 16 << 20
"""What the JSON part of a call may weigh: larger data travels as attachments."""


class Blob:
    """Binary tool content (an image, audio, a resource) with its MIME type."""

    __slots__ = ("data", "kind", "mime_type", "uri")

    def __init__(
        self, data: bytes, mime_type: str, kind: str = "image", uri: str | None = None
    ) -> None:
        self.data = data
        self.mime_type = mime_type
        self.kind = kind
        self.uri = uri

    def __repr__(self) -> str:
        return f"Blob(kind={self.kind!r}, mime_type={self.mime_type!r}, {len(self.data)} bytes)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Blob) and (self.data, self.mime_type, self.kind, self.uri) == (
            other.data,
            other.mime_type,
            other.kind,
            other.uri,
        )

    def __hash__(self) -> int:
        return hash((self.data, self.mime_type, self.kind, self.uri))


def json_like_problem(value: Any, what: str = "data") -> str | None:
    """Why ``value`` would not come back equal after a JSON round trip (None: it would).

    Shared by the host and the worker, so both refuse the same values with the same words.
    """
    stack: list[tuple[Any, str]] = [(value, what)]
    while stack:
        v, where = stack.pop()
        if v is None or isinstance(v, bool | int | float | str):
            continue
        if isinstance(v, list):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))
        elif isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    return (
                        f"{where} has a {type(k).__name__} key {k!r}; JSON keys are strings, "
                        "so it would not come back the same: convert the keys to str"
                    )
                stack.append((x, f"{where}[{k!r}]"))
        else:
            hint = " (use a list)" if isinstance(v, tuple | set | frozenset) else ""
            return (
                f"{where} is a {type(v).__name__}; artifacts and state hold bytes, str or "
                f"JSON-like data (dict with str keys, list, str, int, float, bool, None){hint}"
            )
    return None


class _Text:
    """A large string to send as an attachment (see :func:`encode_parts`)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_pending = threading.local()  # attachments of the frame being encoded on this thread


def _attach(data: bytes | bytearray | memoryview, kind: str) -> dict[str, Any] | None:
    atts: list[Any] | None = getattr(_pending, "atts", None)
    if atts is None:
        return None
    start = _pending.size
    atts.append(data)
    _pending.size += len(data)
    return {ATT_KEY: [start, _pending.size, kind]}


def _default(obj: Any) -> Any:
    if isinstance(obj, bytes | bytearray | memoryview):
        if len(obj) >= ATTACH_MIN and (ref := _attach(obj, "b")) is not None:
            return ref
        return {B64_KEY: base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, _Text):
        return _attach(obj.text.encode("utf-8", "surrogatepass"), "s") or obj.text
    if isinstance(obj, Blob):
        info = {"data": obj.data, "mime_type": obj.mime_type, "kind": obj.kind, "uri": obj.uri}
        return {BLOB_KEY: info}
    if isinstance(obj, set | frozenset):
        return list(obj)
    raise TypeError(f"cannot send {type(obj).__name__} between host and worker")


def _hook(d: dict[str, Any], atts: memoryview | None = None) -> Any:
    if len(d) == 1:
        if B64_KEY in d:
            return base64.b64decode(d[B64_KEY])
        if ATT_KEY in d:
            return _attachment(d[ATT_KEY], atts)
        if BLOB_KEY in d:
            b = d[BLOB_KEY]
            data = b["data"]
            if not isinstance(data, bytes):
                data = base64.b64decode(data)
            return Blob(data, b["mime_type"], b.get("kind", "image"), b.get("uri"))
    return d


def _attachment(ref: Any, atts: memoryview | None) -> bytes | str:
    """The attachment ``ref`` points at, or ValueError (a forged or broken reference)."""
    if (
        atts is None
        or not isinstance(ref, list)
        or len(ref) != 3
        or not all(type(x) is int for x in ref[:2])
        or not 0 <= ref[0] <= ref[1] <= len(atts)
        or ref[2] not in ("b", "s")
    ):
        raise ValueError("a frame holds a malformed attachment reference")
    piece = atts[ref[0] : ref[1]]
    return bytes(piece) if ref[2] == "b" else str(piece, "utf-8", "surrogatepass")


# Built once: json.dumps/loads with options build a new encoder/decoder on every call.
_ENCODER = json.JSONEncoder(default=_default, separators=(",", ":"), ensure_ascii=False)
_DECODER = json.JSONDecoder(object_hook=_hook)


def dumps(msg: Any, *, lossy: bool = False) -> bytes:
    return _utf8(_ENCODER.encode(msg), lossy)


def loads(data: bytes | bytearray | memoryview | str, atts: memoryview | None = None) -> Any:
    """Decode JSON (``atts``: the attachment area of its frame, if it has one)."""
    text = data if isinstance(data, str) else str(data, "utf-8")
    if atts is None:
        return _DECODER.decode(text)
    return json.JSONDecoder(object_hook=lambda d: _hook(d, atts)).decode(text)


def split_body(body: bytes | bytearray) -> tuple[bytes | bytearray | memoryview, memoryview | None]:
    """A frame body's JSON part and its attachment area (None when it has none)."""
    cut = body.find(b"\n")
    if cut < 0:
        return body, None
    view = memoryview(body)
    return view[:cut], view[cut + 1 :]


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""One lone surrogate (a pair is one code point in a ``str``); the host's tool-result
conversion (``codemode.tools.convert``) uses it too."""


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate as U+FFFD (text the host shows, never data)."""
    return LONE_SURROGATE.sub("\ufffd", text)


def _utf8(text: str, lossy: bool) -> bytes:
    """``text`` as UTF-8. A lone surrogate (a file name read with ``surrogateescape``,
    ``"\\udcff"`` typed in code) has no UTF-8 form: ``lossy`` frames (a run's result: its
    output, value and error) show it as U+FFFD, since failing there stopped the worker
    and lost the session; other frames (calls) refuse it with a clear error."""
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        if lossy:
            return without_surrogates(text).encode()
        found = exc.object[exc.start : exc.end]
        raise ValueError(
            f"a string holds a lone surrogate ({found!r}), which no UTF-8 text can carry: "
            "send it as bytes (s.encode('utf-8', 'surrogateescape')) or clean it "
            "(s.encode('utf-8', 'replace').decode())"
        ) from None


def encode_parts(
    msg: Any, max_json: int | None = None, *, lossy: bool = False
) -> list[bytes | bytearray | memoryview]:
    """The frame of ``msg`` as buffers to write in order: large bytes are attached without
    a copy. With ``max_json``, strings are attached too when the JSON would outweigh it.
    ``lossy``: lone surrogates become U+FFFD instead of an error (see :func:`_utf8`)."""
    _pending.atts, _pending.size = [], 0
    try:
        text = _utf8(_ENCODER.encode(msg), lossy)
        if max_json is not None and len(text) > max_json:
            _pending.atts, _pending.size = [], 0
            text = _utf8(_ENCODER.encode(_strings_apart(msg)), lossy)
        atts: list[bytes | bytearray | memoryview] = _pending.atts
        size = _pending.size
    finally:
        _pending.atts = None
    if not atts:
        return [HEADER.pack(len(text)) + text]
    return [HEADER.pack(len(text) + 1 + size) + text + b"\n", *atts]


def encode_frame(msg: Any, *, lossy: bool = False) -> bytes:
    return b"".join(encode_parts(msg, lossy=lossy))


def parts_size(parts: Sequence[bytes | bytearray | memoryview]) -> int:
    return sum(len(p) for p in parts)


def _strings_apart(value: Any, depth: int = 0) -> Any:
    """``value`` with its large strings marked to travel as attachments."""
    if isinstance(value, str):
        return _Text(value) if len(value) >= ATTACH_MIN else value
    if depth > 50:
        return value
    if isinstance(value, dict):
        return {k: _strings_apart(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strings_apart(v, depth + 1) for v in value]
    return value


_STRUCTURE_ONLY = bytes(c for c in range(256) if c not in b'",[{')


def count_values(body: bytes | bytearray, limit: int = MAX_VALUES) -> int:
    """How many JSON values ``body`` holds, counted as the commas and opening brackets
    outside strings: what parsing it would allocate (``[],`` is 3 bytes, but a list).

    Cheap byte counts first; strings are only skipped when that rough count is over
    ``limit``, since commas and brackets inside them are not values. Any result above
    ``limit`` means "too many"; it is then not always exact.
    """
    rough = body.count(b",") + body.count(b"[") + body.count(b"{")
    if rough <= limit or b'"' not in body:
        return rough
    text = body
    if b"\\" in text:  # escapes cannot end a string
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes = text.count(b'"')
    if quotes > 4 * limit:  # every value string costs an object (keys are shared)
        return quotes // 2
    skeleton = text.translate(None, _STRUCTURE_ONLY)  # only '"', ',', '[', '{' are left
    if quotes > 1000:  # many strings: split them out (copies, but few bytes each)
        outside = b"".join(skeleton.split(b'"')[0::2])
        return outside.count(b",") + outside.count(b"[") + outside.count(b"{")
    count, pos, end = 0, 0, len(skeleton)  # few strings: count around them, no copies
    while pos < end:
        opening = skeleton.find(b'"', pos)
        stop = end if opening < 0 else opening
        count += skeleton.count(b",", pos, stop) + skeleton.count(b"[", pos, stop)
        count += skeleton.count(b"{", pos, stop)
        if opening < 0:
            break
        closing = skeleton.find(b'"', opening + 1)
        pos = end if closing < 0 else closing + 1
    return count


def write_frame(fd: int, msg: Any) -> None:
    data = encode_frame(msg)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class FrameBuffer:
    """Accumulates bytes and yields complete frames no larger than ``max_frame``."""

    __slots__ = ("_buf", "max_frame")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self.max_frame = max_frame

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf
        buf += data
        out: list[Any] = []
        while len(buf) >= 4:
            (n,) = HEADER.unpack_from(buf)
            if n > self.max_frame:
                raise ValueError(f"a frame of {n} bytes exceeds the limit of {self.max_frame}")
            if len(buf) < 4 + n:
                break
            body = bytes(buf[4 : 4 + n])
            del buf[: 4 + n]
            try:
                msg = loads(*split_body(body))
            except (ValueError, RecursionError) as exc:  # untrusted bytes: say so, stay usable
                raise ValueError(f"a frame is not valid JSON ({type(exc).__name__})") from None
            if not isinstance(msg, dict):
                raise ValueError(f"a frame holds a {type(msg).__name__}, not an object")
            out.append(msg)
        return out
