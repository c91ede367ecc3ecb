"""AMDGPU code objects (HSACO): read the metadata note and check it against kaio's view.

The code object is an ELF64 shared object. Its ``NT_AMDGPU_METADATA`` note (owner "AMDGPU",
type 32) holds a msgpack map: ``amdhsa.version``, ``amdhsa.target`` and ``amdhsa.kernels`` (one
map per kernel: ``.name``, ``.symbol``, ``.args``, ``.group_segment_fixed_size``,
``.wavefront_size``, register counts, spills, ...). Only the standard library (struct) and
msgpack are used, so this runs anywhere, no ROCm needed.

:func:`validate_code_object` is what CI runs on every kernel: symbol present, target string,
explicit argument layout equal to what kaio's HIP launcher packs, LDS size equal to kaio's
shared-memory plan, wavefront size, the code object version (the ELF header's EI_ABIVERSION:
3 for v5, 4 for v6; and the metadata's ``amdhsa.version``); register counts and spills are
recorded in the report.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import msgpack
import numpy as np

from ..errors import CompileError

NT_AMDGPU_METADATA = 32
ELFOSABI_AMDGPU_HSA = 64
#: code object version -> e_ident[EI_ABIVERSION] (ELFABIVERSION_AMDGPU_HSA_V5 = 3, _V6 = 4)
ABI_VERSION = {4: 2, 5: 3, 6: 4}
#: code object version -> the metadata's ``amdhsa.version`` (v6 kept v5's metadata, 1.2)
METADATA_VERSION = {4: [1, 1], 5: [1, 2], 6: [1, 2]}
_SHT_SYMTAB, _SHT_NOTE, _SHT_DYNSYM = 2, 7, 11
LDS_ALIGN = 16   # the emitter aligns every shared array to 16 bytes


class CodeObjectError(CompileError):
    """The code object is not a well-formed AMDGPU ELF or lacks its metadata."""


@dataclass
class _Section:
    name: str
    type: int
    offset: int
    size: int
    link: int


def _sections(elf: bytes) -> list[_Section]:
    if len(elf) < 64 or elf[:4] != b"\x7fELF":
        raise CodeObjectError("not an ELF file")
    if elf[4] != 2 or elf[5] != 1:
        raise CodeObjectError("not a 64-bit little-endian ELF (AMDGPU code objects are)")
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    raw = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link = struct.unpack_from("<IIQQQQI", elf, shoff + i * shentsize)
        raw.append((name, typ, off, size, link))
    strtab = raw[shstrndx] if shstrndx < len(raw) else None
    out = []
    for name, typ, off, size, link in raw:
        label = _cstr(elf, strtab[2] + name) if strtab else ""
        out.append(_Section(label, typ, off, size, link))
    return out


def _cstr(buf: bytes, off: int) -> str:
    end = buf.index(b"\0", off)
    return buf[off:end].decode("utf-8", "replace")


def notes(elf: bytes) -> list[tuple[str, int, bytes]]:
    """All ELF notes as (owner, type, descriptor bytes)."""
    out = []
    for s in _sections(elf):
        if s.type != _SHT_NOTE:
            continue
        pos, end = s.offset, s.offset + s.size
        while pos + 12 <= end:
            namesz, descsz, typ = struct.unpack_from("<III", elf, pos)
            pos += 12
            name = elf[pos:pos + namesz].rstrip(b"\0").decode("ascii", "replace")
            pos += (namesz + 3) & ~3
            out.append((name, typ, elf[pos:pos + descsz]))
            pos += (descsz + 3) & ~3
    return out


def symbols(elf: bytes) -> set[str]:
    """Names in the ELF's symbol tables (.symtab and .dynsym)."""
    secs = _sections(elf)
    names = set()
    for s in secs:
        if s.type not in (_SHT_SYMTAB, _SHT_DYNSYM):
            continue
        strs = secs[s.link]
        for off in range(s.offset, s.offset + s.size, 24):
            (st_name,) = struct.unpack_from("<I", elf, off)
            if st_name:
                names.add(_cstr(elf, strs.offset + st_name))
    return names


def code_object_version(elf: bytes) -> int | None:
    """The code object version an AMDGPU ELF's header says (its EI_ABIVERSION under the HSA
    OS ABI), or None when the header is not one of a known version."""
    if len(elf) < 16 or elf[:4] != b"\x7fELF" or elf[7] != ELFOSABI_AMDGPU_HSA:
        return None
    return next((v for v, abi in ABI_VERSION.items() if abi == elf[8]), None)


