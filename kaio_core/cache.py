"""The compile cache: artifacts (PTX text, LLVM IR, HSACO bytes) kept in memory and on disk.

Key: sha256 over kaio's version, the printed IR, the target and the options (:func:`cache_key`).
On disk (``$KAIO_CACHE_DIR``, default ``~/.cache/kaio``) each entry is one file::

    KAIOCACHE1 <key> <sha256 of payload> <payload length> <t|b>\\n<payload>

written to a temporary file in the same directory and renamed into place (``os.replace``), so a
reader sees either no file or a whole one, and concurrent writers of one key simply race to
install identical content. On read the header, the key, the length and the checksum are all
verified; an entry that fails any check is deleted and reported as a miss, so the caller
rebuilds it. Entries are not fsynced: what a power loss can leave (a short or torn file) fails
those checks like any other damage. Only text and bytes are stored -- never pickles -- so a
cache file can never run code. ``KAIO_CACHE_DISABLE=1`` turns the disk layer off; an
unwritable directory does the same silently (the cache is an optimisation, never a reason to
fail).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Callable

from .config import settings
from .version import __version__

MAGIC = b"KAIOCACHE1"
_MAX_MEMORY_ENTRIES = 4096


_FINGERPRINT: str | None = None

#: a cheap stamp of kaio's files (path, size and mtime of each; an installed wheel's RECORD),
#: a superset of the compiler's sources: :mod:`kaio.warm` sets it (``package_stamp``). Under it
#: the fingerprint is kept in the disk cache, so a process hashes the compiler's source only
#: when a file changed since one last did (3 ms of a cold first compile otherwise)
stamp_source: Callable[[], str] | None = None


def compiler_fingerprint() -> str:
    """sha256 of the compiler's own source (passes and backends), computed once per process, or
    read from the disk cache where a process with the same :data:`stamp_source` computed it.

    Part of every cache key, so an edited or upgraded compiler never reuses code that an older
    one generated, even when the version number did not change."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        cache = default_cache() if stamp_source is not None else None
        memo = None
        if cache is not None and cache.disk:
            memo = "p" + hashlib.sha256(f"kaio compiler fingerprint {stamp_source()}".encode()
                                        ).hexdigest()[1:]
            got = cache.get(memo)
            if isinstance(got, str) and len(got) == 64 and all(c in _HEX for c in got):
                _FINGERPRINT = got
                return got
        _FINGERPRINT = _hash_compiler_sources()
        if memo is not None:
            cache.put(memo, _FINGERPRINT)
    return _FINGERPRINT


_HEX = frozenset("0123456789abcdef")


