"""The counts of a fuzz campaign: classes overall and per partition, what the false positives
are (grouped by the generator's label at the rejected line), the differential per backend; as
rich tables, as JSON, and the sources of every interesting kernel."""
from __future__ import annotations

import json
import os
from collections import Counter, defaultdict

from rich.console import Console
from rich.table import Table

CLASSES = ("accepted-clean", "accepted-racy", "rejected-racy", "rejected-clean", "shared-uninit",
           "no-launch", "invalid", "oob", "internal")
#: classes that make the run fail (a soundness bug, a kaio bug, or a generator bug)
FAILING = ("accepted-racy", "internal", "invalid", "oob")
#: at most this many sources written per class (and per cause for false positives)
KEEP = 25


def _cause(r: dict) -> str:
    """The most specific label at the rejected line (2-D thread geometry noted)."""
    cause = r["cause"][-1] if r["cause"] else f"(no label) {r['kind']}"
    return cause + (" [2-D block]" if "geometry:2d" in r["features"] else "")


class Summary:
    def __init__(self, opts):
        self.opts = opts
        self.total = 0
        self.seconds = 0.0
        self.incomplete = ""       # why the run stopped early, if it did
        self.counts = Counter()
        self.by_partition = defaultdict(Counter)
        self.by_dtype = defaultdict(Counter)
        self.fp_causes = Counter()
        self.kinds = defaultdict(Counter)       # class -> rejection kind
        self.mutated = defaultdict(Counter)     # 'mutated' | 'unmutated' -> class
        self.features = Counter()
        self.diff = defaultdict(Counter)        # backend -> result -> launches (and kernels)
        self.interesting: list = []
        self.fp_examples = defaultdict(list)

    def add(self, r: dict) -> None:
        cls = r["cls"]
        self.total += 1
        self.counts[cls] += 1
        self.by_partition[r["partition"]][cls] += 1
        self.by_dtype[r["dtype"]][cls] += 1
        self.mutated["mutated" if r["mutations"] else "unmutated"][cls] += 1
        self.features.update(r["features"])
        if r["verdict"] == "rejected":
            self.kinds[cls][r["kind"]] += 1
        for name, stats in r["diff"].items():
            self.diff[name]["kernels"] += 1
            for k, v in stats.items():
                self.diff[name][k] += v
        bad_diff = any(s.get("mismatch") or s.get("error") for s in r["diff"].values())
        if cls == "rejected-clean":
            cause = _cause(r)
            self.fp_causes[cause] += 1
            if len(self.fp_examples[cause]) < KEEP:
                self.fp_examples[cause].append(r)
        # a differential mismatch is interesting whatever the class (rejected-clean kernels run
        # differentially too, and their false-positive examples are capped per cause)
        if (cls not in ("accepted-clean", "rejected-racy", "rejected-clean")) or bad_diff:
            self.interesting.append(r)

    # --- numbers ------------------------------------------------------------------------
    @property
    def clean(self) -> int:
        return self.counts["accepted-clean"] + self.counts["rejected-clean"]

    @property
    def fp_rate(self) -> float:
        """Rejected among the kernels the sanitizer found clean on every launch tried."""
        return self.counts["rejected-clean"] / self.clean if self.clean else 0.0

    @property
    def mismatches(self) -> int:
        return sum(d["mismatch"] + d["error"] for d in self.diff.values())

    @property
    def failed(self) -> bool:
        return any(self.counts[c] for c in FAILING) or self.mismatches > 0

    def as_dict(self) -> dict:
        o = self.opts
        return {
            "command": o.extra.get("command", ""), "seed": o.seed, "count": self.total,
            "requested": len(o.indices()), "incomplete": self.incomplete,
            "backends": list(o.backends), "launches_per_kernel": o.launches,
            "diff_launches": o.diff_launches, "seconds": round(self.seconds, 1),
            "counts": {c: self.counts[c] for c in CLASSES},
            "false_positive_rate": round(self.fp_rate, 4),
            "false_positive_causes": dict(self.fp_causes.most_common()),
            "rejection_kinds": {c: dict(k) for c, k in self.kinds.items()},
            "by_partition": {p: dict(c) for p, c in sorted(self.by_partition.items())},
            "by_dtype": {p: dict(c) for p, c in sorted(self.by_dtype.items())},
            "by_mutation": {k: dict(c) for k, c in self.mutated.items()},
            "differential": {b: dict(c) for b, c in self.diff.items()},
            "unavailable": o.extra.get("unavailable", {}),
            "features": dict(self.features.most_common()),
            "interesting": self.interesting,
            "false_positive_examples": {k: v[:5] for k, v in self.fp_examples.items()},
        }

    # --- output -------------------------------------------------------------------------
    def print(self, console: Console | None = None) -> None:
        console = console or Console()
        t = Table(title=f"kaio fuzz: {self.total} kernels, seed {self.opts.seed}, "
                        f"{self.opts.launches} launches each, {self.seconds:.0f} s")
        t.add_column("class")
        t.add_column("kernels", justify="right")
        t.add_column("%", justify="right")
        for c in CLASSES:
            n = self.counts[c]
            style = "bold red" if c in FAILING and n else None
            t.add_row(c, str(n), f"{100 * n / max(1, self.total):.1f}", style=style)
        console.print(t)
        console.print(f"false-positive rate: {self.counts['rejected-clean']} of {self.clean} sanitizer-clean "
                      f"kernels rejected ({100 * self.fp_rate:.1f}%)")
        p = Table(title="per partition")
        p.add_column("partition")
        short = ("accepted-clean", "accepted-racy", "rejected-racy", "rejected-clean", "shared-uninit")
        for c in short:
            p.add_column(c, justify="right")
        for part, c in sorted(self.by_partition.items()):
            p.add_row(part, *(str(c[k]) for k in short))
        console.print(p)
        if self.fp_causes:
            f = Table(title="false positives by cause (the generator's label at the rejected line)")
            f.add_column("cause")
            f.add_column("kernels", justify="right")
            f.add_column("example")
            for cause, n in self.fp_causes.most_common():
                f.add_row(cause, str(n), self.fp_examples[cause][0]["name"])
            console.print(f)
        if self.diff:
            d = Table(title="differential (launches) against the reference interpreter")
            d.add_column("backend")
            cols = ("kernels", "launches", "identical", "close", "mismatch", "compiled", "error")
            for k in cols:
                d.add_column(k, justify="right")
            for b, c in self.diff.items():
                d.add_row(b, *(str(c[k]) for k in cols))
            console.print(d)
        if self.incomplete:
            console.print(f"[yellow]incomplete ({self.incomplete}): {self.total} of "
                          f"{len(self.opts.indices())} kernels[/yellow]")
        for r in self.interesting[:10]:
            if r["cls"] in FAILING:
                console.print(f"[red]{r['cls']}[/red] {r['name']}: {r['finding'] or r['verdict']} "
                              f"{r['detail'].splitlines()[0] if r['detail'] else ''}")

    def line(self) -> str:
        """One line for logs: the failing classes count as failed."""
        bad = {c: self.counts[c] for c in FAILING}
        c = self.counts
        tail = f"; incomplete: {self.incomplete}" if self.incomplete else ""
        return (f"fuzz: {self.total} kernels, {sum(bad.values()) + self.mismatches} failed ("
                + ", ".join(f"{k}={n}" for k, n in bad.items())
                + f", differential mismatches/errors={self.mismatches}); "
                f"accepted-clean={c['accepted-clean']}, rejected-racy={c['rejected-racy']}, "
                f"rejected-clean={c['rejected-clean']} (false-positive rate {100 * self.fp_rate:.1f}%)"
                + tail)

    def write(self, out_dir: str) -> list:
        """DIR/fuzz.json and DIR/kernels/<class>/<name>.py; returns the JSON path."""
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, "fuzz.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.as_dict(), f, indent=1, default=str)
        kept = Counter()
        for r in self.interesting:
            kept[r["cls"]] += 1
            if kept[r["cls"]] <= KEEP or r["cls"] in FAILING:
                _write_source(out_dir, r["cls"], r, self.opts.seed)
        for cause, rs in self.fp_examples.items():
            for r in rs:
                _write_source(out_dir, "rejected-clean", r, self.opts.seed, cause)
        return [path]


def _write_source(out_dir: str, cls: str, r: dict, seed: int, cause: str = "") -> None:
    if "source" not in r:
        return
    d = os.path.join(out_dir, "kernels", cls)
    os.makedirs(d, exist_ok=True)
    head = [f"# {cls}: kernel {r['index']} of seed {seed} "
            f"(python3 -m kaio.conformance.fuzz --seed {seed} --only {r['index']})",
            f"# partition {r['partition']}, dtype {r['dtype']}, "
            f"mutations: {', '.join(r['mutations']) or 'none'}"]
    if r["message"]:
        head.append(f"# checker: {r['message']}")
    if cause:
        head.append(f"# cause: {cause}")
    if r["finding"]:
        head.append(f"# sanitizer: {r['finding']}: " + (r["detail"].splitlines() or [""])[0])
    if r.get("launch"):
        head.append(f"# launch: {r['launch']}")
    for line in r.get("diff_details", [])[:4]:
        head.append("# differential: " + line.splitlines()[0])
    with open(os.path.join(d, f"{r['name']}.py"), "w", encoding="utf-8") as f:
        f.write("\n".join(head) + "\n" + r["source"])
