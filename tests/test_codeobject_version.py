"""AMD code object version: kaio emits version 5 by default (ROCm 6.0 .. 6.2 loaders refuse
LLVM 22's default, version 6), version 6 on request, and the code-object check holds the ELF
header's ABI version and the metadata's version to the one asked for."""
from __future__ import annotations

import llvm_kernels as K
import pytest

from kaio import config
from kaio.backends import codeobject, llvm_compile, targets
from kaio.backends.abi import kernel_abi
from kaio.cache import cache_key
from kaio.errors import CompileError
from kaio.ir import print_kernel
from kaio.options import CompileOptions

ARCHS = ("gfx90a", "gfx942", "gfx1100")

try:
    llvm_compile.find_linker()
    NO_LLD = ""
except CompileError as e:
    NO_LLD = str(e)
needs_lld = pytest.mark.skipif(bool(NO_LLD), reason=NO_LLD or "ld.lld present")


@needs_lld
@pytest.mark.parametrize("arch", ARCHS)
def test_default_is_code_object_v5(arch):
    k = K.saxpy()
    hsaco = targets.emit(k, "hsaco", arch)
    assert hsaco[7] == codeobject.ELFOSABI_AMDGPU_HSA
    assert hsaco[8] == 3                                  # ELFABIVERSION_AMDGPU_HSA_V5
    assert codeobject.code_object_version(hsaco) == 5
    assert codeobject.metadata(hsaco)["amdhsa.version"] == [1, 2]
    assert "!\"amdhsa_code_object_version\", i32 500" in targets.emit(k, "llvm", arch)
    assert ".amdhsa_code_object_version 5" in targets.emit(k, "asm", arch)
    assert "code-object=v5" in targets.emit(k, "report", arch)


@needs_lld
@pytest.mark.parametrize("arch", ("gfx90a", "gfx942"))
def test_version_6_on_request(arch):
    k = K.saxpy()
    hsaco = targets.emit(k, "hsaco", arch, code_object_version=6)
    assert hsaco[8] == 4 and codeobject.code_object_version(hsaco) == 6
    assert ".amdhsa_code_object_version 6" in targets.emit(k, "asm", arch, code_object_version=6)
    rep = targets.emit(k, "report", arch, code_object_version=6)
    assert rep.startswith("saxpy [") and "code-object=v6" in rep and "error" not in rep


@needs_lld
def test_validation_holds_the_version_asked_for():
    k = K.saxpy()
    lowered = targets.lower(k, targets.get_target("gfx942").options())
    v5 = targets.emit(k, "hsaco", "gfx942")
    v6 = targets.emit(k, "hsaco", "gfx942", code_object_version=6)
    assert codeobject.validate_code_object(v5, lowered, kernel_abi(k), "gfx942").ok
    rep = codeobject.validate_code_object(v6, lowered, kernel_abi(k), "gfx942", version=5)
    assert not rep.ok and rep.version == 6
    assert any("code object version 6" in e and "expected 5" in e for e in rep.errors), rep.errors
    # a v5 ELF header over v4 metadata (amdhsa.version 1.1): the metadata check catches it
    bad = bytearray(v5)
    bad[8] = 2                                            # ELFABIVERSION_AMDGPU_HSA_V4
    rep = codeobject.validate_code_object(bytes(bad), lowered, kernel_abi(k), "gfx942")
    assert any("code object version 4" in e for e in rep.errors), rep.errors


def test_option_is_in_the_cache_key_and_checked(monkeypatch):
    a = CompileOptions(target="gfx942", warp_size=64, codegen="llvm")
    b = CompileOptions(target="gfx942", warp_size=64, codegen="llvm", code_object_version=6)
    assert a.code_object_version == 5 and a.key()["code_object_version"] == 5
    text = print_kernel(K.saxpy())
    assert cache_key(text, "gfx942", a.key()) != cache_key(text, "gfx942", b.key())
    with pytest.raises(ValueError, match="code_object_version must be one of 5, 6"):
        CompileOptions(target="gfx942", warp_size=64, codegen="llvm", code_object_version=4)
    monkeypatch.setenv("KAIO_AMD_CODE_OBJECT", "6")      # (conftest: setenv reloads settings)
    assert targets.get_target("gfx90a").options().code_object_version == 6
    with pytest.raises(ValueError, match="KAIO_AMD_CODE_OBJECT='4'"):
        config.read({"KAIO_AMD_CODE_OBJECT": "4"})


def test_module_flag_only_on_amdgcn():
    k = K.saxpy()
    assert "amdhsa_code_object_version" not in targets.emit(k, "llvm", "nvptx64-sm_80")