def _hash_compiler_sources() -> str:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    roots = [here / "passes", here / "mathlib", here.parent / "backends"]
    # the installed mapping may put backends elsewhere: locate it without importing it
    roots.append(Path(importlib.util.find_spec("kaio.backends").origin).resolve().parent)
    seen = set()
    for root in roots:
        for f in sorted(root.rglob("*.py")) if root.is_dir() else []:
            if f in seen:
                continue
            seen.add(f)
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def cache_key(ir_text: str, target: str, options: dict | None = None, version: str | None = None) -> str:
    """sha256 hex of (kaio version, compiler fingerprint, printed IR, target, options)."""
    if version is None:
        version = __version__
    blob = json.dumps({"version": version, "compiler": compiler_fingerprint(), "ir": ir_text,
                       "target": target, "options": options or {}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def default_dir() -> Path:
    env = settings().cache_dir
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kaio"


class CompileCache:
    """Two-level cache of compile artifacts. ``stats`` counts hits (memory / disk), misses,
    and corrupt entries found and deleted."""

    def __init__(self, directory: str | os.PathLike | None = None, *, disk: bool | None = None):
        self.directory = Path(directory) if directory is not None else default_dir()
        if disk is None:
            disk = not settings().cache_disable
        self.disk = disk
        self._memory: dict[str, str | bytes] = {}
        self._lock = threading.Lock()
        self.stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt": 0, "writes": 0}

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.kc"

    # --- reading --------------------------------------------------------------------------
    def get(self, key: str) -> str | bytes | None:
        """The payload stored under ``key`` or None (a corrupt disk entry is deleted)."""
        with self._lock:
            v = self._memory.get(key)
        if v is not None:
            self.stats["memory_hits"] += 1
            return v
        v = self._read(key) if self.disk else None
        if v is None:
            self.stats["misses"] += 1
            return None
        self.stats["disk_hits"] += 1
        self._remember(key, v)
        return v

    def _read(self, key: str) -> str | bytes | None:
        # a str path and open(): a warm first launch reads three entries, and pathlib's
        # objects cost more than the read
        p = os.path.join(os.fspath(self.directory), key[:2], key + ".kc")
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError:
            return None
        payload = _decode(data, key)
        if payload is None:
            self.stats["corrupt"] += 1
            try:
                os.unlink(p)
            except OSError:  # already replaced or removed by another process: fine
                pass
        return payload

    # --- writing --------------------------------------------------------------------------
    def put(self, key: str, payload: str | bytes) -> None:
        """Store ``payload`` (str or bytes) under ``key`` in memory and, atomically, on disk."""
        if not isinstance(payload, (str, bytes)):
            raise TypeError(f"the compile cache stores str or bytes, not {type(payload).__name__}")
        self._remember(key, payload)
        if self.disk:
            try:
                self._write(key, payload)
                self.stats["writes"] += 1
            except OSError:  # read-only or full disk: keep working from memory
                pass

    def _write(self, key: str, payload: str | bytes) -> None:
        p = self.path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=p.parent)
        try:
            # no fsync: the rename makes the entry appear whole to every other process, and a
            # file a power loss left short or torn fails the read's length and sha256 checks
            # (deleted, rebuilt); an fsync per entry cost a cold first launch up to 3 of them
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(key, payload))
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _remember(self, key: str, payload) -> None:
        with self._lock:
            if len(self._memory) >= _MAX_MEMORY_ENTRIES:
                self._memory.pop(next(iter(self._memory)))  # oldest first
            self._memory[key] = payload

    def get_or_build(self, key: str, build: Callable[[], str | bytes]) -> str | bytes:
        """The cached payload, or ``build()``'s result after storing it."""
        v = self.get(key)
        if v is None:
            v = build()
            self.put(key, v)
        return v

    def stored_keys(self) -> list[str]:
        """The keys of the entries on disk (unverified: :meth:`get` checks each one)."""
        if not (self.disk and self.directory.is_dir()):
            return []
        return sorted(f.stem for f in self.directory.glob("*/*.kc"))

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()

    def clear(self) -> int:
        """Forget everything (memory and this cache's files on disk); returns files removed."""
        self.clear_memory()
        n = 0
        if self.directory.is_dir():
            for f in self.directory.glob("*/*.kc"):
                try:
                    f.unlink()
                    n += 1
                except OSError:
                    pass
        return n


def _encode(key: str, payload: str | bytes) -> bytes:
    kind, body = (b"t", payload.encode()) if isinstance(payload, str) else (b"b", payload)
    digest = hashlib.sha256(body).hexdigest().encode()
    return b" ".join([MAGIC, key.encode(), digest, str(len(body)).encode(), kind]) + b"\n" + body


def _decode(data: bytes, key: str) -> str | bytes | None:
    head, sep, body = data.partition(b"\n")
    if not sep:
        return None
    parts = head.split(b" ")
    if len(parts) != 5 or parts[0] != MAGIC or parts[1].decode(errors="replace") != key:
        return None
    try:
        length = int(parts[3])
    except ValueError:
        return None
    if len(body) != length or hashlib.sha256(body).hexdigest().encode() != parts[2]:
        return None
    if parts[4] == b"t":
        try:
            return body.decode()
        except UnicodeDecodeError:
            return None
    return body if parts[4] == b"b" else None


_default: CompileCache | None = None


def default_cache() -> CompileCache:
    """The process-wide cache (directory read from the environment on first use)."""
    global _default
    if _default is None:
        _default = CompileCache()
    return _default


def set_default_cache(cache: CompileCache | None) -> None:
    """Replace the process-wide cache (None: recreate from the environment on next use)."""
    global _default
    _default = cache
