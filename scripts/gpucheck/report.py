"""The report: every item's result in one Markdown page and one JSON file
under the output folder, with the logs in one archive beside them."""
import datetime
import json
import tarfile

from .common import load_results

STEPS = ["build", "test", "sweep", "timing", "torch", "pytest"]
MARK = {"pass": "pass", "fail": "**FAIL**", "skip": "skipped", "info": "measured"}


def _cell(value):
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(table):
    lines = ["| " + " | ".join(_cell(c) for c in table["columns"]) + " |",
             "|" + "---|" * len(table["columns"])]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table["rows"]]
    return lines


def _figures(result):
    return "; ".join(f"{f['name']}: {f['value']}{(' ' + f['unit']) if f['unit'] else ''}" for f in result["figures"])


def write(ctx, command_line, quiet=False):
    """Writes report.md and report.json; unless quiet (the refresh after
    each item), also the logs' archive and a summary line."""
    results = load_results(ctx)
    counts = {s: sum(1 for r in results if r["status"] == s) for s in MARK}
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    summary = {"mode": ctx.mode, "written": now, "command": command_line, "counts": counts, "items": results}
    (ctx.out / "report.json").write_text(json.dumps(summary, indent=1))
    lines = [f"# Fairway GPU check ({'host-emulated device runtime, no GPU' if ctx.emulated else 'GPU'})", "",
             f"Written {now} by `{command_line}`.", "",
             "Items: " + ", ".join(f"{n} {MARK[s]}" for s, n in counts.items() if n), ""]
    if ctx.emulated:
        lines += ["Under the host-emulated runtime this report checks the check itself: device memory is host",
                  "memory, kernels are the CPU's, and no figure here is a GPU figure.", ""]
    for step in STEPS:
        items = [r for r in results if r["step"] == step]
        if not items:
            continue
        lines += [f"## {step}", ""]
        for r in items:
            head = f"- **{r['title']}**: {MARK[r['status']]}"
            if r.get("seconds") is not None:
                head += f" ({r['seconds']:.1f} s)"
            lines.append(head)
            if r["reason"]:
                lines.append(f"  - {r['reason']}")
            if r["figures"]:
                lines.append(f"  - {_figures(r)}")
            if r.get("target"):
                verdict = {True: "met", False: "**not met**", None: "not judged here"}[r.get("met")]
                lines.append(f"  - target: {r['target']}: {verdict}")
            if r.get("table") and r["table"]["rows"]:
                lines += [""] + ["  " + line for line in _table(r["table"])] + [""]
        lines.append("")
    (ctx.out / "report.md").write_text("\n".join(lines))
    if quiet:
        return counts
    with tarfile.open(ctx.out / "logs.tar.gz", "w:gz") as archive:
        archive.add(ctx.logs, arcname="logs")
    print(f"gpu_check: report in {ctx.out}/report.md and report.json, logs in {ctx.out}/logs.tar.gz "
          f"({counts['info']} items measured)", flush=True)
    print(f"gpu_check: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped", flush=True)
    return counts
