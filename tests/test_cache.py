"""The on-disk compile cache: keys, round trips, corruption, truncation, concurrent writers."""
from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from kaio.cache import MAGIC, CompileCache, cache_key, default_cache, set_default_cache

IR = "kernel @k(%x: buf<f32, 1, global, in>) params {} {\n}\n"


@pytest.fixture
def cache(tmp_path):
    return CompileCache(tmp_path / "c", disk=True)


def test_key_sensitivity():
    base = cache_key(IR, "sm_90", {"fast_math": False}, version="1.0")
    assert base == cache_key(IR, "sm_90", {"fast_math": False}, version="1.0")
    others = [cache_key(IR + " ", "sm_90", {"fast_math": False}, version="1.0"),
              cache_key(IR, "sm_80", {"fast_math": False}, version="1.0"),
              cache_key(IR, "sm_90", {"fast_math": True}, version="1.0"),
              cache_key(IR, "sm_90", {"fast_math": False, "ptx_version": "8.0"}, version="1.0"),
              cache_key(IR, "sm_90", {"fast_math": False}, version="1.1")]
    assert len({base, *others}) == 6
    # option order does not matter
    assert cache_key(IR, "t", {"a": 1, "b": 2}) == cache_key(IR, "t", {"b": 2, "a": 1})
    assert len(base) == 64 and int(base, 16) >= 0


def test_default_version_is_kaio_version():
    import kaio
    assert cache_key(IR, "sm_90") == cache_key(IR, "sm_90", version=kaio.__version__)


@pytest.mark.parametrize("payload", ["// ptx text\n.version 8.0\n", b"\x00\x01binary\xff" * 100, ""])
def test_roundtrip_disk(cache, payload):
    k = cache_key(IR, "sm_90")
    assert cache.get(k) is None
    cache.put(k, payload)
    fresh = CompileCache(cache.directory, disk=True)  # new process view: memory empty
    got = fresh.get(k)
    assert got == payload and type(got) is type(payload)
    assert fresh.stats["disk_hits"] == 1
    assert fresh.get(k) == payload and fresh.stats["memory_hits"] == 1
    assert cache.path(k).read_bytes().startswith(MAGIC)


def _corrupt_variants(data: bytes):
    head, _, body = data.partition(b"\n")
    flipped = bytearray(body)
    flipped[len(flipped) // 2] ^= 0x40
    return {
        "bitflip": head + b"\n" + bytes(flipped),
        "truncated": data[: len(data) - 7],
        "header_only": head,
        "empty": b"",
        "garbage": b"\x89PNG not a cache file\n...",
        "bad_length": head.replace(b" t", b"x t") + b"\n" + body,
        "extra_bytes": data + b"tail",
    }


@pytest.mark.parametrize("variant", ["bitflip", "truncated", "header_only", "empty", "garbage",
                                     "bad_length", "extra_bytes"])
def test_corrupt_entry_is_deleted_and_rebuilt(cache, variant):
    k = cache_key(IR, "sm_90", {"v": variant})
    cache.put(k, "x" * 1000)
    p = cache.path(k)
    p.write_bytes(_corrupt_variants(p.read_bytes())[variant])
    fresh = CompileCache(cache.directory, disk=True)
    assert fresh.get(k) is None
    assert fresh.stats["corrupt"] == 1 and not p.exists()
    builds = []
    assert fresh.get_or_build(k, lambda: builds.append(1) or "rebuilt") == "rebuilt"
    assert builds == [1]
    assert CompileCache(cache.directory, disk=True).get(k) == "rebuilt"


def test_wrong_key_entry_rejected(cache):
    k1, k2 = cache_key(IR, "sm_90"), cache_key(IR, "sm_80")
    cache.put(k1, "for sm_90")
    # an entry copied under another key's name must not be served for that key
    p2 = cache.path(k2)
    p2.parent.mkdir(parents=True, exist_ok=True)
    p2.write_bytes(cache.path(k1).read_bytes())
    fresh = CompileCache(cache.directory, disk=True)
    assert fresh.get(k2) is None and not p2.exists()
    assert fresh.get(k1) == "for sm_90"


def test_no_pickle_accepted(cache):
    with pytest.raises(TypeError, match="str or bytes"):
        cache.put(cache_key(IR, "x"), {"not": "text"})


def test_memory_only_and_unwritable(tmp_path):
    c = CompileCache(tmp_path / "m", disk=False)
    k = cache_key(IR, "sm_90")
    c.put(k, "abc")
    assert c.get(k) == "abc" and not (tmp_path / "m").exists()
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    c2 = CompileCache(blocker / "sub", disk=True)  # mkdir fails: must not raise
    c2.put(k, "abc")
    assert c2.get(k) == "abc"


def test_env_dir_and_disable(tmp_path, monkeypatch):
    monkeypatch.setenv("KAIO_CACHE_DIR", str(tmp_path / "envdir"))
    monkeypatch.delenv("KAIO_CACHE_DISABLE", raising=False)
    set_default_cache(None)
    try:
        c = default_cache()
        assert c.directory == tmp_path / "envdir" and c.disk
        monkeypatch.setenv("KAIO_CACHE_DISABLE", "1")
        assert not CompileCache().disk
    finally:
        set_default_cache(None)


def test_clear(cache):
    for t in ("a", "b", "c"):
        cache.put(cache_key(IR, t), t)
    assert cache.clear() == 3
    assert cache.get(cache_key(IR, "a")) is None


def _writer(directory, key, n, payload):
    c = CompileCache(directory, disk=True)
    for _ in range(n):
        c.put(key, payload)
        got = CompileCache(directory, disk=True).get(key)
        # a reader racing writers sees a whole entry or none: never a torn one
        if got is not None and got != payload:
            raise AssertionError("torn read")


def test_concurrent_writers(cache):
    k = cache_key(IR, "sm_90", {"concurrent": True})
    payload = "P" * 200_000
    ctx = mp.get_context("spawn" if os.name == "nt" else "fork")
    procs = [ctx.Process(target=_writer, args=(str(cache.directory), k, 20, payload)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    fresh = CompileCache(cache.directory, disk=True)
    assert fresh.get(k) == payload and fresh.stats["corrupt"] == 0
    leftovers = [f for f in cache.path(k).parent.iterdir() if f.suffix == ".tmp"]
    assert leftovers == []