def metadata(elf: bytes) -> dict:
    """The decoded NT_AMDGPU_METADATA map of a code object."""
    for owner, typ, desc in notes(elf):
        if owner == "AMDGPU" and typ == NT_AMDGPU_METADATA:
            return msgpack.unpackb(desc, raw=False, strict_map_key=False)
    raise CodeObjectError("code object has no NT_AMDGPU_METADATA note (not code object v3+?)")


@dataclass
class KernelMeta:
    """One kernel's entry in the metadata, with the fields kaio uses."""

    name: str
    symbol: str
    args: list[dict]
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_segment_size: int
    kernarg_segment_align: int
    wavefront_size: int
    sgpr_count: int
    vgpr_count: int
    agpr_count: int
    sgpr_spill_count: int
    vgpr_spill_count: int
    target: str
    raw: dict = field(repr=False, default_factory=dict)

    @property
    def explicit_args(self) -> list[dict]:
        return [a for a in self.args if not a.get(".value_kind", "").startswith("hidden_")]


def kernels(elf: bytes) -> dict[str, KernelMeta]:
    """Per-kernel metadata of a code object, keyed by kernel name."""
    md = metadata(elf)
    target = md.get("amdhsa.target", "")
    out = {}
    for k in md.get("amdhsa.kernels", []):
        out[k[".name"]] = KernelMeta(
            name=k[".name"], symbol=k.get(".symbol", ""), args=list(k.get(".args", [])),
            group_segment_fixed_size=k.get(".group_segment_fixed_size", 0),
            private_segment_fixed_size=k.get(".private_segment_fixed_size", 0),
            kernarg_segment_size=k.get(".kernarg_segment_size", 0),
            kernarg_segment_align=k.get(".kernarg_segment_align", 0),
            wavefront_size=k.get(".wavefront_size", 0), sgpr_count=k.get(".sgpr_count", 0),
            vgpr_count=k.get(".vgpr_count", 0), agpr_count=k.get(".agpr_count", 0),
            sgpr_spill_count=k.get(".sgpr_spill_count", 0),
            vgpr_spill_count=k.get(".vgpr_spill_count", 0), target=target, raw=k)
    return out


# --- kaio's side ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ArgSlot:
    """Where kaio's launcher puts one flat ABI argument in the kernarg buffer."""

    name: str
    offset: int
    size: int
    value_kind: str        # 'global_buffer' (pointers) or 'by_value'


def kernarg_layout(abi) -> tuple[list[ArgSlot], int]:
    """Explicit kernarg layout kaio packs for a :class:`kaio.backends.abi.KernelABI`:
    each argument at the next multiple of its alignment. Returns (slots, explicit size)."""
    slots, off = [], 0
    for p in abi.params:
        off = (off + p.align - 1) // p.align * p.align
        kind = "global_buffer" if p.kind == "pointer" else "by_value"
        slots.append(ArgSlot(p.name, off, p.size, kind))
        off += p.size
    return slots, off


def shared_memory_plan(kernel) -> int:
    """Bytes of static LDS kaio's kernel uses: its shared arrays that are ever read (loaded or
    updated atomically -- arrays only written are dead and LLVM drops them), largest first,
    each at a 16-byte aligned offset (the layout LLVM's LDS lowering gives 16-aligned arrays).
    ``kernel`` is the IR as compiled, i.e. after ``target_pipeline``."""
    read = {op.operands[0].id for op in kernel.walk() if op.opcode in ("load", "atomic")}
    sizes = []
    for op in kernel.walk():
        if op.opcode == "shared_array" and op.result.id in read:
            t = op.result.type
            sizes.append(int(np.prod(t.static_shape)) * t.dtype.itemsize)
    off = 0
    for s in sorted(sizes, reverse=True):
        off = (off + LDS_ALIGN - 1) // LDS_ALIGN * LDS_ALIGN + s
    return off


@dataclass
class ValidationReport:
    """Outcome of :func:`validate_code_object`: ``errors`` empty means valid."""

    kernel: str
    arch: str
    target: str = ""
    errors: list[str] = field(default_factory=list)
    lds_bytes: int = 0
    kernarg_bytes: int = 0
    sgpr: int = 0
    vgpr: int = 0
    agpr: int = 0
    sgpr_spills: int = 0
    vgpr_spills: int = 0
    private_bytes: int = 0
    version: int | None = None      # the code object version its ELF header says

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_if_failed(self) -> "ValidationReport":
        if self.errors:
            raise CodeObjectError("code object for " + self.arch + " failed validation:\n  "
                                  + "\n  ".join(self.errors), kernel=self.kernel)
        return self

    def summary(self) -> str:
        return (f"{self.kernel} [{self.arch}] {'ok' if self.ok else 'INVALID'}: lds={self.lds_bytes}B "
                f"sgpr={self.sgpr} vgpr={self.vgpr} agpr={self.agpr} spills(s/v)="
                f"{self.sgpr_spills}/{self.vgpr_spills} scratch={self.private_bytes}B "
                f"code-object=v{self.version}")


