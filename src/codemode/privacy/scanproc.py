"""The scanner process: runs the built-in detectors over texts the host sends it.

Started by ``codemode.privacy.pool`` as ``python -m codemode.privacy.scanproc``; what
it may see and why that is safe is stated there. This side knows no vault, no key, no
token, no remembered credential: it builds the built-in detectors from the types and
phone regions of its first frame, then answers each text with the candidates those
detectors find in it, and keeps nothing between texts. It never writes anything but
its answers (stderr goes nowhere: a traceback would carry text).

Frames (all little-endian), host -> scanner: ``<I`` length + JSON ``{"entities",
"regions"}`` once; then per text ``<QQQQ`` (UTF-8 length, first character kept, chunk,
whether to look for encoded spans) + the text (UTF-8, lone surrogates passed). Scanner
-> host: ``<I`` length + JSON ``{"entities"}`` when ready (the detectors' types, then
``~`` and each of ``encoded.KINDS``); per text one or more ``<QddQ`` (candidates,
seconds spent, of them on the CPU, the character up to which the text is answered: its
length in the last) + the starts and ends (``q`` each) + one byte per candidate (its
entity's index). No pickle either way.

Encoded spans (base64, %-encoding...: ``codemode.privacy.encoded``) are answered by
position and kind only, when they decode to text: the host decodes those few and scans
them with every detector, its own net included (this side has none of it).

With a ``chunk`` (characters), a text is answered in parts cut right after a NUL every
``chunk`` characters or so, each scanned with the ``keep`` characters around it (the
context a detector reads; the built-in detectors match across no NUL): the host works
on one part's candidates while the next is scanned.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from array import array
from typing import BinaryIO

from .detectors import builtin_detectors
from .encoded import KINDS, candidates

__all__ = ["main"]

INIT = struct.Struct("<I")
REQUEST = struct.Struct("<QQQQ")
REPLY = struct.Struct("<QddQ")


def cuts(text: str, keep: int, chunk: int) -> list[int]:
    """Where the parts of ``text`` end (the last: its length); see the module doc."""
    n = len(text)
    out: list[int] = []
    if chunk:
        at = keep + chunk
        while at < n - chunk // 2:
            cut = text.find("\x00", at, n - keep) + 1
            if cut == 0:
                break
            out.append(cut)
            at = cut + chunk
    out.append(n)
    return out


def _read(stream: BinaryIO, n: int) -> bytes | None:
    data = stream.read(n)
    if data is None or len(data) < n:
        return None
    return data


def main() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    head = _read(stdin, INIT.size)
    if head is None:
        return 0
    body = _read(stdin, INIT.unpack(head)[0])
    if body is None:
        return 0
    spec = json.loads(body)
    detectors = builtin_detectors(spec["entities"], phone_regions=spec["regions"])
    names = list(dict.fromkeys(e for d in detectors for e in d.entities))
    names += [f"~{kind}" for kind in KINDS]
    index = {name: i for i, name in enumerate(names)}
    hello = json.dumps({"entities": names}).encode()
    stdout.write(INIT.pack(len(hello)) + hello)
    stdout.flush()
    while True:
        head = _read(stdin, REQUEST.size)
        if head is None:
            return 0
        size, keep, chunk, decode = REQUEST.unpack(head)
        t0, c0 = time.perf_counter(), time.process_time()
        data = _read(stdin, size)
        if data is None:
            return 0
        text = data.decode("utf-8", "surrogatepass")
        del data
        start = keep
        for end in cuts(text, keep, chunk):
            off = start - keep
            part = text[off : end + keep]
            starts, ends, kinds = array("q"), array("q"), bytearray()
            for det in detectors:
                for a, b, entity in det.find(part):
                    a += off
                    if start <= a < end:
                        starts.append(a)
                        ends.append(b + off)
                        kinds.append(index[entity])
            if decode:
                for a, b, kind, _ in candidates(part):
                    a += off
                    if start <= a < end:
                        starts.append(a)
                        ends.append(b + off)
                        kinds.append(index[f"~{kind}"])
            del part
            spent, cpu = time.perf_counter() - t0, time.process_time() - c0
            stdout.write(
                REPLY.pack(len(kinds), spent, cpu, end)
                + starts.tobytes()
                + ends.tobytes()
                + bytes(kinds)
            )
            stdout.flush()
            t0, c0 = time.perf_counter(), time.process_time()
            start = end
        del text


if __name__ == "__main__":
    # The host reads our stdout as frames: nothing else may be printed there.
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    sys.exit(main())
