#!/usr/bin/env python3
"""allreduce through torch.distributed: the fairway backend against gloo in
the same processes, against Fairway's C API called on the same
communicator from the same processes (the cost of torch's Python and c10d
layers alone), and against Fairway's own all_reduce_perf on the same ranks,
launched between the torch measurements while those ranks sleep in a
barrier. Every run measures all of them in turn, alternating the order;
the table shows medians over --runs. Then one DDP training step of a small
MLP, fairway against gloo. Busbw as nccl-tests: size / time x 2(n-1)/n.

    .venv/bin/python scripts/bench_torch.py --ranks 2 4 --runs 5
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sizes_between(low, high):
    size = low
    while size <= high:
        yield size
        size *= 4


def timed(allreduce, barrier, agree, budget_s=0.2):
    """Seconds per call of `allreduce` (an in-place float32 sum), over enough
    calls to fill about budget_s; every rank runs the same count (agreed
    with a MAX over the gloo group `agree`)."""
    for _ in range(3):
        allreduce()
    start = time.perf_counter()
    allreduce()
    one = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(one, op=dist.ReduceOp.MAX, group=agree)
    iterations = max(5, min(2000, int(budget_s / max(one.item(), 1e-6))))
    barrier()
    start = time.perf_counter()
    for _ in range(iterations):
        allreduce()
    return (time.perf_counter() - start) / iterations


def fairway_c_api(group):
    """fwAllReduce from this process on the communicator behind `group`
    (a fairway group), through ctypes: the same call the backend makes,
    without torch's Python and dispatcher layers."""
    path = next(line.split()[-1] for line in open("/proc/self/maps") if "libfairway.so" in line)
    library = ctypes.CDLL(path)
    library.fwAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    comm = ctypes.c_void_p(group._get_backend(torch.device("cpu")).comm_handle())
    float32, total = 8, 0  # fwFloat32, fwSum (include/fairway/fairway.h)

    def allreduce(tensor):
        result = library.fwAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), float32, total, comm, None)
        if result != 0:
            raise RuntimeError(f"fwAllReduce returned {result}")
    return allreduce


def ddp_step_seconds(group, steps=30):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    ddp = DDP(model, process_group=group)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(32, 1024), torch.randn(32, 10)

    def step():
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        optimizer.step()

    for _ in range(3):
        step()
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def rank_main(rank, world, store, args, results):
    import fairway.torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("fairway", init_method=f"file://{store}", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    c_api = fairway_c_api(dist.group.WORLD)
    ways = {
        "fairway": lambda t: dist.all_reduce(t),
        "gloo": lambda t: dist.all_reduce(t, group=gloo),
        "c_api": c_api,
    }
    barrier = {"fairway": dist.barrier, "gloo": lambda: dist.barrier(group=gloo), "c_api": dist.barrier}
    times = {}
    for run in range(args.runs):
        order = list(ways) if run % 2 == 0 else list(reversed(ways))
        # all_reduce_perf on these ranks' cores, first or last in turn, while
        # every rank here sleeps in a gloo barrier (gloo waits in the kernel).
        if run % 2 == 1:
            native_run(rank, world, args, gloo, times)
        for size in sizes_between(args.min_bytes, args.max_bytes):
            tensor = torch.ones(size // 4)
            for name in order:
                seconds = timed(lambda: ways[name](tensor), barrier[name], gloo)
                seconds = torch.tensor([seconds], dtype=torch.float64)
                dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=gloo)  # the slowest rank's time
                times.setdefault((name, size), []).append(seconds.item())
        if run % 2 == 0:
            native_run(rank, world, args, gloo, times)
        for name in ("fairway", "gloo") if run % 2 == 0 else ("gloo", "fairway"):
            group = dist.group.WORLD if name == "fairway" else gloo
            seconds = torch.tensor([ddp_step_seconds(group)], dtype=torch.float64)
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=gloo)
            times.setdefault((name, "ddp"), []).append(seconds.item())
    if rank == 0:
        results.put(times)
    dist.destroy_process_group()


def native_run(rank, world, args, gloo, times):
    """Rank 0 runs all_reduce_perf on `world` ranks (in place, seconds per
    size into times[("perf", size)]) while the others wait in a barrier."""
    dist.barrier(group=gloo)
    if rank == 0:
        command = [os.path.join(ROOT, "build/bin/fairwayrun"), "-np", str(world),
                   os.path.join(ROOT, "build/bin/all_reduce_perf"), "-b", str(args.min_bytes), "-e",
                   str(args.max_bytes), "-f", "4", "-n", "20", "-w", "3"]
        output = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True).stdout
        for line in output.splitlines():
            fields = line.split()
            if len(fields) >= 13 and fields[0].isdigit():
                times.setdefault(("perf", int(fields[0])), []).append(float(fields[9]) * 1e-6)
    dist.barrier(group=gloo)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--min-bytes", type=int, default=64 << 10)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    args = parser.parse_args()
    context = mp.get_context("spawn")
    print("| ranks | size | fairway busbw GB/s | gloo busbw GB/s | fairway / gloo | all_reduce_perf busbw GB/s "
          "| fairway / all_reduce_perf | C API in process busbw GB/s | fairway / C API |")
    print("|---|---|---|---|---|---|---|---|---|")
    ddp_rows = []
    for world in args.ranks:
        results = context.Queue()
        with tempfile.TemporaryDirectory() as directory:
            store = os.path.join(directory, "store")
            processes = [context.Process(target=rank_main, args=(r, world, store, args, results))
                         for r in range(world)]
            for p in processes:
                p.start()
            times = results.get(timeout=3600)
            for p in processes:
                p.join()
        factor = 2 * (world - 1) / world
        for size in sizes_between(args.min_bytes, args.max_bytes):
            busbw = {name: size / statistics.median(times[(name, size)]) / 1e9 * factor
                     for name in ("fairway", "gloo", "perf", "c_api")}
            print(f"| {world} | {size >> 10} KiB | {busbw['fairway']:.2f} | {busbw['gloo']:.2f} | "
                  f"{busbw['fairway'] / busbw['gloo']:.2f}x | {busbw['perf']:.2f} | "
                  f"{busbw['fairway'] / busbw['perf']:.2f} | {busbw['c_api']:.2f} | "
                  f"{busbw['fairway'] / busbw['c_api']:.2f} |", flush=True)
        ddp_rows.append((world, statistics.median(times[("fairway", "ddp")]),
                         statistics.median(times[("gloo", "ddp")])))
    print()
    print("| ranks | DDP step, fairway (ms) | DDP step, gloo (ms) | gloo / fairway |")
    print("|---|---|---|---|")
    for world, ours, theirs in ddp_rows:
        print(f"| {world} | {ours * 1e3:.2f} | {theirs * 1e3:.2f} | {theirs / ours:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
