"""AMDGPU code objects (HSACO): read the metadata note and check it against kaio's view.

The code object is an ELF64 shared object. Its ``NT_AMDGPU_METADATA`` note (owner "AMDGPU",
type 32) holds a msgpack map: ``amdhsa.version``, ``amdhsa.target`` and ``amdhsa.kernels`` (one
map per kernel: ``.name``, ``.symbol``, ``.args``, ``.group_segment_fixed_size``,
``.wavefront_size``, register counts, spills, ...). pyelftools reads the ELF structure (header,
sections, notes, symbols); this module decodes only the AMDGPU-specific parts (the msgpack
metadata and the HSA OS ABI version), so it runs anywhere, no ROCm needed.

:func:`validate_code_object` is what CI runs on every kernel: symbol present, target string,
explicit argument layout equal to what kaio's HIP launcher packs, LDS size equal to kaio's
shared-memory plan, wavefront size, the code object version (the ELF header's EI_ABIVERSION:
3 for v5, 4 for v6; and the metadata's ``amdhsa.version``); register counts and spills are
recorded in the report.
"""
from __future__ import annotations

import functools
import io
import re
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
LDS_ALIGN = 16   # the emitter aligns every shared array to 16 bytes
# What pyelftools (and the stream under it) raise on truncated or corrupt input (with its
# ELFError); it parses lazily, so these can come from any walk over sections, notes or symbols.
_MALFORMED = (ValueError, IndexError, OverflowError, EOFError)


class CodeObjectError(CompileError):
    """The code object is not a well-formed AMDGPU ELF or lacks its metadata."""


@dataclass(frozen=True)
class _ElfView:
    """What kaio reads of a code object's ELF structure."""

    osabi: int                                   # e_ident[EI_OSABI]
    abi_version: int                             # e_ident[EI_ABIVERSION]
    notes: tuple[tuple[str, int, bytes], ...]    # (owner, type, descriptor) of every note
    symbols: frozenset[str]                      # names in .symtab and .dynsym


def _number(value, enum: dict) -> int:
    # pyelftools names the values it knows (EI_OSABI 64 reads 'ELFOSABI_ARM_AEABI', note type 1
    # 'NT_GNU_ABI_TAG' whatever the owner); AMDGPU's meanings go by the number.
    return enum[value] if isinstance(value, str) else value


@functools.lru_cache(maxsize=16)   # validation, the HIP loader and reports read one object often
def _scan(elf: bytes) -> _ElfView:
    """One pass of pyelftools over a 64-bit little-endian ELF; malformed is a CodeObjectError.
    pyelftools is imported here, not at module load: kaio runs (and compiles for NVIDIA) on a
    machine without it; reading AMD code objects needs it."""
    try:
        from elftools.common.exceptions import ELFError  # lazy: pyelftools, optional
        from elftools.elf.elffile import ELFFile  # lazy: pyelftools, optional
        from elftools.elf.enums import ENUM_EI_OSABI, ENUM_NOTE_N_TYPE  # lazy: pyelftools, optional
        from elftools.elf.sections import NoteSection, SymbolTableSection  # lazy: pyelftools, optional
    except ImportError as e:
        raise CodeObjectError("reading AMD code objects needs pyelftools (pip install "
                              "pyelftools)") from e
    try:
        f = ELFFile(io.BytesIO(elf))
        if f.elfclass != 64 or not f.little_endian:
            raise CodeObjectError("not a 64-bit little-endian ELF (AMDGPU code objects are)")
        found, names = [], set()
        for s in f.iter_sections():
            if isinstance(s, NoteSection):
                found += [(n["n_name"] or "", _number(n["n_type"], ENUM_NOTE_N_TYPE),
                           bytes(n["n_descdata"])) for n in s.iter_notes()]
            elif isinstance(s, SymbolTableSection):
                names.update(sym.name for sym in s.iter_symbols() if sym.name)
        ident = f.header.e_ident
        return _ElfView(_number(ident.EI_OSABI, ENUM_EI_OSABI), ident.EI_ABIVERSION, tuple(found),
                        frozenset(names))
    except (ELFError, *_MALFORMED) as e:
        raise CodeObjectError(f"not a well-formed ELF file: {e}") from e


