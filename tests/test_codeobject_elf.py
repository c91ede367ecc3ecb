"""The ELF side of code-object reading (pyelftools): notes, symbols and the header's version
come out as before, and a truncated or corrupt file is a CodeObjectError (or an invalid report),
never an internal exception."""
from __future__ import annotations

import random
import struct

import llvm_kernels as K
import pytest

from kaio.backends import codeobject, llvm_compile, targets
from kaio.backends.abi import kernel_abi
from kaio.errors import CompileError

try:
    llvm_compile.find_linker()
    NO_LLD = ""
except CompileError as e:
    NO_LLD = str(e)
needs_lld = pytest.mark.skipif(bool(NO_LLD), reason=NO_LLD or "ld.lld present")


@pytest.fixture(scope="module")
def saxpy_hsaco():
    return targets.emit(K.saxpy(), "hsaco", "gfx90a")


@needs_lld
def test_notes_and_symbols(saxpy_hsaco):
    found = codeobject.notes(saxpy_hsaco)
    md = [(o, t) for o, t, d in found if o == "AMDGPU"]
    assert md == [("AMDGPU", codeobject.NT_AMDGPU_METADATA)]
    assert all(isinstance(t, int) and isinstance(d, bytes) for _, t, d in found)
    syms = codeobject.symbols(saxpy_hsaco)
    assert {"saxpy", "saxpy.kd"} <= syms and "" not in syms


@needs_lld
def test_header_version_reads_the_hsa_os_abi(saxpy_hsaco):
    # EI_OSABI 64 is both ELFOSABI_AMDGPU_HSA and (to pyelftools) ELFOSABI_ARM_AEABI
    assert codeobject.code_object_version(saxpy_hsaco) == 5
    other_os = bytearray(saxpy_hsaco)
    other_os[7] = 0                                     # ELFOSABI_NONE
    assert codeobject.code_object_version(bytes(other_os)) is None
    assert codeobject.code_object_version(b"garbage") is None


def test_elf32_is_refused():
    hdr = b"\x7fELF\x01\x01\x01" + b"\0" * 9 + struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, 0, 0, 0, 0,
                                                              52, 0, 0, 40, 0, 0)
    with pytest.raises(codeobject.CodeObjectError, match="64-bit"):
        codeobject.notes(hdr)


def _corruptions(elf: bytes, n: int, seed: int = 0):
    rnd = random.Random(seed)
    yield from (elf[:k] for k in (0, 4, 16, 63, 64, 200, len(elf) // 2, len(elf) - 1))
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    for _ in range(n):
        b = bytearray(elf)
        for _ in range(rnd.randint(1, 4)):   # the header, the section table, or anywhere
            where = rnd.choice((range(64), range(shoff, len(elf)), range(len(elf))))
            b[rnd.choice(where)] = rnd.randrange(256)
        yield bytes(b)


@needs_lld
def test_corrupt_code_objects_fail_cleanly(saxpy_hsaco):
    k = K.saxpy()
    lowered = targets.lower(k, targets.get_target("gfx90a").options())
    abi = kernel_abi(k)
    refused = 0
    for bad in _corruptions(saxpy_hsaco, 400):
        for read in (codeobject.notes, codeobject.symbols, codeobject.metadata, codeobject.kernels):
            try:
                read(bad)
            except codeobject.CodeObjectError:
                refused += 1
        rep = codeobject.validate_code_object(bad, lowered, abi, "gfx90a")   # never raises
        assert rep.ok or rep.errors
    assert refused > 100                                 # the corruptions do reach the parser
