"""What every step of the GPU check shares: where things are, how a command
runs (bounded, logged), and how an item's result is kept for the report.

Every item ends as one JSON file in results/: its status (pass, fail, skip,
info), the reason for a skip or a failure, and its figures, each with its
unit. A step run again replaces its items; the report is rebuilt from
whatever results exist, so steps can run in separate calls."""
import json
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import time

REPO = pathlib.Path(__file__).resolve().parents[2]


class Context:
    def __init__(self, emulated, quick, build_dir, out_dir, bundle_dir, python, ranks=None):
        self.emulated = emulated
        self.quick = quick
        self.ranks = ranks  # the sweep's rank counts (None: its default)
        self.on_record = None  # called after each item is kept (the report's refresh)
        self.build = pathlib.Path(build_dir).resolve()
        self.work = self.build / "check"
        self.results = self.work / "results"
        self.logs = self.work / "logs"
        self.out = pathlib.Path(out_dir).resolve()
        self.bundle = pathlib.Path(bundle_dir).resolve()
        self.python = python
        for d in (self.results, self.logs, self.out):
            d.mkdir(parents=True, exist_ok=True)

    @property
    def bin(self):
        return self.build / "bin"

    @property
    def mode(self):
        return "emulated" if self.emulated else "gpu"

    def device_env(self):
        """The variables every device run gets: the emulated runtime on a
        machine without a GPU, and bounded waits."""
        env = {"FAIRWAY_TIMEOUT_MS": "60000"}
        if self.emulated:
            env["FAIRWAY_DEVICE_RUNTIME"] = "host-emulated"
        return env

    def python_env(self):
        """PYTHONPATH with the fairway package built by the build step."""
        site = self.build / "python-site"
        path = [str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        return {"PYTHONPATH": os.pathsep.join(path)}


class Ran:
    def __init__(self, rc, output, seconds, timed_out, log):
        self.rc, self.output, self.seconds, self.timed_out, self.log = rc, output, seconds, timed_out, log

    @property
    def ok(self):
        return self.rc == 0 and not self.timed_out

    def tail(self, lines=15):
        return "\n".join(self.output.strip().splitlines()[-lines:])


def run(ctx, name, command, env=None, timeout=300, cwd=None):
    """Runs command (a list) with env added, at most timeout seconds; its
    output goes to logs/NAME.log (appended, each run headed by the command).
    A command past its time has the stack of every process it started
    written into its output (stacks_of) before they are all killed."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    log = ctx.logs / f"{name}.log"
    start = time.monotonic()
    timed_out = False
    # Its own session, so everything it starts can be found and killed.
    process = subprocess.Popen(command, env=full_env, cwd=cwd or REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        rc = process.returncode
    except subprocess.TimeoutExpired:
        timed_out, rc = True, 124
        stacks = stacks_of(process.pid)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        output, _ = process.communicate()
        output += f"\n[gpu_check: stopped after {timeout} s; the stacks of its processes then:]\n{stacks}\n"
    seconds = time.monotonic() - start
    shown_env = " ".join(f"{k}={v}" for k, v in sorted((env or {}).items()))
    with open(log, "a") as f:
        f.write(f"$ {shown_env} {shlex.join(str(c) for c in command)}\n{output}\n[exit {rc}, {seconds:.1f} s]\n\n")
    return Ran(rc, output, seconds, timed_out, log)


def stacks_of(session):
    """Every thread's stack of each process in the session (gdb, or the
    cuda-gdb of a CUDA machine), with each thread's kernel wait channel:
    what a hang was waiting for, inside CUDA, UCX or NCCL included."""
    listed = subprocess.run(["ps", "-eo", "pid=,sid=,args="], stdout=subprocess.PIPE, text=True, errors="replace")
    debugger = shutil.which("gdb") or shutil.which("cuda-gdb")
    out = []
    for line in listed.stdout.splitlines():
        fields = line.split(None, 2)
        if len(fields) < 3 or fields[1] != str(session):
            continue
        pid = fields[0]
        out.append(f"== process {pid}: {fields[2][:200]}")
        for task in sorted(pathlib.Path(f"/proc/{pid}/task").glob("*")):
            try:
                out.append(f"  thread {task.name} ({(task / 'comm').read_text().strip()}) waits in "
                           f"{(task / 'wchan').read_text().strip() or '-'}")
            except OSError:
                pass
        if debugger:
            try:
                traced = subprocess.run([debugger, "-q", "-batch", "-p", pid, "-ex", "thread apply all bt 30"],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        errors="replace", timeout=60)
                out += [l for l in traced.stdout.splitlines() if l.startswith(("#", "Thread"))]
            except subprocess.TimeoutExpired:
                out.append("  (the debugger did not finish within 60 s)")
    return "\n".join(out) if out else "(no process left in its session)"


def figure(name, value, unit, **extra):
    """One measured number with its unit."""
    out = {"name": name, "value": value, "unit": unit}
    out.update(extra)
    return out


def record(ctx, step, item, title, status, reason="", figures=(), table=None, target=None, met=None, seconds=None):
    """Keeps one item's result. status: pass, fail, skip or info."""
    assert status in ("pass", "fail", "skip", "info"), status
    result = {"step": step, "item": item, "title": title, "status": status, "reason": reason,
              "figures": list(figures), "table": table, "target": target, "met": met, "seconds": seconds,
              "mode": ctx.mode, "recorded": time.time()}
    (ctx.results / f"{step}.{item}.json").write_text(json.dumps(result, indent=1))
    mark = {"pass": "ok", "fail": "FAILED", "skip": "skipped", "info": "done"}[status]
    print(f"gpu_check: {step}/{item}: {mark}{': ' + reason if reason else ''}", flush=True)
    if ctx.on_record is not None:
        ctx.on_record()
    return result


def clear_step(ctx, step, prefixes=("",)):
    """Forgets a step's earlier items (those whose names start with one of
    `prefixes`), so a rerun leaves none of them stale."""
    for old in ctx.results.glob(f"{step}.*.json"):
        if any(old.name.startswith(f"{step}.{p}") for p in prefixes):
            old.unlink()


def load_results(ctx):
    """Every item so far, in the order they were recorded."""
    results = [json.loads(p.read_text()) for p in ctx.results.glob("*.json")]
    return sorted(results, key=lambda r: r.get("recorded", 0))


def median(values):
    values = sorted(values)
    n = len(values)
    if n == 0:
        return float("nan")
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
