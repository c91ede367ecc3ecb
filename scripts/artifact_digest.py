"""Write every stage's text for every kernel the conformance suite launches, on every target.

Used to show that a refactoring leaves generated code byte-identical: run it before and after,
then ``diff -r`` the two folders.

    python3 scripts/artifact_digest.py OUTDIR [--cases NAME ...] [--targets sm_90,gfx942,...]

Kernels are collected by running each case at its 'small' size on the reference backend (the
same launches the suite makes); each unique (IR, fast_math) is emitted once per (stage, target).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys

STAGE_TARGETS = [("lowered", "sm_90"), ("lowered", "gfx942"), ("ptx", "sm_90"), ("ptx", "sm_80"),
                 ("llvm", "gfx942"), ("llvm", "gfx90a"), ("llvm", "gfx1100"),
                 ("llvm", "nvptx64-sm_90"), ("ptx", "nvptx64-sm_90"), ("asm", "gfx942")]


def collect(names):
    from kaio.backends.reference import ReferenceBackend
    from kaio.conformance.cases import all_cases, select
    from kaio.conformance.targets import Recorder, using
    from kaio.ir import print_kernel
    seen = {}
    for case in select(all_cases(), names):
        rec = Recorder(ReferenceBackend(warp_size=32))
        with using(rec, "digest"):
            case.run(case.make_inputs("small"))
        for k, o in rec.log:
            seen.setdefault((print_kernel(k), o), (case.name, k))
    return seen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--cases", nargs="*")
    ap.add_argument("--targets", default="")
    a = ap.parse_args(argv)
    from kaio.backends.targets import emit
    wanted = set(a.targets.split(",")) if a.targets else None
    os.makedirs(a.outdir, exist_ok=True)
    kernels = collect(a.cases)
    index = []
    for (text, opts), (case, k) in sorted(kernels.items(), key=lambda kv: (kv[1][0], kv[0][0])):
        tag = f"{k.name}-{hashlib.sha256(text.encode()).hexdigest()[:10]}{'-fast' if opts.fast_math else ''}"
        for stage, target in STAGE_TARGETS:
            if wanted and target not in wanted:
                continue
            try:
                art = emit(k, stage, target, opts)
            except Exception as e:  # recorded, so a new failure shows in the diff
                art = f"ERROR {type(e).__name__}: {e}"
            with open(os.path.join(a.outdir, f"{tag}.{stage}.{target}"), "w") as f:
                f.write(art)
        index.append(f"{case} {tag}")
    with open(os.path.join(a.outdir, "INDEX"), "w") as f:
        f.write("\n".join(index) + "\n")
    print(f"{len(kernels)} kernels written to {a.outdir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