def notes(elf: bytes) -> list[tuple[str, int, bytes]]:
    """All ELF notes as (owner, type, descriptor bytes)."""
    return list(_scan(bytes(elf)).notes)


def symbols(elf: bytes) -> set[str]:
    """Names in the ELF's symbol tables (.symtab and .dynsym)."""
    return set(_scan(bytes(elf)).symbols)


def code_object_version(elf: bytes) -> int | None:
    """The code object version an AMDGPU ELF's header says (its EI_ABIVERSION under the HSA
    OS ABI), or None when the header is not one of a known version."""
    try:
        view = _scan(bytes(elf))
    except CodeObjectError:
        return None
    if view.osabi != ELFOSABI_AMDGPU_HSA:
        return None
    return next((v for v, a in ABI_VERSION.items() if a == view.abi_version), None)


def metadata(elf: bytes) -> dict:
    """The decoded NT_AMDGPU_METADATA map of a code object."""
    for owner, typ, desc in notes(elf):
        if owner == "AMDGPU" and typ == NT_AMDGPU_METADATA:
            try:
                md = msgpack.unpackb(desc, raw=False, strict_map_key=False)
            except (ValueError, TypeError, msgpack.UnpackException) as e:   # TypeError: a map key
                raise CodeObjectError(f"NT_AMDGPU_METADATA note is not valid msgpack: {e}") from e
            if not isinstance(md, dict):
                raise CodeObjectError("NT_AMDGPU_METADATA note is not a msgpack map")
            return md
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
    return _kernel_metas(metadata(elf))


def _kernel_metas(md: dict) -> dict[str, KernelMeta]:
    try:
        return _kernel_entries(md)
    except (KeyError, TypeError, AttributeError) as e:
        raise CodeObjectError(f"malformed amdhsa.kernels metadata: {e!r}") from e


#: the KernelMeta fields that are numbers, each read from the metadata key "." + its name
_COUNTS = ("group_segment_fixed_size", "private_segment_fixed_size", "kernarg_segment_size",
           "kernarg_segment_align", "wavefront_size", "sgpr_count", "vgpr_count", "agpr_count",
           "sgpr_spill_count", "vgpr_spill_count")


def _kernel_entries(md: dict) -> dict[str, KernelMeta]:
    # The checks below hold the types validate_code_object compares and formats, so a corrupt
    # map is refused here rather than failing there.
    target = md.get("amdhsa.target", "")
    out = {}
    for k in md.get("amdhsa.kernels", []):
        name, symbol, args = k[".name"], k.get(".symbol", ""), list(k.get(".args", []))
        counts = {f: k.get("." + f, 0) for f in _COUNTS}
        if not all(isinstance(v, str) for v in (name, symbol, target)):
            raise TypeError("a kernel's .name, .symbol or amdhsa.target is not a string")
        if not all(isinstance(a, dict) and isinstance(a.get(".value_kind", ""), str) for a in args):
            raise TypeError(f"{name}: an .args entry is not a map with a string .value_kind")
        if not all(isinstance(v, int) for v in counts.values()):
            raise TypeError(f"{name}: a size or register count is not an integer")
        out[name] = KernelMeta(name=name, symbol=symbol, args=args, target=target, raw=k, **counts)
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
    """Bytes of static LDS kaio's kernel uses: its shared arrays that are ever read (loaded,
    loaded as a kaio.mma fragment or updated atomically -- arrays only written are dead and
    LLVM drops them), largest first,
    each at a 16-byte aligned offset (the layout LLVM's LDS lowering gives 16-aligned arrays).
    ``kernel`` is the IR as compiled, i.e. after ``target_pipeline``."""
    read = {op.operands[0].id for op in kernel.walk() if op.opcode in ("load", "atomic", "mma_load")}
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
        md = metadata(hsaco)
        metas = _kernel_metas(md)
        view = _scan(bytes(hsaco))
    except CodeObjectError as e:
        rep.errors.append(f"unreadable code object: {e}")
        return rep
    md_version = list(md.get("amdhsa.version", []))
    rep.version = code_object_version(hsaco)
    if rep.version != version:
        rep.errors.append(f"code object version {rep.version} (ELF OS ABI {view.osabi}, ABI version "
                          f"{view.abi_version}), expected {version} (OS ABI {ELFOSABI_AMDGPU_HSA}, ABI "
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
        if sym not in view.symbols:
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
