"""Step sweep: every perf binary with -m cuda on 1, 2 and 4 ranks sharing
the GPU, over every path the plan can take on one GPU, every element
checked (0 wrong), plus the compressed collectives and the fp8 types.
Each run's JSON rows are kept for the timing step's calling-thread figures."""
import json

from .common import figure, record, run

STEP = "sweep"

BINARIES = ["all_reduce_perf", "reduce_scatter_perf", "all_gather_perf", "broadcast_perf", "reduce_perf",
            "alltoall_perf", "sendrecv_perf", "gather_perf", "scatter_perf"]
UCX_DIRECT = {"FAIRWAY_TRANSPORT": "ucx", "FAIRWAY_UCX_DEVICE_MEMORY": "direct"}
UCX_STAGED = {"FAIRWAY_TRANSPORT": "ucx", "FAIRWAY_UCX_DEVICE_MEMORY": "staged"}
COMPRESSED = [("all_reduce_perf", q) for q in ("int8", "int4", "bf16")] + \
             [("reduce_scatter_perf", q) for q in ("int8", "int4", "bf16")] + [("all_gather_perf", "bf16")]
FP8 = ["float8e4m3", "float8e5m2"]


def paths(ctx, ranks):
    """(name, variables, emulated nodes) of each path the plan can take with
    `ranks` ranks on one GPU. NCCL needs a GPU per rank: on one GPU it serves
    one rank, or each rank posing as a node of its own (two-phase's node phase)."""
    if ranks == 1:
        nccl = {} if ctx.emulated else {"FAIRWAY_INTRA_TRANSPORT": "nccl"}
        return [("nccl", nccl, None), ("ucx-direct", UCX_DIRECT, None), ("ucx-staged", UCX_STAGED, None)]
    out = [("ucx-direct", UCX_DIRECT, None), ("ucx-staged", UCX_STAGED, None), ("two-phase", {}, ranks)]
    if ctx.emulated:
        out.append(("nccl (emulated stand-in)", {}, None))  # several ranks per "GPU" only here
    return out


def sizes(ctx):
    return ["-b", "1K", "-e", "1M", "-f", "32"] if ctx.emulated else ["-b", "1K", "-e", "256M", "-f", "8"]


def perf_run(ctx, name, binary, ranks, env, args, nodes=None, timeout=180):
    """One perf binary under fairwayrun; returns (Ran, its JSON or None)."""
    out = ctx.work / "json" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.unlink(missing_ok=True)
    full_env = ctx.device_env()
    full_env.update(env)
    command = [str(ctx.bin / "fairwayrun"), "-np", str(ranks), "--timeout", str(timeout - 10)]
    if nodes:
        command += ["--nodes", str(nodes)]
    command += [str(ctx.bin / binary), "-m", "cuda", "-J", str(out)] + args
    ran = run(ctx, f"sweep-{name}", command, env=full_env, timeout=timeout)
    data = json.loads(out.read_text()) if out.exists() else None
    return ran, data


def sweep_item(ctx, ranks, path, env, nodes, runs):
    """runs: (label, binary, extra args). One item for the lot, a row per run."""
    rows, failures, seconds = [], [], 0.0
    for label, binary, extra in runs:
        name = f"{ranks}r-{path}-{label}".replace(" ", "_").replace("(", "").replace(")", "")
        ran, data = perf_run(ctx, name, binary, ranks, env, extra, nodes)
        seconds += ran.seconds
        if data is None or not ran.ok:
            failures.append(f"{label}: exit {ran.rc}: {ran.tail(3)}")
            rows.append([label, "-", "-", "-", f"exit {ran.rc}"])
            continue
        wrong = data["wrong"]
        calls = [r[p]["call_us"] for r in data["rows"] for p in ("out_of_place", "in_place") if r.get(p)]
        errors = [r[p].get("relative_l2_error") for r in data["rows"] for p in ("out_of_place", "in_place")
                  if r.get(p) and "relative_l2_error" in r[p]]
        if wrong:
            failures.append(f"{label}: {wrong} wrong")
        algbw = [r["out_of_place"]["algbw_gbps"] for r in data["rows"]]
        rows.append([label, f"{data['rows'][0]['size']}-{data['rows'][-1]['size']}", wrong,
                     f"{max(calls):.1f}" if calls else "-",
                     f"{max(errors):.2e}" if errors else f"{max(algbw):.2f}"])
    title = f"-m cuda, {ranks} rank{'s' if ranks > 1 else ''}, {path}"
    record(ctx, STEP, f"{ranks}r-{path}".replace(" ", "_").replace("(", "").replace(")", ""), title,
           "fail" if failures else "pass", "; ".join(failures)[:600],
           figures=[figure("runs", len(runs), "runs"), figure("wrong", sum(r[2] for r in rows if isinstance(r[2], int)),
                                                               "elements")],
           table={"columns": ["run", "sizes (B)", "#wrong", "max call (us)",
                              "largest algbw (GB/s), or -q: largest relative L2 error"],
                  "rows": rows},
           seconds=seconds)


def run_step(ctx):
    ranks_list = ctx.ranks or ([2] if ctx.quick else [1, 2, 4])
    common = sizes(ctx) + ["-n", "2", "-w", "1"]
    for ranks in ranks_list:
        for index, (path, env, nodes) in enumerate(paths(ctx, ranks)):
            # --quick (CI's emulated form): every binary on the first path,
            # allreduce on the others, one compressed form and one fp8 type.
            binaries = BINARIES if not ctx.quick or index == 0 else BINARIES[:1]
            compressed = COMPRESSED if not ctx.quick else COMPRESSED[:1]
            fp8 = [(b, t) for b in ("all_reduce_perf", "all_gather_perf") for t in FP8][:1 if ctx.quick else None]
            # sendrecv_perf refuses -m cuda on one rank (a device message blocks until matched).
            runs = [(b.replace("_perf", ""), b, common) for b in binaries if ranks > 1 or b != "sendrecv_perf"]
            if path in ("ucx-direct", "two-phase") or (ranks == 1 and path == "nccl"):
                runs += [(f"{b.replace('_perf', '')} -q {q}", b, common + ["-q", q]) for b, q in compressed]
                runs += [(f"{b.replace('_perf', '')} {t}", b, common + ["-d", t]) for b, t in fp8]
            sweep_item(ctx, ranks, path, env, nodes, runs)
