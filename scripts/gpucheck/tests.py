"""Step test: the GPU tests and the device-path tests under ctest; step
pytest: the PyTorch backend's tests, on CPU tensors and on CUDA tensors.
Each run is bounded; every test's outcome, and a skipped test's reason,
goes into the report. The Python tests are a step of their own, the last,
because they say least about the device paths and take longest."""
import re
import xml.etree.ElementTree as ElementTree

from .common import REPO, figure, record, run

STEP = "test"
PYTHON_STEP = "pytest"


def ctest(ctx, item, title, regex, env, timeout, jobs):
    junit = ctx.work / f"{item}.xml"
    junit.unlink(missing_ok=True)  # never a stale run's results
    ran = run(ctx, f"test-{item}", ["ctest", "--test-dir", str(ctx.build), "-R", regex, "-j", str(jobs),
                                    "--output-on-failure", "--output-junit", str(junit)],
              env=env, timeout=timeout)
    rows, counts = [], {"passed": 0, "failed": 0, "skipped": 0}
    if junit.exists():
        for case in ElementTree.parse(junit).getroot().iter("testcase"):
            name = case.get("name", "?").split("  #")[0]  # without gtest's "# GetParam() = ..."
            out = case.findtext("system-out") or ""
            if case.find("failure") is not None or case.get("status") == "fail":
                outcome, why = "failed", _last_lines(out)
            elif case.find("skipped") is not None or case.get("status") in ("skipped", "notrun", "disabled"):
                outcome, why = "skipped", _skip_reason(out)
            else:
                outcome, why = "passed", ""
            counts[outcome] += 1
            rows.append([name, outcome, f"{float(case.get('time') or 0):.2f}", why])
    total = sum(counts.values())
    if total == 0:
        status, reason = "fail", (f"ctest was stopped after {timeout} s" if ran.timed_out
                                  else f"ctest ran no test matching {regex}: {ran.tail(4)}")
    elif counts["failed"] or (not ran.ok and counts["skipped"] != total):
        status, reason = "fail", f"{counts['failed']} of {total} failed" + (" (timed out)" if ran.timed_out else "")
    elif counts["skipped"] == total:
        status, reason = "skip", f"all {total} skipped: {rows[0][3]}"
    else:
        status, reason = "pass", ""
    record(ctx, STEP, item, title, status, reason,
           figures=[figure(k, v, "tests") for k, v in counts.items()],
           table={"columns": ["test", "outcome", "time (s)", "why"], "rows": rows}, seconds=ran.seconds)


def _skip_reason(output):
    match = re.search(r"Skipped\s*\n?(.*)", output) or re.search(r"SKIP[^\n:]*:\s*(.*)", output)
    return match.group(1).strip()[:200] if match else "skipped"


def _last_lines(output, n=3):
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])[:400]


def pytest(ctx, item, title, args, env, timeout):
    ran = run(ctx, f"test-{item}", [ctx.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"] + args,
              env=env, timeout=timeout)
    summary = next((line for line in reversed(ran.output.splitlines()) if re.search(r"\d+ (passed|failed)", line)),
                   "")
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    status = "pass" if ran.ok and counts.get("passed", 0) > 0 else "fail"
    record(ctx, PYTHON_STEP, item, title, status, "" if status == "pass" else (summary or ran.tail(6)),
           figures=[figure(k, v, "tests") for k, v in counts.items()], seconds=ran.seconds)


def run_step(ctx):
    env = ctx.device_env()
    env.update(ctx.python_env())
    # Gpu.*: the real CUDA runtime always (each test skips, saying why, without a GPU).
    ctest(ctx, "gpu_tests", "Gpu.* tests (one-rank NCCL, ranks sharing the GPU over UCX, two-phase, kernels)",
          r"^Gpu\.", {"FAIRWAY_TIMEOUT_MS": "60000"}, timeout=900, jobs=1)
    # The device-path tests on this machine's runtime: the CUDA plugin on a
    # GPU (NCCL cases of several ranks per GPU skip, saying why), the
    # host-emulated runtime otherwise.
    regex = r"^(DeviceMemory|Paths/Device(StreamOrder|SendRecv|Compression))" if ctx.quick else \
        r"^(DeviceMemory|Paths/Device|AllCollectives/DeviceSweep)"
    device_env = dict(env, FAIRWAY_DEVICE_RUNTIME="host-emulated" if ctx.emulated else "cuda")
    ctest(ctx, "device_path_tests", f"device-path tests ({'host-emulated' if ctx.emulated else 'CUDA'} runtime)",
          regex, device_env, timeout=1500, jobs=2 if ctx.emulated else 4)


def run_python_step(ctx):
    env = ctx.device_env()
    env.update(ctx.python_env())
    env["FAIRWAY_BUILD_DIR"] = str(ctx.build)
    tests = REPO / "python" / "tests"
    subset = ["-k", "async_work or bad_input or every_operation"] if ctx.quick else []
    if ctx.emulated:
        record(ctx, PYTHON_STEP, "python_tests_cuda", "python/tests, CUDA tensors (1 rank, and 2-4 ranks sharing the GPU)",
               "skip", "torch has no CUDA tensors without a GPU")
    else:
        pytest(ctx, "python_tests_cuda", "python/tests, CUDA tensors (1 rank, and 2-4 ranks sharing the GPU)",
               [str(tests)], dict(env, FAIRWAY_TEST_DEVICE="cuda", FAIRWAY_DEVICE_RUNTIME="cuda"), timeout=1500)
    pytest(ctx, "python_tests", "python/tests, CPU tensors" + (" (a subset)" if subset else ""),
           [str(tests)] + subset, env, timeout=1200)