def validate_code_object(hsaco: bytes, kernel_ir, abi, arch: str, warp_size: int = 64,
                         version: int = 5) -> ValidationReport:
    """Check a code object against kaio's expectations for ``kernel_ir`` on ``arch``: the IR
    as compiled, i.e. lowered for ``arch`` (``kaio.backends.targets.lower``: the shared-memory
    plan counts the reductions' scratch arrays too). ``abi`` is
    ``kaio.backends.abi.kernel_abi(kernel_ir)``; ``version`` the code object version asked for
    (its ELF ABI version and metadata version are checked). Returns a report;
    ``report.raise_if_failed()``."""
    rep = ValidationReport(kernel=abi.entry, arch=arch)
    try:
        metas = kernels(hsaco)
        syms = symbols(hsaco)
        md_version = list(metadata(hsaco).get("amdhsa.version", []))
    except (CodeObjectError, struct.error, ValueError, IndexError) as e:
        rep.errors.append(f"unreadable code object: {e}")
        return rep
    rep.version = code_object_version(hsaco)
    if rep.version != version:
        rep.errors.append(f"code object version {rep.version} (ELF OS ABI {hsaco[7]}, ABI version "
                          f"{hsaco[8]}), expected {version} (OS ABI {ELFOSABI_AMDGPU_HSA}, ABI "
                          f"version {ABI_VERSION.get(version)})")
    if md_version != METADATA_VERSION.get(version):
        rep.errors.append(f"metadata amdhsa.version {md_version}, expected "
                          f"{METADATA_VERSION.get(version)} for code object v{version}")
    km = metas.get(abi.entry)
    if km is None:
        rep.errors.append(f"kernel '{abi.entry}' not in metadata (has: {sorted(metas)})")
        return rep
    rep.target = km.target
    if not re.fullmatch(rf"amdgcn-amd-amdhsa--{re.escape(arch)}(:[A-Za-z0-9_-]+[+-])*", km.target):
        rep.errors.append(f"target {km.target!r} is not amdgcn-amd-amdhsa--{arch}")
    for sym in (abi.entry, km.symbol):
        if sym not in syms:
            rep.errors.append(f"symbol {sym!r} missing from the ELF symbol table")
    if km.symbol != abi.entry + ".kd":
        rep.errors.append(f"kernel descriptor symbol is {km.symbol!r}, expected {abi.entry + '.kd'!r}")
    slots, size = kernarg_layout(abi)
    got = km.explicit_args
    if len(got) != len(slots):
        rep.errors.append(f"{len(got)} explicit kernel arguments in metadata, kaio packs {len(slots)}")
    for s, a in zip(slots, got):
        want = (s.offset, s.size, s.value_kind)
        have = (a.get(".offset"), a.get(".size"), a.get(".value_kind"))
        if want != have:
            rep.errors.append(f"argument '{s.name}': metadata (offset, size, kind) = {have}, "
                              f"kaio packs {want}")
        if s.value_kind == "global_buffer" and a.get(".address_space") != "global":
            rep.errors.append(f"argument '{s.name}': address space {a.get('.address_space')!r}, "
                              "expected 'global'")
    if km.kernarg_segment_size < size:
        rep.errors.append(f"kernarg segment {km.kernarg_segment_size} B is smaller than kaio's {size} B")
    plan = shared_memory_plan(kernel_ir)
    if km.group_segment_fixed_size != plan:
        rep.errors.append(f"LDS size {km.group_segment_fixed_size} B differs from kaio's "
                          f"shared-memory plan {plan} B")
    if km.wavefront_size != warp_size:
        rep.errors.append(f"wavefront size {km.wavefront_size}, expected {warp_size}")
    rep.lds_bytes, rep.kernarg_bytes = km.group_segment_fixed_size, km.kernarg_segment_size
    rep.sgpr, rep.vgpr, rep.agpr = km.sgpr_count, km.vgpr_count, km.agpr_count
    rep.sgpr_spills, rep.vgpr_spills = km.sgpr_spill_count, km.vgpr_spill_count
    rep.private_bytes = km.private_segment_fixed_size
    return rep
