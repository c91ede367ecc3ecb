"""Compare two conformance reports (JSON) cell by cell: status, max error and, for compiled AMD
cells, the code objects' registers and LDS. Exit status 1 when any cell differs.

    python3 scripts/compare_conformance.py BEFORE.json AFTER.json
"""
from __future__ import annotations

import json
import sys


def cells(path: str) -> dict:
    with open(path) as f:
        rep = json.load(f)
    out = {}
    for row in rep["rows"]:
        for target, c in row["cells"].items():
            builds = [{k: b.get(k) for k in ("kernel", "ok", "sgpr", "vgpr", "agpr", "spills",
                                              "lds_bytes", "scratch_bytes")} for b in c.get("build", [])]
            out[(row["kernel"], target)] = (c["status"], c.get("max_error"), builds)
    return out


def main(argv=None) -> int:
    a_path, b_path = (argv or sys.argv[1:])[:2]
    a, b = cells(a_path), cells(b_path)
    diffs = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    for k in diffs:
        print(f"{k[0]} @ {k[1]}:\n  before {a.get(k)}\n  after  {b.get(k)}")
    print(f"{len(a)} cells before, {len(b)} after, {len(diffs)} differ")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
