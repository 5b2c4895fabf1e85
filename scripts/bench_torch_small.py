#!/usr/bin/env python3
"""Small collectives through torch, as a job makes them: microseconds per
call of all_reduce, all_gather_into_tensor, reduce_scatter_tensor and
broadcast on float32 CPU tensors, blocking and with async_op=True (each
call waited for at once), at 8 B to 1 MiB, in the same processes and
interleaved:

  floor           torch.distributed on a backend that does nothing (torch's
                  own cost per call: scripts/torch_floor_backend.cpp)
  C API           the same collective through Fairway's C API in a C++ loop,
                  on the fairway group's communicator and the same tensors
  fairway         torch.distributed on the "fairway" backend
  direct          fairway.torch.collective (straight to the backend)
  gloo            torch.distributed on gloo
  deepspeed       DeepSpeed's shared-memory inference_all_reduce (all_reduce
                  only; DS_ACCELERATOR=cpu), where DeepSpeed is installed

Sizes are the collective's total (all_gather's output, reduce_scatter's
input). Each number is the slowest rank's mean over a timed loop, median
over --runs rounds; the callers take turns within a round. Ranks run as
torchrun starts them (OMP_NUM_THREADS=1), unpinned or each pinned to one
core (--pinning).

    .venv/bin/python scripts/bench_torch_small.py --ranks 2 4 --runs 5 [--out docs/data/torch_small.md]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_yardsticks import FLOOR_BACKEND, load_yardsticks, register_floor_backend  # noqa: E402

OPS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast"]
CALLERS = ["floor", "C API", "fairway", "direct", "gloo", "deepspeed"]
SECONDS_PER_LOOP = 0.02


def sizes_between(low, high, factor):
    """low, low x factor, ... up to high, and high itself."""
    size = low
    while size < high:
        yield size
        size *= factor
    yield high


def calls_for(op, size, world, groups, direct, yard, comm, mode):
    """caller name -> function running one call (None where it does not apply)."""
    import torch
    import torch.distributed as dist
    elements = max(1, size // 4)
    if op in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        elements = max(world, elements - elements % world)
    big = torch.ones(elements)
    small = torch.ones(elements // world)
    async_op = mode == "async"

    def through(group):
        if op == "all_reduce":
            return lambda: dist.all_reduce(big, group=group, async_op=async_op)
        if op == "broadcast":
            return lambda: dist.broadcast(big, src=0, group=group, async_op=async_op)
        if op == "all_gather_into_tensor":
            return lambda: dist.all_gather_into_tensor(big, small, group=group, async_op=async_op)
        return lambda: dist.reduce_scatter_tensor(small, big, group=group, async_op=async_op)

    def waited(fn):
        if not async_op:
            return fn
        return lambda: fn().wait()

    def direct_call():
        if op == "all_reduce":
            return lambda: direct.all_reduce(big, async_op=async_op)
        if op == "broadcast":
            return lambda: direct.broadcast(big, 0, async_op=async_op)
        if op == "all_gather_into_tensor":
            return lambda: direct.all_gather(small, dim=0, async_op=async_op)
        return lambda: direct.reduce_scatter(big, dim=0, async_op=async_op)

    calls = {
        "floor": waited(through(groups["floor"])),
        "fairway": waited(through(None)),
        "gloo": waited(through(groups["gloo"])),
        "direct": direct_call() if not async_op else (lambda f: lambda: f()[1].wait())(direct_call()),
        "C API": None,
        "deepspeed": None,
    }
    if not async_op:
        kind = {"all_reduce": "all_reduce", "broadcast": "broadcast", "all_gather_into_tensor": "all_gather",
                "reduce_scatter_tensor": "reduce_scatter"}[op]
        send, recv = {"all_reduce": (big, big), "broadcast": (big, big), "all_gather_into_tensor": (small, big),
                      "reduce_scatter_tensor": (big, small)}[op]
        calls["C API"] = ("loop", lambda n: yard.c_api_seconds(comm, kind, send, recv, n))
        if op == "all_reduce" and groups.get("deepspeed") is not None:
            ds = groups["deepspeed"]
            calls["deepspeed"] = lambda: ds.inference_all_reduce(big)
    return calls


def timed(call, iterations):
    if isinstance(call, tuple):  # a loop in C++
        return call[1](iterations)
    start = time.perf_counter()
    for _ in range(iterations):
        call()
    return time.perf_counter() - start


def rank_main(rank, world, port, args, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_SIZE=str(world), OMP_NUM_THREADS="1")
    if args.pinned:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    import torch
    import torch.distributed as dist
    import fairway.torch
    import fairway.torch.collective as direct
    torch.set_num_threads(1)
    yard = register_floor_backend()
    dist.init_process_group("fairway", rank=rank, world_size=world)
    groups = {"gloo": dist.new_group(backend="gloo"), "floor": dist.new_group(backend=FLOOR_BACKEND)}
    try:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        import deepspeed
        import deepspeed.comm as dscomm
        deepspeed.init_distributed(dist_backend="fairway")
        groups["deepspeed"] = dscomm
    except Exception as error:  # not installed, or its op does not build here
        if rank == 0:
            print(f"bench_torch_small: no DeepSpeed column ({type(error).__name__}: {error})", flush=True)
    comm = dist.group.WORLD._get_backend(torch.device("cpu")).comm_handle()
    timing = groups["gloo"]
    results = {}
    for op in OPS:
        for size in sizes_between(args.min_bytes, args.max_bytes, args.factor):
            for mode in ("blocking", "async"):
                calls = {k: v for k, v in calls_for(op, size, world, groups, direct, yard, comm, mode).items()
                         if v is not None}
                # Calibrate: iterations per loop from a short warm-up, the same on every rank.
                plan = {}
                for name, call in calls.items():
                    timed(call, 5)
                    dist.barrier(group=timing)
                    seconds = torch.tensor([timed(call, 20) / 20])
                    dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=timing)
                    plan[name] = max(5, min(5000, int(SECONDS_PER_LOOP / max(seconds.item(), 1e-7))))
                samples = {name: [] for name in calls}
                for _ in range(args.runs):
                    for name, call in calls.items():
                        dist.barrier(group=timing)
                        seconds = torch.tensor([timed(call, plan[name]) / plan[name]])
                        dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=timing)
                        samples[name].append(seconds.item() * 1e6)
                results[(op, size, mode)] = {name: statistics.median(v) for name, v in samples.items()}
    if rank == 0:
        queue.put(results)
    dist.barrier(group=timing)
    dist.destroy_process_group()


def run(world, pinned, args):
    import torch.multiprocessing as mp
    from torch_models import remove_deepspeed_buffers
    args.pinned = pinned
    queue = mp.get_context("spawn").SimpleQueue()
    port = 29600 + (os.getpid() + world * 7 + pinned) % 2000
    try:
        mp.spawn(rank_main, args=(world, port, args, queue), nprocs=world)
    finally:
        remove_deepspeed_buffers(port)
    return queue.get()


def human(size):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def table(world, pinned, results):
    lines = [f"### {world} ranks, {'pinned (one core per rank)' if pinned else 'unpinned'}", "",
             "| op | mode | size | " + " | ".join(CALLERS) + " | fairway − (floor + C API) | direct / deepspeed |",
             "|---|---|---|" + "---|" * (len(CALLERS) + 2)]
    for (op, size, mode), row in results.items():
        cells = [f"{row[c]:.1f}" if c in row else "" for c in CALLERS]
        over = row["fairway"] - row["floor"] - row["C API"] if "C API" in row else None
        versus = row["direct"] / row["deepspeed"] if "deepspeed" in row else None
        lines.append(f"| {op} | {mode} | {human(size)} | " + " | ".join(cells) +
                     f" | {'' if over is None else f'{over:+.1f}'} | {'' if versus is None else f'{versus:.2f}'} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--pinning", choices=["unpinned", "pinned", "both"], default="both")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--min-bytes", type=int, default=8)
    parser.add_argument("--max-bytes", type=int, default=1 << 20)
    parser.add_argument("--factor", type=int, default=8)
    parser.add_argument("--out", help="also write the tables here (markdown)")
    args = parser.parse_args()
    load_yardsticks()  # built once, before the ranks load it
    modes = {"unpinned": [False], "pinned": [True], "both": [False, True]}[args.pinning]
    text = [f"Microseconds per call (the slowest rank's, median of {args.runs} rounds), float32 CPU tensors, "
            f"torch {__import__('torch').__version__}, {os.cpu_count()} CPUs.", ""]
    for world in args.ranks:
        for pinned in modes:
            section = table(world, pinned, run(world, pinned, args))
            print(section, flush=True)
            text.append(section)
    if args.out:
        with open(args.out, "w") as out:
            out.write("\n".join(text))


if __name__ == "__main__":
    sys.exit(main())
