#!/usr/bin/env python3
"""allreduce through torch.distributed: the fairway backend against gloo in
the same processes (interleaved, medians of --runs), and against Fairway's
own all_reduce_perf (in place, same ranks) to show the cost of the Python
and c10d layers; then one DDP training step of a small MLP, fairway
against gloo. Busbw as nccl-tests: size / time x 2(n-1)/n.

    .venv/bin/python scripts/bench_torch.py --ranks 2 4 --runs 5
"""
import argparse
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


def timed_allreduce(tensor, group, agree, budget_s=0.2):
    """Seconds per in-place float32 sum allreduce, over enough calls to fill
    about budget_s; every rank runs the same count (agreed over `agree`)."""
    for _ in range(3):
        dist.all_reduce(tensor, group=group)
    start = time.perf_counter()
    dist.all_reduce(tensor, group=group)
    one = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(one, op=dist.ReduceOp.MAX, group=agree)
    iterations = max(5, min(2000, int(budget_s / max(one.item(), 1e-6))))
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor, group=group)
    return (time.perf_counter() - start) / iterations


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
    groups = {"fairway": dist.group.WORLD, "gloo": gloo}
    times = {}
    for run in range(args.runs):
        order = ["fairway", "gloo"] if run % 2 == 0 else ["gloo", "fairway"]
        for size in sizes_between(args.min_bytes, args.max_bytes):
            tensor = torch.ones(size // 4)
            for name in order:
                seconds = torch.tensor([timed_allreduce(tensor, groups[name], gloo)], dtype=torch.float64)
                dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=gloo)  # the slowest rank's time
                times.setdefault((name, size), []).append(seconds.item())
        for name in order:
            seconds = torch.tensor([ddp_step_seconds(groups[name])], dtype=torch.float64)
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=gloo)
            times.setdefault((name, "ddp"), []).append(seconds.item())
    if rank == 0:
        results.put(times)
    dist.destroy_process_group()


def fairway_perf(world, args):
    """all_reduce_perf's in-place time per size (us), medians over --runs."""
    times = {}
    for _ in range(args.runs):
        command = [os.path.join(ROOT, "build/bin/fairwayrun"), "-np", str(world),
                   os.path.join(ROOT, "build/bin/all_reduce_perf"), "-b", str(args.min_bytes), "-e",
                   str(args.max_bytes), "-f", "4", "-n", "20", "-w", "3"]
        output = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True).stdout
        for line in output.splitlines():
            fields = line.split()
            if len(fields) >= 13 and fields[0].isdigit():
                times.setdefault(int(fields[0]), []).append(float(fields[9]))
    return {size: statistics.median(values) for size, values in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--min-bytes", type=int, default=64 << 10)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    args = parser.parse_args()
    context = mp.get_context("spawn")
    print("| ranks | size | fairway busbw GB/s | gloo busbw GB/s | fairway / gloo | all_reduce_perf busbw GB/s "
          "| torch / all_reduce_perf |")
    print("|---|---|---|---|---|---|---|")
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
        native = fairway_perf(world, args)
        factor = 2 * (world - 1) / world
        for size in sizes_between(args.min_bytes, args.max_bytes):
            ours = statistics.median(times[("fairway", size)])
            theirs = statistics.median(times[("gloo", size)])
            perf_us = native.get(size)
            busbw = lambda seconds: size / seconds / 1e9 * factor  # noqa: E731
            perf_bw = size / (perf_us * 1e-6) / 1e9 * factor if perf_us else float("nan")
            print(f"| {world} | {size >> 10} KiB | {busbw(ours):.2f} | {busbw(theirs):.2f} | "
                  f"{theirs / ours:.2f}x | {perf_bw:.2f} | {busbw(ours) / perf_bw:.2f} |", flush=True)
        ddp_rows.append((world, statistics.median(times[("fairway", "ddp")]),
                         statistics.median(times[("gloo", "ddp")])))
    print()
    print("| ranks | DDP step, fairway (ms) | DDP step, gloo (ms) | gloo / fairway |")
    print("|---|---|---|---|")
    for world, ours, theirs in ddp_rows:
        print(f"| {world} | {ours * 1e3:.2f} | {theirs * 1e3:.2f} | {theirs / ours:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())
