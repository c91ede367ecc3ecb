"""What differs between the LLVM targets kaio emits for, as data.

The emitter in :mod:`kaio.backends.llvm` is target-independent; everything below is looked up,
never branched on. Snippets are LLVM IR text with placeholders the emitter fills:
``{out}`` the result, ``{t1}``..``{t9}`` fresh temporaries, ``{a}``/``{b}`` operands,
``{ax}`` the axis letter (x, y, z), ``{axn}`` the axis number, ``{off2}``/``{off4}`` byte offsets
(2*axis, 4*axis).

Where the sizes come from on amdgcn: workgroup sizes and grid sizes are read from the *hidden
kernel arguments of code object v5* (``llvm.amdgcn.implicitarg.ptr``): ``hidden_block_count_{x,y,z}``
(u32 at offsets 0, 4, 8: number of workgroups) and ``hidden_group_size_{x,y,z}`` (u16 at 12, 14,
16: work-items per workgroup). Code object v5 and v6 both have them (kaio emits v5 by default
through :func:`module_flags`; LLVM 22's own default is v6), and the HIP runtime fills these
hidden arguments after the explicit ones.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class LlvmTarget:
    """One LLVM target: triple, CPU, warp width and the per-target snippets."""

    name: str                      # kaio's target name: 'gfx90a', 'nvptx64-sm_90'
    triple: str
    cpu: str
    features: str
    warp_size: int
    kernel_cc: str                 # calling convention keyword on the kernel definition
    kernel_attrs: dict             # function attributes on the kernel
    datalayout: str
    space: dict                    # kaio address space -> LLVM addrspace number
    alloca_space: int              # addrspace of allocas (datalayout A); kaio's 'local' space
    specials: dict                 # IR special opcode -> snippet producing i32 {out}
    barrier: str                   # snippet with no result
    #: read a 32-bit value ``{a}`` from lane ``{b}`` (i32, 0 <= b < warp_size) of the warp
    lane_read: str
    ballot: str                    # i1 {a} -> i64 {out}: bit k = lane k's predicate
    vote_any: str                  # i1 {a} -> i1 {out}
    vote_all: str                  # i1 {a} -> i1 {out}
    #: atomics: syncscope text per address space ('' = the target's default, system scope)
    atomic_scope: dict = field(default_factory=dict)
    #: fast math: fn -> snippet on float {a} -> float {out} (f32 only); a function missing here
    #: is kaio.mathlib's portable code (exp: its exact range reduction around the exp2 entry)
    fast_f32: dict = field(default_factory=dict)
    #: the flushing forms, for ``math`` ops marked ``ftz`` (subnormals cannot matter there)
    fast_f32_ftz: dict = field(default_factory=dict)
    is_amdgpu: bool = False
    prelude: str = ""              # module-level text every module of this target starts with
    #: function attribute that caps registers per thread (kernel option max_registers)
    max_registers_attr: str = "nvvm.maxnreg"

    @property
    def stages(self) -> tuple[str, ...]:
        return ("llvm", "asm", "hsaco") if self.is_amdgpu else ("llvm", "asm", "ptx")


# data layouts as LLVM 22's target machines report them (tests compare)
_AMD_DL = ("e-m:e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-"
           "p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-"
           "v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9")
_NV_DL = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"

_AMD_IMPLICIT = "{t1} = call ptr addrspace(4) @llvm.amdgcn.implicitarg.ptr()\n"

_AMD_SPECIALS = {
    "thread_idx": "{out} = call i32 @llvm.amdgcn.workitem.id.{ax}()",
    "block_idx": "{out} = call i32 @llvm.amdgcn.workgroup.id.{ax}()",
    # hidden_group_size_{ax}: u16 at 12 + 2*axis
    "block_dim": _AMD_IMPLICIT
    + "{t2} = getelementptr inbounds i8, ptr addrspace(4) {t1}, i64 {off2}\n"
      "{t3} = load i16, ptr addrspace(4) {t2}, align 2\n"
      "{out} = zext i16 {t3} to i32",
    # hidden_block_count_{ax}: u32 at 4*axis
    "grid_dim": _AMD_IMPLICIT
    + "{t2} = getelementptr inbounds i8, ptr addrspace(4) {t1}, i64 {off4}\n"
      "{out} = load i32, ptr addrspace(4) {t2}, align 4",
    "lane_id": "{t1} = call i32 @llvm.amdgcn.mbcnt.lo(i32 -1, i32 0)\n"
               "{out} = call i32 @llvm.amdgcn.mbcnt.hi(i32 -1, i32 {t1})",
}

_AMD_FAST = {
    "exp2": "{out} = call float @llvm.amdgcn.exp2.f32(float {a})",
    "log2": "{out} = call float @llvm.amdgcn.log.f32(float {a})",
    "log": "{t1} = call float @llvm.amdgcn.log.f32(float {a})\n"
           "{out} = fmul float {t1}, 0x3FE62E4300000000",
    # v_sin/v_cos take the angle in revolutions
    "sin": "{t1} = fmul float {a}, 0x3FC45F3060000000\n"
           "{out} = call float @llvm.amdgcn.sin.f32(float {t1})",
    "cos": "{t1} = fmul float {a}, 0x3FC45F3060000000\n"
           "{out} = call float @llvm.amdgcn.cos.f32(float {t1})",
    "rsqrt": "{out} = call float @llvm.amdgcn.rsq.f32(float {a})",
    "sqrt": "{out} = call float @llvm.amdgcn.sqrt.f32(float {a})",
}


def _amdgcn(name: str, cpu: str) -> LlvmTarget:
    return LlvmTarget(
        name=name, triple="amdgcn-amd-amdhsa", cpu=cpu, features="", warp_size=64,
        kernel_cc="amdgpu_kernel", max_registers_attr="amdgpu-num-vgpr",
        # IEEE f32 denormals in and out (no flush); work-group size up to kaio's 1024 limit
        kernel_attrs={"amdgpu-flat-work-group-size": "1,1024",
                      "denormal-fp-math-f32": "ieee,ieee", "uniform-work-group-size": "false"},
        datalayout=_AMD_DL, space={"global": 1, "shared": 3}, alloca_space=5,
        specials=_AMD_SPECIALS,
        barrier='fence syncscope("workgroup") release\n'
                "call void @llvm.amdgcn.s.barrier()\n"
                'fence syncscope("workgroup") acquire',
        # ds_bpermute addresses lanes in bytes
        lane_read="{t1} = shl i32 {b}, 2\n"
                  "{out} = call i32 @llvm.amdgcn.ds.bpermute(i32 {t1}, i32 {a})",
        ballot="{out} = call i64 @llvm.amdgcn.ballot.i64(i1 {a})",
        vote_any="{t1} = call i64 @llvm.amdgcn.ballot.i64(i1 {a})\n"
                 "{out} = icmp ne i64 {t1}, 0",
        vote_all="{t1} = call i64 @llvm.amdgcn.ballot.i64(i1 {a})\n"
                 "{t2} = call i64 @llvm.amdgcn.ballot.i64(i1 true)\n"
                 "{out} = icmp eq i64 {t1}, {t2}",
        atomic_scope={"global": 'syncscope("agent") ', "shared": 'syncscope("workgroup") '},
        fast_f32=_AMD_FAST, is_amdgpu=True)


_NV_SREG = {"thread_idx": "tid", "block_idx": "ctaid", "block_dim": "ntid", "grid_dim": "nctaid"}
_NV_SPECIALS = {k: "{out} = call i32 @llvm.nvvm.read.ptx.sreg.%s.{ax}()" % v for k, v in _NV_SREG.items()}
_NV_SPECIALS["lane_id"] = "{out} = call i32 @llvm.nvvm.read.ptx.sreg.laneid()"

_NV_FAST = {
    "exp2": "{out} = call float @llvm.nvvm.ex2.approx.f(float {a})",
    "log2": "{out} = call float @llvm.nvvm.lg2.approx.f(float {a})",
    "log": "{t1} = call float @llvm.nvvm.lg2.approx.f(float {a})\n"
           "{out} = fmul float {t1}, 0x3FE62E4300000000",
    "sin": "{out} = call float @llvm.nvvm.sin.approx.f(float {a})",
    "cos": "{out} = call float @llvm.nvvm.cos.approx.f(float {a})",
    "rsqrt": "{out} = call float @llvm.nvvm.rsqrt.approx.f(float {a})",
}


def _nvptx(name: str, cpu: str) -> LlvmTarget:
    return LlvmTarget(
        name=name, triple="nvptx64-nvidia-cuda", cpu=cpu, features="+ptx80", warp_size=32,
        kernel_cc="ptx_kernel", kernel_attrs={},
        datalayout=_NV_DL, space={"global": 1, "shared": 3}, alloca_space=0,
        specials=_NV_SPECIALS,
        # LLVM 20 renamed llvm.nvvm.barrier0 to this (bar.sync 0)
        barrier="call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)",
        # {mask}: the lanes of this warp that exist (FunctionEmitter.warp_mask): naming absent
        # lanes of a block's last, partial warp in a .sync op is not allowed
        lane_read="{out} = call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 {mask}, i32 {a}, i32 {b}, i32 31)",
        ballot="{t1} = call i32 @llvm.nvvm.vote.ballot.sync(i32 {mask}, i1 {a})\n"
               "{out} = zext i32 {t1} to i64",
        vote_any="{out} = call i1 @llvm.nvvm.vote.any.sync(i32 {mask}, i1 {a})",
        vote_all="{out} = call i1 @llvm.nvvm.vote.all.sync(i32 {mask}, i1 {a})",
        atomic_scope={"global": "", "shared": ""},
        fast_f32=_NV_FAST,
        fast_f32_ftz={"exp2": "{out} = call float @llvm.nvvm.ex2.approx.ftz.f(float {a})"})


TARGETS: dict[str, LlvmTarget] = {
    "gfx90a": _amdgcn("gfx90a", "gfx90a"),
    "gfx942": _amdgcn("gfx942", "gfx942"),
    "gfx1100": _amdgcn("gfx1100", "gfx1100"),
    "nvptx64-sm_80": _nvptx("nvptx64-sm_80", "sm_80"),
    "nvptx64-sm_86": _nvptx("nvptx64-sm_86", "sm_86"),
    "nvptx64-sm_89": _nvptx("nvptx64-sm_89", "sm_89"),
    "nvptx64-sm_90": _nvptx("nvptx64-sm_90", "sm_90"),
}
# RDNA 3 runs wave32 by default
TARGETS["gfx1100"] = replace(TARGETS["gfx1100"], warp_size=32)


def module_flags(target: LlvmTarget, code_object_version: int = 5) -> str:
    """Module-level metadata a module for ``target`` ends with: on amdgcn, the code object
    version as LLVM's ``amdhsa_code_object_version`` module flag (500 or 600; it takes precedence
    over the backend's default, which is 6 in LLVM 22). Version 5 and 6 have the same hidden
    kernel arguments and metadata (``amdhsa.version`` 1.2); 6 only adds generic-target flags and
    needs a newer loader (docs/backends.md). Empty for the other targets."""
    if not target.is_amdgpu:
        return ""
    # a numbered node far from any the emitter could ever number (it numbers none today)
    return ("!llvm.module.flags = !{!9000}\n"
            f'!9000 = !{{i32 1, !"amdhsa_code_object_version", i32 {int(code_object_version) * 100}}}\n')


_HOST_SPECIALS = {k: "{out} = load i32, ptr @__kaio_%s_{ax}" % k
                  for k in ("thread_idx", "block_idx", "block_dim", "grid_dim")}


def host_target() -> LlvmTarget:
    """The CPU this process runs on, as a test target: one call of the kernel function runs
    one thread, with its ids read from module globals ``@__kaio_<special>_<axis>`` that the
    caller sets. No barriers (a no-op), warp ops or fast math: it exists so tests can execute
    the emitter's target-independent lowering (arithmetic, casts, control flow, memory, math)
    without a GPU."""
    import llvmlite.binding as llvm  # lazy: import time, ~19 ms (a test-only target)
    prelude = "\n".join(f"@__kaio_{k}_{ax} = global i32 0" for k in _HOST_SPECIALS for ax in "xyz")
    return LlvmTarget(
        # a generic CPU, not the host's own: native bf16 conversions (AVX512-BF16) flush
        # denormals, which would make the test harness disagree with IEEE (seen on the H200 host)
        name="host", triple=llvm.get_process_triple(), cpu="generic",
        features="", warp_size=1, kernel_cc="",
        kernel_attrs={}, datalayout="", space={"global": 0, "shared": 0}, alloca_space=0,
        specials=_HOST_SPECIALS, barrier="", lane_read="", ballot="", vote_any="", vote_all="",
        prelude=prelude)


_CALL = re.compile(r"call (.+?) @(llvm\.[\w.{}]+)\(([^)]*)\)")


@functools.lru_cache(maxsize=None)
def snippet_intrinsics(snippet: str) -> tuple[tuple[str, str, tuple], ...]:
    """(return type, name, argument types) of each intrinsic a snippet of these tables calls,
    read once from its text, so the emitter declares what it emits (a name may hold a
    placeholder: ``llvm.nvvm.read.ptx.sreg.tid.{ax}``)."""
    return tuple((ret, name, tuple(a.strip().rsplit(" ", 1)[0] for a in args.split(",") if a.strip()))
                 for ret, name, args in _CALL.findall(snippet))


def get_target(name: str) -> LlvmTarget:
    """The LLVM target called ``name`` (ValueError listing the known ones otherwise)."""
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown LLVM target {name!r}; known: {', '.join(TARGETS)}") from None
