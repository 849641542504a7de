"""The scanner process: runs the built-in detectors over texts the host sends it.

Started by ``codemode.privacy.pool`` as ``python -m codemode.privacy.scanproc``; what
it may see and why that is safe is stated there. This side knows no vault, no key, no
token, no remembered credential: it builds the built-in detectors from the types and
phone regions of its first frame, then answers each text with the candidates those
detectors find in it, and keeps nothing between texts. It never writes anything but
its answers (stderr goes nowhere: a traceback would carry text).

Frames (all little-endian), host -> scanner: ``<I`` length + JSON ``{"entities",
"regions"}`` once; then per text ``<QQ`` (UTF-8 length, first character kept) + the
text (UTF-8, lone surrogates passed). Scanner -> host: ``<I`` length + JSON
``{"entities"}`` when ready; per text ``<Qdd`` (candidates, seconds spent, of them on
the CPU) + the
starts and ends (``q`` each) + one byte per candidate (its entity's index). No pickle
either way.
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

__all__ = ["main"]

INIT = struct.Struct("<I")
REQUEST = struct.Struct("<QQ")
REPLY = struct.Struct("<Qdd")


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
    index = {name: i for i, name in enumerate(names)}
    hello = json.dumps({"entities": names}).encode()
    stdout.write(INIT.pack(len(hello)) + hello)
    stdout.flush()
    while True:
        head = _read(stdin, REQUEST.size)
        if head is None:
            return 0
        size, keep = REQUEST.unpack(head)
        t0, c0 = time.perf_counter(), time.process_time()
        data = _read(stdin, size)
        if data is None:
            return 0
        text = data.decode("utf-8", "surrogatepass")
        del data
        starts, ends, kinds = array("q"), array("q"), bytearray()
        for det in detectors:
            for start, end, entity in det.find(text):
                if start >= keep:
                    starts.append(start)
                    ends.append(end)
                    kinds.append(index[entity])
        del text
        spent, cpu = time.perf_counter() - t0, time.process_time() - c0
        stdout.write(
            REPLY.pack(len(kinds), spent, cpu) + starts.tobytes() + ends.tobytes() + bytes(kinds)
        )
        stdout.flush()


if __name__ == "__main__":
    # The host reads our stdout as frames: nothing else may be printed there.
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    sys.exit(main())
