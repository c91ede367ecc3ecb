"""Render a report (its JSON dict) as Markdown and as one self-contained HTML page.

Both read only :meth:`kaio.conformance.report.Report.as_dict`, so they can be regenerated from a
saved ``conformance.json``. The HTML page has inline CSS and no external resources.
"""
from __future__ import annotations

import html

from .portability import portable_summary, width_counts, width_flags

SYMBOL = {"identical": "✅ identical", "within-bound": "🟡 within bound",
          "compiled": "🔧 compiled and validated", "not-available": "⛔ not available on this target",
          "failing": "❌ FAILING", "not-run": "⚪ not run"}


def _cell_text(c: dict) -> str:
    s = c["status"]
    if s == "identical":
        return "identical" if c.get("baseline") in (None, "", "numpy") else f"identical to {c['baseline']}"
    if s == "within-bound":
        err = c.get("max_error")
        if c.get("baseline") not in (None, "", "numpy") and err is not None:
            unit = " ulp" if str(c.get("rule", "")).startswith("ulp") else ""
            return f"within {c['rule']} of {c['baseline']} (max {_num(err)}{unit})"
        np_ = c.get("numpy", {})
        if "max_error" in np_ and str(np_.get("bound", "")).startswith("ulp"):
            return f"within {np_['bound']} of numpy (max {_num(np_['max_error'])} ulp)"
        return f"within {np_.get('bound', '')} of numpy (max abs {_num(np_.get('max_abs_error'))})"
    if s == "compiled":
        b = c.get("build", [])
        if not b:
            return "compiled and validated"
        more = f", {len(b)} kernels)" if len(b) > 1 else ")"
        lds = max(x["lds_bytes"] for x in b)
        if any(x.get("registers") for x in b):          # NVIDIA: ptxas -v
            spills = max(x.get("spill_stores", 0) + x.get("spill_loads", 0) for x in b)
            return (f"compiled and validated ({max(x['registers'] for x in b)} regs, smem {lds} B"
                    + (f", spills {spills} B" if spills else "") + more)
        return f"compiled and validated (vgpr {max(x['vgpr'] for x in b)}, LDS {lds} B" + more
    if s == "not-available":
        return "not available on this target"
    if s == "failing":
        m = c.get("mismatch") or {}
        if m:
            return (f"FAIL vs {m.get('against')}: {m.get('output')}{m.get('index')} "
                    f"{m.get('got')} != {m.get('want')}")
        return "FAIL: " + c.get("detail", "")
    return "not run"


def summary_lines(d: dict) -> list:
    """(label, line) pairs for the header: the warp-width check, and portable mode's verdict."""
    out = []
    wc = width_counts(d)
    if wc:
        parts = [f"{wc.get('independent', 0)} independent of the warp width (32 vs 64, bitwise)",
                 f"{wc.get('declared', 0)} width-dependent as declared"]
        if wc.get("FLAGGED"):
            parts.append(f"{wc['FLAGGED']} FLAGGED (depend on the width without declaring it)")
        if wc.get("not-run"):
            parts.append(f"{wc['not-run']} not checked")
        out.append(("warp width", ", ".join(parts)))
    port = portable_summary(d)
    if port:
        out.append(("portable mode", port["line"]))
    return out


