"""The skill library: create, find, version and remove skills in a ``Storage``.

Records: ``skills/<name>`` holds the current version (metadata: description, parameters,
tags, version...; value: JSON ``{"code", "notes"}``); ``skill_versions/<name>@<n>`` holds
the versions it replaced, so ``rollback`` can restore any of them. Changes to one skill
take the storage lock of its name, so concurrent writers never lose a version.

Search is the tools' lexical ranker (``codemode.tools.search.LexicalIndex``) over name,
description, parameters, tags, notes and code; the index is cached until the storage's
``generation("skills")`` changes, and code already read is cached by version.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import CorruptRecord, NotFound, ValidationError
from ...storage.base import RecordInfo, Storage
from .. import formats
from ..artifacts import now_iso
from .model import (
    MAX_DESCRIPTION,
    MAX_NOTES,
    Skill,
    analyse_code,
    check_skill_name,
    check_tags,
    merge_parameters,
    summary,
)

KIND = "skills"
HISTORY = "skill_versions"

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None
Rows = list[dict[str, Any]]


def _check_description(description: str) -> str:
    if not isinstance(description, str) or not description.strip():
        raise ValidationError("a skill needs a description: say what it does and when to use it")
    if len(description) > MAX_DESCRIPTION:
        raise ValidationError(f"description is longer than {MAX_DESCRIPTION} chars")
    return description.strip()


def _search_text(name: str, meta: Mapping[str, Any], code: str, notes: str) -> str:
    params = " ".join(
        f"{p.get('name', '')} {p.get('description', '')}" for p in meta.get("parameters", [])
    )
    tags = " ".join(meta.get("tags", []))
    desc = str(meta.get("description", ""))
    # Repetition weights the fields: name > description > parameters/tags > notes/code.
    return f"{name} {name} {name} {desc} {desc} {params} {params} {tags} {tags} {notes} {code}"


class Skills:
    """Skills stored in ``storage``; nothing here ever runs a skill's code."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._index: Any = None
        self._index_gen: str | None = None
        self._texts: dict[tuple[str, int], str] = {}

    # -- reading ---------------------------------------------------------------------
    async def _load(self, name: str, kind: str = KIND, record: str | None = None) -> Skill:
        info, raw = await self.storage.read(kind, record or name)
        return self._decode(name, info, raw)

    @staticmethod
    def _decode(name: str, info: RecordInfo, raw: bytes) -> Skill:
        info, raw = formats.upgrade(info, raw)
        try:
            body = json.loads(raw)
            return Skill.from_record(name, info.meta, body)
        except (ValueError, TypeError, AttributeError) as exc:
            raise CorruptRecord(f"skill {info.kind}/{info.name} is unreadable ({exc})") from None

    async def get(self, name: str) -> Skill:
        check_skill_name(name)
        try:
            return await self._load(name)
        except NotFound:
            raise NotFound(f"no skill named {name!r}{await self._did_you_mean(name)}") from None

    async def _did_you_mean(self, name: str) -> str:
        import difflib

        names = (await self.storage.list(KIND)).names()
        close = difflib.get_close_matches(name, names, n=3)
        return f"; did you mean {', '.join(close)}?" if close else ""

    async def source(self, name: str, have_version: int | None = None) -> dict[str, Any]:
        """What a worker needs to run the skill; the code is omitted if it is up to date."""
        if have_version is not None:
            try:
                info = await self.storage.info(KIND, check_skill_name(name))
            except NotFound:
                info = None
            if info is not None and info.meta.get("version") == have_version:
                meta = formats.upgrade(info)[0].meta
                return {"name": name, "version": have_version, "is_async": meta.get("is_async")}
        skill = await self.get(name)
        out: dict[str, Any] = {"name": name, "version": skill.version, "is_async": skill.is_async}
        if have_version != skill.version:
            out["code"] = skill.code
        return out

    async def list(self) -> Rows:
        """Summaries (no code), sorted by name; unreadable records carry an ``error``."""
        listing = await self.storage.list(KIND)
        records, newer = formats.readable(listing.records)
        out = [summary(r.name, r.meta) for r in records]
        out += [{"name": b.name, "error": b.message} for b in listing.bad]
        out += [{"name": name, "error": why} for name, why in newer]
        return out

    async def names(self) -> builtins.list[str]:
        return (await self.storage.list(KIND)).names()

    async def versions(self, name: str) -> Rows:
        """Earlier versions kept for rollback, oldest first (plus the current one)."""
        check_skill_name(name)
        current = await self.storage.info(KIND, name)
        older = (await self.storage.list(HISTORY, prefix=f"{name}@")).records
        rows = [
            {"version": r.meta.get("version"), "updated": r.meta.get("updated", "")}
            for r in older
            if r.name.split("@", 1)[0] == name
        ]
        rows.sort(key=lambda r: int(r["version"] or 0))
        rows.append(
            {
                "version": current.meta.get("version"),
                "updated": current.meta.get("updated", ""),
                "current": True,
            }
        )
        return rows

    # -- search ----------------------------------------------------------------------
    async def search(self, query: str, limit: int = 10) -> Rows:
        """Skills ranked by relevance to ``query`` (name, description, parameters, code)."""
        if not isinstance(query, str):
            raise ValidationError("query must be a string")
        limit = max(0, int(limit))
        gen = await self.storage.generation(KIND)
        if self._index is None or gen != self._index_gen:
            await self._rebuild(gen)
        index, metas = self._index
        if not query.strip():
            return [summary(n, metas[n]) for n in sorted(metas)[:limit]]
        return [
            {**summary(name, metas[name]), "score": round(score, 4)}
            for name, score in index.search(query, limit)
        ]

    async def _rebuild(self, gen: str) -> None:
        """Read what changed, then tokenize and index in a thread: a library of big skills
        must never stall the host's event loop (every session shares it)."""
        listing = await self.storage.list(KIND)
        missing = [
            r.name
            for r in listing.records
            if (r.name, int(r.meta.get("version", 0))) not in self._texts
        ]
        raw: dict[str, tuple[RecordInfo, bytes]] = {}
        sem = asyncio.Semaphore(32)

        async def load(name: str) -> None:
            async with sem:
                with contextlib.suppress(NotFound, CorruptRecord):
                    raw[name] = await self.storage.read(KIND, name)

        await asyncio.gather(*(load(n) for n in missing))
        texts, index = await asyncio.to_thread(self._index_of, listing.records, raw, self._texts)
        self._texts = texts
        self._index = (index, {rec.name: rec.meta for rec in listing.records})
        self._index_gen = gen

    def _index_of(
        self,
        records: builtins.list[RecordInfo],
        raw: dict[str, tuple[RecordInfo, bytes]],
        known: dict[tuple[str, int], str],
    ) -> tuple[dict[tuple[str, int], str], Any]:
        """(search texts by (name, version), the lexical index): CPU only, for a thread."""
        from ...tools.search import LexicalIndex

        docs: list[tuple[str, str]] = []
        texts: dict[tuple[str, int], str] = {}
        for rec in records:
            key = (rec.name, int(rec.meta.get("version", 0)))
            text = known.get(key)
            if text is None:
                if rec.name not in raw:
                    continue
                try:
                    skill = self._decode(rec.name, *raw[rec.name])
                except CorruptRecord:
                    continue
                key = (rec.name, skill.version)
                text = _search_text(rec.name, skill.meta(), skill.code, skill.notes)
            texts[key] = text
            docs.append((rec.name, text))
        return texts, LexicalIndex(docs)

    # -- writing ---------------------------------------------------------------------
    def _build(
        self,
        name: str,
        code: str,
        description: str,
        parameters: Params,
        tags: Sequence[str] | None,
        notes: str,
    ) -> Skill:
        check_skill_name(name)
        info = analyse_code(code, name)
        if not isinstance(notes, str):
            raise ValidationError("notes must be a string")
        if len(notes) > MAX_NOTES:
            raise ValidationError(f"skill notes are {len(notes)} chars; the limit is {MAX_NOTES}")
        description = (description or "").strip() or info.docstring.strip().split("\n\n")[0]
        return Skill(
            name=name,
            description=_check_description(description),
            code=code,
            parameters=merge_parameters(info, parameters, name),
            tags=check_tags(tags),
            notes=notes,
            is_async=info.is_async,
            signature=info.signature,
        )

    async def _write(self, skill: Skill, kind: str = KIND, record: str | None = None) -> None:
        body = json.dumps({"code": skill.code, "notes": skill.notes}, ensure_ascii=False)
        meta = formats.stamp(kind, skill.meta())
        await self.storage.put(kind, record or skill.name, body.encode(), meta)

    async def create(
        self,
        name: str,
        code: str,
        description: str = "",
        *,
        parameters: Params = None,
        tags: Sequence[str] | None = None,
        notes: str = "",
        replace: bool = False,
    ) -> Skill:
        """Validate (without running) and save a new skill; ``replace`` updates instead."""
        # parsing a big skill's code takes a while: not on the event loop
        skill = await asyncio.to_thread(
            self._build, name, code, description, parameters, tags, notes
        )
        async with self.storage.lock(KIND, name):
            if await self.storage.exists(KIND, name):
                if not replace:
                    current = await self.storage.info(KIND, name)
                    raise ValidationError(
                        f"a skill named {name!r} already exists (version "
                        f"{current.meta.get('version')}); to save this as its next version "
                        "pass replace=True (codemode skills add --replace), or choose "
                        "another name"
                    )
                return await self._replace(skill)
            skill.created = skill.updated = now_iso()
            await self._write(skill)
        return skill

    async def _replace(self, new: Skill) -> Skill:
        """Keep the current version in the history, then write ``new`` over it (locked)."""
        current = await self._load(new.name)
        await self._write(current, HISTORY, f"{new.name}@{current.version}")
        new.version = current.version + 1
        new.created = current.created
        new.updated = now_iso()
        await self._write(new)
        return new

    async def update(
        self,
        name: str,
        *,
        code: str | None = None,
        description: str | None = None,
        parameters: Params = None,
        tags: Sequence[str] | None = None,
        notes: str | None = None,
    ) -> Skill:
        """Change some fields; the previous version is kept for ``rollback``."""
        check_skill_name(name)
        async with self.storage.lock(KIND, name):
            cur = await self.get(name)
            new = await asyncio.to_thread(
                self._build,
                name,
                cur.code if code is None else code,
                cur.description if description is None else description,
                cur.parameters if parameters is None and code is None else parameters,
                cur.tags if tags is None else tags,
                cur.notes if notes is None else notes,
            )
            return await self._replace(new)

    async def rollback(self, name: str, version: int | None = None) -> Skill:
        """Restore an earlier version (default: the one before the current) as a new version."""
        check_skill_name(name)
        async with self.storage.lock(KIND, name):
            cur = await self.get(name)
            target = cur.version - 1 if version is None else int(version)
            if target == cur.version:
                return cur
            try:
                old = await self._load(name, HISTORY, f"{name}@{target}")
            except NotFound:
                kept = [
                    r.meta.get("version")
                    for r in (await self.storage.list(HISTORY, prefix=f"{name}@")).records
                ]
                raise NotFound(
                    f"skill {name!r} has no version {target} to roll back to "
                    f"(current: {cur.version}; kept: {sorted(v for v in kept if v)})"
                ) from None
            return await self._replace(old)

    async def delete(self, name: str) -> bool:
        """Remove the skill and its kept versions; False if there was no such skill."""
        check_skill_name(name)
        async with self.storage.lock(KIND, name):
            existed = await self.storage.delete(KIND, name)
            for rec in (await self.storage.list(HISTORY, prefix=f"{name}@")).records:
                if rec.name.split("@", 1)[0] == name:
                    await self.storage.delete(HISTORY, rec.name)
        return existed
