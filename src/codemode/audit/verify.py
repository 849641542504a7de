"""Checking an audit log's chain: edited, deleted, reordered and cut-off lines.

- an edited line no longer matches its own ``mac``;
- a deleted (or reordered, or inserted) line breaks ``prev`` and ``seq`` of the next one;
- lines cut off the end leave the chain shorter than the head copied outside the
  workspace says; a half-written last line has no newline or no ``mac``.

The oldest file may start past ``seq`` 1 when older rotated files were removed (``keep``):
that is reported as where the chain starts, not as a break.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .keys import Keys
from .log import Head, iter_lines, read_head, sign, split_line


@dataclass
class Report:
    records: int = 0
    first_seq: int | None = None
    last: Head = field(default_factory=Head)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(path: Path, head_path: Path, keys: Keys) -> Report:
    report = Report()
    prev_mac: str | None = None
    prev_seq: int | None = None
    for file, n, raw, ended in iter_lines(path):
        where = f"{file.name}:{n}"
        if not ended:
            report.problems.append(f"{where}: the last line is cut (no newline at its end)")
        parts = split_line(raw)
        if parts is None:
            report.problems.append(f"{where}: not a signed audit line (no mac)")
            prev_mac, prev_seq = None, None
            continue
        body, mac = parts
        if sign(keys, body) != mac:
            report.problems.append(
                f"{where}: the line was changed (its mac does not match; or the key "
                f"from {keys.source} is not the one it was written with)"
            )
        try:
            doc = json.loads(body)
            seq, prev = int(doc["seq"]), str(doc["prev"])
        except (ValueError, KeyError, TypeError):
            report.problems.append(f"{where}: unreadable seq or prev")
            prev_mac, prev_seq = None, None
            continue
        if prev_seq is None and report.records == 0:
            report.first_seq = seq
            if seq != 1 or prev:
                report.notes.append(
                    f"the chain starts at seq {seq} in {file.name} (older files were removed)"
                )
        elif prev_seq is not None and (seq != prev_seq + 1 or prev != prev_mac):
            missing = seq - prev_seq - 1
            what = (
                f"{missing} line(s) before it are missing"
                if missing > 0
                else "it does not follow the line before it"
            )
            report.problems.append(f"{where}: the chain breaks at seq {seq}: {what}")
        report.records += 1
        prev_mac, prev_seq = mac, seq
        report.last = Head(seq, mac)
    head = read_head(head_path)
    if head is None:
        report.problems.append(f"the head file {head_path} is unreadable")
        return report
    start = report.first_seq if report.first_seq is not None else head.seq + 1
    if head.first and start > head.first and head.seq >= head.first:
        report.problems.append(
            f"the log starts at seq {start} but its head ({head_path}) says the kept chain "
            f"starts at {head.first}: {start - head.first} line(s) were cut off its start"
        )
    if head.seq != report.last.seq or head.mac != report.last.mac:
        if head.seq > report.last.seq:
            report.problems.append(
                f"the log ends at seq {report.last.seq} but its head ({head_path}) says "
                f"{head.seq}: {head.seq - report.last.seq} line(s) were cut off the end"
            )
        else:
            report.problems.append(
                f"the log's last line (seq {report.last.seq}) is not the head recorded in "
                f"{head_path} (seq {head.seq}): lines were replaced or added after it"
            )
    return report


__all__ = ["Report", "verify"]