def _num(x) -> str:
    if isinstance(x, (int, float)):
        return f"{x:.3g}"
    return str(x)


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def markdown(d: dict) -> str:
    h = d["header"]
    targets = d["targets"]
    out = ["# kaio conformance report", "",
           f"- kaio {h['kaio_version']}, {h['date']}, size `{h['size']}`, {h['seconds']} s",
           f"- command: `{h.get('command') or 'kaio conformance'}`",
           f"- portable IR math library active: {'yes' if h.get('portable_math') else 'no'}"]
    out += [f"- **{v}**: {_md_escape(line)}" for v, line in h.get("vendors", {}).items()]
    out += [f"- **{k}**: {_md_escape(line)}" for k, line in summary_lines(d)]
    if h.get("interrupted"):
        out.append(f"- **INCOMPLETE**: the run was interrupted ({_md_escape(h['interrupted'])})")
    out += ["",
           "| target | kind | executed | device | driver | arch |", "|---|---|---|---|---|---|"]
    for t in targets:
        info = h["targets"].get(t, {})
        dev = info.get("device", {})
        ran = "yes" if info.get("available") and info.get("kind") == "execute" else \
            "compile only" if info.get("available") else "no"
        out.append(f"| {t} | {info.get('kind', '')} | {ran} | {_md_escape(dev.get('name', ''))} | "
                   f"{_md_escape(dev.get('driver', ''))} | {_md_escape(dev.get('arch', ''))} |")
    if h.get("not_executed"):
        out += ["", "Targets not executed:", ""]
        out += [f"- **{t}**: {_md_escape(why)}" for t, why in h["not_executed"].items()]
    if h.get("hidden_baselines"):
        out += ["", f"Baselines run but not shown as columns: {', '.join(h['hidden_baselines'])}."]
    out += ["", "## Summary", "", "| target | " + " | ".join(SYMBOL[s] for s in SYMBOL) + " |",
            "|---|" + "---|" * len(SYMBOL)]
    for t in targets:
        cnt = d["counts"][t]
        out.append(f"| {t} | " + " | ".join(str(cnt[s]) for s in SYMBOL) + " |")
    out += ["", "## Results", "", "| kernel | rule | " + " | ".join(targets) + " |",
            "|---|---|" + "---|" * len(targets)]
    for r in d["rows"]:
        cells = [_md_escape(_cell_text(r["cells"][t])) if t in r["cells"] else "" for t in targets]
        out.append(f"| {r['kernel']} | {r['rule']} | " + " | ".join(cells) + " |")
    notes = [r for r in d["rows"] if r.get("why")]
    if notes:
        out += ["", "## Rule notes", ""]
        out += [f"- **{r['kernel']}** ({r['rule']}): {_md_escape(r['why'])}" for r in notes]
    header_why = h.get("not_executed", {})
    skipped: dict = {}
    for r in d["rows"]:
        for t in targets:
            c = r["cells"].get(t, {})
            if c.get("status") == "not-run" and c.get("detail") and c["detail"] != header_why.get(t):
                skipped.setdefault((t, c["detail"]), []).append(r["kernel"])
    if skipped:
        out += ["", "## Cells not run", ""]
        out += [f"- {t}, {len(ks)} kernel(s) ({_md_escape(', '.join(ks[:4]))}"
                f"{', ...' if len(ks) > 4 else ''}): {_md_escape(why)}"
                for (t, why), ks in skipped.items()]
    compile_only = [t for t in targets if h["targets"].get(t, {}).get("kind") == "compile"]
    if compile_only:
        out += ["", "## Compile-only columns", "",
                f"{', '.join(compile_only)}: never executed (no such GPU is attached); every "
                "kernel is compiled and validated (AMD: the code object's metadata, ABI, LDS and "
                "version; NVIDIA: `ptxas -arch=sm_XX -v`, registers, spills and shared memory "
                "within the kernel's limits). Their cells never say identical."]
    refused = [(r, t) for r in d["rows"] for t in targets
               if r["cells"].get(t, {}).get("status") == "not-available"]
    if refused:
        out += ["", "## Not available on the target", ""]
        out += [f"- **{r['kernel']}** on {t}: {_md_escape(r['cells'][t].get('detail', ''))}"
                for r, t in refused]
    flagged = width_flags(d)
    if flagged:
        out += ["", "## Warp width: flagged kernels", ""]
        out += [f"- **{k}**: {_md_escape(why)}" for k, why in flagged]
    port = portable_summary(d)
    if port and port["exceptions"]:
        out += ["", "## Portable mode: order-dependent cases", ""]
        out += [f"- **{k}** ({rule}): {_md_escape(why)}" for k, why, rule in port["exceptions"]]
    if port and port["differing"]:
        out += ["", "## Portable mode: cells not bit-identical", ""]
        out += [f"- **{k}** on {t}" for k, t in port["differing"]]
    fails = [(r, t) for r in d["rows"] for t in targets
             if r["cells"].get(t, {}).get("status") == "failing"]
    if fails:
        out += ["", "## Failing cells", ""]
        out += [f"- **{r['kernel']}** on {t}: {_md_escape(r['cells'][t].get('detail', ''))}"
                for r, t in fails]
    out.append("")
    return "\n".join(out)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.5em}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0;position:sticky;top:0}
