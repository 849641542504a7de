"""``FileStorage``: records as files under a workspace directory (the embedded default).

Layout: ``<base>/<kind>/<name>.rec``, one file per record::

    b"CMREC01\\n" | data size (u64) | crc32 (u32) | meta length (u32) | meta JSON | data

A write goes to a temporary file in the same directory, is fsynced, then renamed over the
old record and the directory is fsynced: a crash at any point leaves the old record or the
new one. The size and checksum are filled in last, so a torn or tampered file is reported as
``CorruptRecord`` naming its path. Readers keep their open file, so a concurrent replace
never mixes versions. ``lock()`` uses ``flock`` on ``<base>/.locks/<kind>/<name>.lock``.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import struct
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import ConfigError, CorruptRecord, NotFound, StorageUnavailable
from .base import (
    CHUNK,
    MAX_META,
    BadRecord,
    Data,
    Listing,
    RecordInfo,
    check_kind,
    check_name,
    encode_meta,
    iter_chunks,
    name_problem,
    shell_word,
    shown,
)
from .locks import file_lock

MAGIC = b"CMREC01\n"
FIXED = struct.Struct(">QII")
HEAD = len(MAGIC) + FIXED.size
SUFFIX = ".rec"
STALE_TMP_SECONDS = 3600.0
INLINE_READ = 64 * 1024  # smaller records are read without a thread hop


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Writer:
    """One record being written to a temporary file; ``commit`` renames it into place."""

    def __init__(self, directory: Path, name: str, meta_raw: bytes, durable: bool) -> None:
        self.tmp = directory / f".tmp-{name}-{uuid.uuid4().hex}"
        self.durable = durable
        self.size = 0
        self.crc = 0
        self.meta_len = len(meta_raw)
        self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            self._write_all(MAGIC + FIXED.pack(0, 0, self.meta_len) + meta_raw)
        except BaseException:
            self.abort()
            raise

    def _write_all(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def write(self, chunk: bytes | memoryview) -> None:
        self.crc = zlib.crc32(chunk, self.crc)
        self.size += len(chunk)
        self._write_all(chunk)

    def commit(self, final: Path) -> None:
        try:
            os.pwrite(self.fd, FIXED.pack(self.size, self.crc, self.meta_len), len(MAGIC))
            if self.durable:
                os.fsync(self.fd)
            os.close(self.fd)
            self.fd = -1
            os.rename(self.tmp, final)
        except BaseException:
            self.abort()
            raise
        if self.durable:
            _fsync_dir(final.parent)

    def abort(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with suppress(FileNotFoundError):
            os.unlink(self.tmp)


def _write_error(final: Path, exc: OSError) -> StorageUnavailable:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageUnavailable(
            f"the disk holding {final.parent} is full ({exc.strerror}): {final.name} was not "
            "saved and its previous version, if any, is unchanged. Free space on that disk, "
            "or delete records you no longer need"
        )
    return StorageUnavailable(f"cannot write {final}: {exc}")


def _read_header(f: BinaryIO, path: Path) -> tuple[int, int, dict[str, Any]]:
    head = f.read(HEAD)
    if len(head) < HEAD or head[: len(MAGIC)] != MAGIC:
        raise CorruptRecord(f"{path}: not a codemode record (bad or missing header)")
    size, crc, meta_len = FIXED.unpack_from(head, len(MAGIC))
    if meta_len > MAX_META:
        raise CorruptRecord(f"{path}: metadata length {meta_len} is out of range")
    raw = f.read(meta_len)
    if len(raw) != meta_len:
        raise CorruptRecord(f"{path}: truncated metadata")
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        raise CorruptRecord(f"{path}: metadata is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise CorruptRecord(f"{path}: metadata is not a JSON object")
    actual = os.fstat(f.fileno()).st_size
    if actual != HEAD + meta_len + size:
        raise CorruptRecord(
            f"{path}: expected {size} bytes of data, found {actual - HEAD - meta_len}"
        )
    return size, crc, meta


def _bad_file(path: str, name: str, problem: str) -> BadRecord:
    """A file in a record directory that no record can be named after, and the fix."""
    where = shown(path)
    fixed = os.path.join(os.path.dirname(path), f"renamed{SUFFIX}")
    return BadRecord(
        shown(name),
        where,
        f"{where}: {problem}; skipped. Rename it (e.g. mv {shell_word(path)} "
        f"{shell_word(fixed)}) or delete it",
    )


class FileStorage:
    """Records in files under ``base``; safe for many processes on one machine."""

    def __init__(
        self,
        base: str | os.PathLike[str] | None = None,
        *,
        base_path: str | os.PathLike[str] | None = None,
        durable: bool = True,
    ) -> None:
        if (base is None) == (base_path is None):
            raise ConfigError("FileStorage needs its directory: FileStorage(base_path=...)")
        root = base if base is not None else base_path
        assert root is not None
        self.base = Path(root).expanduser().absolute()
        self.durable = durable
        # Listing cache: a replaced record is a new file (new inode), so (inode, mtime,
        # size) identifies a header; only files that changed are opened again.
        self._headers: dict[str, tuple[tuple[int, int, int], RecordInfo]] = {}
        try:
            self.base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageUnavailable(
                f"cannot create storage directory {self.base}: {exc}"
            ) from None

    def __repr__(self) -> str:
        return f"FileStorage({str(self.base)!r})"

    def describe(self) -> str:
        return f"files under {self.base}"

    # -- paths -------------------------------------------------------------------------
    def _dir(self, kind: str) -> Path:
        d = self.base / check_kind(kind)
        d.mkdir(exist_ok=True)
        return d

    def path(self, kind: str, name: str) -> Path:
        """The file holding a record (for messages and tests)."""
        return self.base / check_kind(kind) / f"{check_name(name)}{SUFFIX}"

    def _bump(self, directory: Path) -> None:
        tmp = directory / f".gen-{uuid.uuid4().hex}"
        try:
            tmp.write_text(uuid.uuid4().hex)
            os.replace(tmp, directory / ".gen")
        except OSError:  # a full disk: dropping the token still changes the generation
            with suppress(OSError):
                tmp.unlink()
            with suppress(OSError):
                (directory / ".gen").unlink()

    # -- writing -----------------------------------------------------------------------
    async def put(
        self, kind: str, name: str, data: Data, meta: Mapping[str, Any] | None = None
    ) -> RecordInfo:
        final = self.path(kind, name)
        meta_raw = encode_meta(meta)
        directory = self._dir(kind)
        if isinstance(data, bytes | bytearray | memoryview) and len(data) <= CHUNK:
            small = memoryview(data).cast("B")

            def write_small() -> _Writer:
                w = _Writer(directory, name, meta_raw, self.durable)
                try:
                    w.write(small)
                except BaseException:
                    w.abort()
                    raise
                w.commit(final)
                return w

            try:
                writer = await asyncio.to_thread(write_small)
            except OSError as exc:
                raise _write_error(final, exc) from None
        else:
            try:
                writer = await asyncio.to_thread(_Writer, directory, name, meta_raw, self.durable)
            except OSError as exc:
                raise _write_error(final, exc) from None
            try:
                async for chunk in iter_chunks(data):
                    await asyncio.to_thread(writer.write, chunk)
                await asyncio.to_thread(writer.commit, final)
            except OSError as exc:
                writer.abort()
                raise _write_error(final, exc) from None
            except BaseException:
                writer.abort()
                raise
        self._bump(directory)
        return RecordInfo(kind, name, writer.size, json.loads(meta_raw))

    async def delete(self, kind: str, name: str) -> bool:
        path = self.path(kind, name)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageUnavailable(f"cannot delete {path}: {exc}") from None
        if self.durable:
            await asyncio.to_thread(_fsync_dir, path.parent)
        self._bump(path.parent)
        return True

    # -- reading -----------------------------------------------------------------------
    def _open(self, kind: str, name: str) -> tuple[BinaryIO, Path]:
        path = self.path(kind, name)
        try:
            return open(path, "rb"), path
        except FileNotFoundError:
            raise NotFound(f"no {kind} record named {name!r}") from None
        except OSError as exc:
            raise CorruptRecord(f"{path}: cannot be read ({exc})") from None

    def _info_sync(self, kind: str, name: str) -> RecordInfo:
        f, path = self._open(kind, name)
        with f:
            size, _crc, meta = _read_header(f, path)
        return RecordInfo(kind, name, size, meta)

    def _read_sync(self, kind: str, name: str) -> tuple[RecordInfo, bytes]:
        f, path = self._open(kind, name)
        with f:
            size, crc, meta = _read_header(f, path)
            data = f.read(size)
        if len(data) != size or zlib.crc32(data) != crc:
            raise CorruptRecord(f"{path}: data does not match its checksum")
        return RecordInfo(kind, name, size, meta), data

    async def info(self, kind: str, name: str) -> RecordInfo:
        # A header is a few hundred bytes: reading it inline beats a thread hop.
        return self._info_sync(kind, name)

    async def exists(self, kind: str, name: str) -> bool:
        return self.path(kind, name).exists()

    async def read(self, kind: str, name: str) -> tuple[RecordInfo, bytes]:
        try:
            small = os.stat(self.path(kind, name)).st_size <= INLINE_READ
        except OSError:
            small = True  # _read_sync reports it
        if small:
            return self._read_sync(kind, name)
        return await asyncio.to_thread(self._read_sync, kind, name)

    async def stream(
        self, kind: str, name: str, chunk_size: int = CHUNK
    ) -> tuple[RecordInfo, AsyncIterator[bytes]]:
        def open_() -> tuple[BinaryIO, Path, int, int, dict[str, Any]]:
            f, path = self._open(kind, name)
            try:
                size, crc, meta = _read_header(f, path)
            except BaseException:
                f.close()
                raise
            return f, path, size, crc, meta

        f, path, size, crc, meta = await asyncio.to_thread(open_)

        async def chunks() -> AsyncIterator[bytes]:
            seen = 0
            running = 0
            try:
                while True:
                    chunk = await asyncio.to_thread(f.read, chunk_size)
                    if not chunk:
                        break
                    seen += len(chunk)
                    running = zlib.crc32(chunk, running)
                    yield chunk
            finally:
                f.close()
            if seen != size or running != crc:
                raise CorruptRecord(f"{path}: data does not match its checksum")

        return RecordInfo(kind, name, size, meta), chunks()

    def _list_sync(self, kind: str, prefix: str) -> Listing:
        directory = self._dir(kind)
        out = Listing()
        now = time.time()
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            fname = entry.name
            if fname.startswith(".tmp-"):
                self._drop_stale(entry.path, now)
                continue
            if fname.startswith(".") or not fname.endswith(SUFFIX):
                continue
            name = fname[: -len(SUFFIX)]
            if not name.startswith(prefix):
                continue
            problem = name_problem(name)
            if problem is not None:
                out.bad.append(_bad_file(entry.path, name, problem))
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
            hit = self._headers.get(entry.path)
            if hit is not None and hit[0] == key:
                out.records.append(hit[1])
                continue
            try:
                info = self._info_sync(kind, name)
            except NotFound:
                continue
            except CorruptRecord as exc:
                out.bad.append(BadRecord(name, entry.path, str(exc)))
                continue
            self._headers[entry.path] = (key, info)
            out.records.append(info)
        return out

    @staticmethod
    def _drop_stale(path: str, now: float) -> None:
        """Temporary files of writers that died long ago are garbage."""
        try:
            if now - os.stat(path).st_mtime > STALE_TMP_SECONDS:
                os.unlink(path)
        except OSError:
            pass

    async def list(self, kind: str, prefix: str = "") -> Listing:
        return await asyncio.to_thread(self._list_sync, kind, prefix)

    async def generation(self, kind: str) -> str:
        try:
            return (self.base / check_kind(kind) / ".gen").read_text()
        except FileNotFoundError:
            return "0"

    @asynccontextmanager
    async def lock(self, kind: str, name: str, timeout: float = 30.0) -> AsyncIterator[None]:
        directory = self.base / ".locks" / check_kind(kind)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{check_name(name)}.lock"

        def busy() -> Exception:
            return StorageUnavailable(f"{path} stayed locked by another writer for {timeout:.0f}s")

        async with file_lock(path, timeout, busy):
            yield

    async def aclose(self) -> None:
        return None