td.identical{background:#d9f7d9}td.within-bound{background:#fff4c2}
td.compiled{background:#dde8ff}td.not-available{background:#f3e6ff}td.failing{background:#ffd0d0;font-weight:600}
td.not-run{background:#eee;color:#777}
code{background:#f4f4f4;padding:0 3px}.small{color:#666;font-size:12px}
"""


def html_page(d: dict) -> str:
    h = d["header"]
    targets = d["targets"]
    e = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             "<title>kaio conformance report</title>", f"<style>{CSS}</style></head><body>",
             "<h1>kaio conformance report</h1>",
             f"<p>kaio {e(h['kaio_version'])} &middot; {e(h['date'])} &middot; size "
             f"<code>{e(h['size'])}</code> &middot; {h['seconds']} s<br>command: "
             f"<code>{e(h.get('command') or 'kaio conformance')}</code><br>portable IR math "
             f"library active: {'yes' if h.get('portable_math') else 'no'}"
             + "".join(f"<br><b>{e(v)}</b>: {e(line)}" for v, line in h.get("vendors", {}).items())
             + "".join(f"<br><b>{e(k)}</b>: {e(line)}" for k, line in summary_lines(d))
             + (f"<br><b>INCOMPLETE: the run was interrupted ({e(h['interrupted'])})</b>"
                if h.get("interrupted") else "") + "</p>",
             "<table><tr><th>target</th><th>kind</th><th>executed</th><th>device</th>"
             "<th>driver</th><th>arch</th><th>reason not executed</th></tr>"]
    for t in targets:
        info = h["targets"].get(t, {})
        dev = info.get("device", {})
        ran = "yes" if info.get("available") and info.get("kind") == "execute" else \
            "compile only" if info.get("available") else "no"
        parts.append(f"<tr><td>{e(t)}</td><td>{e(info.get('kind', ''))}</td><td>{ran}</td>"
                     f"<td>{e(dev.get('name', ''))}</td><td>{e(dev.get('driver', ''))}</td>"
                     f"<td>{e(dev.get('arch', ''))}</td><td>{e(info.get('reason', ''))}</td></tr>")
    parts.append("</table><h2>Summary</h2><table><tr><th>target</th>"
                 + "".join(f"<th>{e(SYMBOL[s])}</th>" for s in SYMBOL) + "</tr>")
    for t in targets:
        cnt = d["counts"][t]
        parts.append(f"<tr><td>{e(t)}</td>" + "".join(f"<td>{cnt[s]}</td>" for s in SYMBOL) + "</tr>")
    parts.append("</table><h2>Results</h2><table><tr><th>kernel</th><th>rule</th>"
                 + "".join(f"<th>{e(t)}</th>" for t in targets) + "</tr>")
    for r in d["rows"]:
        why = f"<div class='small'>{e(r['why'])}</div>" if r.get("why") else ""
        parts.append(f"<tr><td>{e(r['kernel'])}<div class='small'>{e(r['group'])}</div></td>"
                     f"<td>{e(r['rule'])}{why}</td>")
        for t in targets:
            c = r["cells"].get(t)
            if c is None:
                parts.append("<td></td>")
                continue
            detail = c.get("detail", "") if c["status"] != "identical" else ""
            extra = f"<div class='small'>{e(detail)}</div>" if detail else ""
            parts.append(f"<td class='{e(c['status'])}' title='{e(c.get('detail', ''))}'>"
                         f"{e(_cell_text(c))}{extra}</td>")
        parts.append("</tr>")
    parts.append("</table></body></html>\n")
    return "\n".join(parts)
