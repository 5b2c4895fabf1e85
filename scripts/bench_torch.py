#!/usr/bin/env python3
"""Every collective through torch.distributed, in each form torch offers,
blocking and async_op=True (four calls issued, then waited for): the
fairway backend against gloo in the same processes, and against Fairway's
own perf binary for that collective on the same ranks, launched between
the torch measurements while those ranks sleep in a gloo barrier. Each run
measures everything in turn, alternating the order; the tables show
medians over --runs. Then a DDP step and an FSDP2 step, fairway against
gloo and against the step's floor with no communication (`--forms` with
no form measures only the steps). Sizes and busbw as nccl-tests: the size is the collective's total
(all_gather's output, reduce_scatter's input, a rank's all-to-all or
gather/scatter buffer, one message of send/recv), busbw = size / time x
the collective's factor.

    .venv/bin/python scripts/bench_torch.py --ranks 2 4 --runs 3 [--out docs/data/torch_collectives.md]

A third reference isolates the torch layer: the same collective through
Fairway's C API (ctypes, on a communicator of its own) in the same
processes, on tensors allocated there, blocking. Where a process's memory
is slower or faster than the perf binary's (a virtual machine's pages
are not all alike), this column moves with the torch one; "fairway / C
API" is what torch.distributed and the backend cost.
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

from torch_models import blocks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN_FLIGHT = 4  # async_op=True: calls issued before waiting for them


def sizes_between(low, high):
    size = low
    while size <= high:
        yield size
        size *= 4


def ring(n):
    return 2 * (n - 1) / n


def share(n):
    return (n - 1) / n


def one(n):
    return 1.0


# form -> (perf binary, its time column: "in" (in place) or "out", busbw factor)
FORMS = {
    "all_reduce": ("all_reduce_perf", "in", ring),
    "broadcast": ("broadcast_perf", "in", one),
    "reduce": ("reduce_perf", "in", one),
    "all_gather": ("all_gather_perf", "out", share),
    "all_gather_into_tensor": ("all_gather_perf", "out", share),
    "reduce_scatter": ("reduce_scatter_perf", "out", share),
    "reduce_scatter_tensor": ("reduce_scatter_perf", "out", share),
    "all_to_all": ("alltoall_perf", "out", share),
    "all_to_all_single": ("alltoall_perf", "out", share),
    "gather": ("gather_perf", "out", share),
    "scatter": ("scatter_perf", "out", share),
    "send_recv": ("sendrecv_perf", "out", one),
}


def make_call(form, size, rank, world):
    """A function (group, async_op) -> list of Works (empty when blocking)
    running one `form` of `size` bytes on its own buffers."""
    elements = size // 4
    block = max(1, elements // world)

    def full(count):
        return torch.ones(count)

    def listed(count):
        return [full(count) for _ in range(world)]

    if form == "all_reduce":
        t = full(elements)
        return lambda g, a: [dist.all_reduce(t, group=g, async_op=a)]
    if form == "broadcast":
        t = full(elements)
        return lambda g, a: [dist.broadcast(t, src=0, group=g, async_op=a)]
    if form == "reduce":
        t = full(elements)
        return lambda g, a: [dist.reduce(t, dst=0, group=g, async_op=a)]
    if form == "all_gather":
        x, outs = full(block), listed(block)
        return lambda g, a: [dist.all_gather(outs, x, group=g, async_op=a)]
    if form == "all_gather_into_tensor":
        x, out = full(block), full(block * world)
        return lambda g, a: [dist.all_gather_into_tensor(out, x, group=g, async_op=a)]
    if form == "reduce_scatter":
        ins, out = listed(block), full(block)
        return lambda g, a: [dist.reduce_scatter(out, ins, group=g, async_op=a)]
    if form == "reduce_scatter_tensor":
        x, out = full(block * world), full(block)
        return lambda g, a: [dist.reduce_scatter_tensor(out, x, group=g, async_op=a)]
    if form == "all_to_all":
        ins, outs = listed(block), listed(block)
        return lambda g, a: [dist.all_to_all(outs, ins, group=g, async_op=a)]
    if form == "all_to_all_single":
        x, out = full(block * world), full(block * world)
        return lambda g, a: [dist.all_to_all_single(out, x, group=g, async_op=a)]
    if form == "gather":
        x = full(block)
        outs = listed(block) if rank == 0 else None
        return lambda g, a: [dist.gather(x, outs, dst=0, group=g, async_op=a)]
    if form == "scatter":
        out = full(block)
        ins = listed(block) if rank == 0 else None
        return lambda g, a: [dist.scatter(out, ins, src=0, group=g, async_op=a)]
    if form == "send_recv":
        x, y = full(elements), full(elements)
        # A ring, as sendrecv_perf runs it: to the next rank, from the previous.
        return lambda g, a: [dist.isend(x, (rank + 1) % world, group=g),
                             dist.irecv(y, (rank - 1) % world, group=g)]
    raise ValueError(form)


FW_FLOAT32, FW_SUM = 8, 0  # fairway.h's fwFloat32 and fwSum


class UniqueId(ctypes.Structure):  # fwUniqueId, passed by value
    _fields_ = [("internal", ctypes.c_char * 128)]


class CApi:
    """Fairway's C API from Python: the library the fairway extension has
    loaded, and a communicator of its own over the ranks of `gloo`."""

    def __init__(self, rank, gloo):
        import fairway
        self.lib = ctypes.CDLL(os.path.join(os.path.dirname(fairway.__file__), "lib", "libfairway.so.0"))
        uid = UniqueId()
        shared = [None]
        if rank == 0:
            self.check(self.lib.fwGetUniqueId(ctypes.byref(uid)), "fwGetUniqueId")
            shared = [ctypes.string_at(ctypes.byref(uid), ctypes.sizeof(uid))]
        dist.broadcast_object_list(shared, src=0, group=gloo)
        ctypes.memmove(ctypes.byref(uid), shared[0], ctypes.sizeof(uid))
        self.comm = ctypes.c_void_p()
        self.check(self.lib.fwCommInitRank(ctypes.byref(self.comm), dist.get_world_size(), uid, rank),
                   "fwCommInitRank")

    def check(self, result, what):
        if result != 0:
            self.lib.fwGetLastErrorMessage.restype = ctypes.c_char_p
            raise RuntimeError(f"{what}: {self.lib.fwGetLastErrorMessage().decode()}")

    def destroy(self):
        self.lib.fwCommDestroy(self.comm)


def make_c_call(api, form, size, rank, world):
    """One blocking Fairway call of `size` bytes on tensors of this process:
    what the perf binary for `form` calls (list forms: the list calls)."""
    lib, comm, check = api.lib, api.comm, api.check
    elements = size // 4
    block = max(1, elements // world)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())
    n = lambda count: ctypes.c_size_t(count)
    if form in ("all_reduce", "broadcast", "reduce"):
        t = torch.ones(elements)
        call = {"all_reduce": lambda: lib.fwAllReduce(ptr(t), ptr(t), n(elements), FW_FLOAT32, FW_SUM, comm, None),
                "broadcast": lambda: lib.fwBroadcast(ptr(t), ptr(t), n(elements), FW_FLOAT32, 0, comm, None),
                "reduce": lambda: lib.fwReduce(ptr(t), ptr(t), n(elements), FW_FLOAT32, FW_SUM, 0, comm,
                                               None)}[form]
        return lambda: check(call(), form), [t]
    if form == "all_gather":
        x, outs = torch.ones(block), [torch.ones(block) for _ in range(world)]
        blocks = (ctypes.c_void_p * world)(*[o.data_ptr() for o in outs])
        return lambda: check(lib.fwAllGatherList(ptr(x), blocks, n(block), FW_FLOAT32, comm, None), form), [x] + outs
    if form == "reduce_scatter":
        ins, out = [torch.ones(block) for _ in range(world)], torch.ones(block)
        blocks = (ctypes.c_void_p * world)(*[i.data_ptr() for i in ins])
        return lambda: check(lib.fwReduceScatterList(blocks, ptr(out), n(block), FW_FLOAT32, FW_SUM, comm, None),
                             form), ins + [out]
    x, out = torch.ones(block * world), torch.ones(block * world)
    calls = {
        "all_gather_into_tensor": lambda: lib.fwAllGather(ptr(x), ptr(out), n(block), FW_FLOAT32, comm, None),
        "reduce_scatter_tensor": lambda: lib.fwReduceScatter(ptr(x), ptr(out), n(block), FW_FLOAT32, FW_SUM, comm,
                                                             None),
        "all_to_all": lambda: lib.fwAllToAll(ptr(x), ptr(out), n(block), FW_FLOAT32, comm, None),
        "all_to_all_single": lambda: lib.fwAllToAll(ptr(x), ptr(out), n(block), FW_FLOAT32, comm, None),
        "gather": lambda: lib.fwGather(ptr(x), ptr(out), n(block), FW_FLOAT32, 0, comm, None),
        "scatter": lambda: lib.fwScatter(ptr(x), ptr(out), n(block), FW_FLOAT32, 0, comm, None),
    }
    if form in calls:
        return lambda: check(calls[form](), form), [x, out]
    assert form == "send_recv", form
    send, recv = torch.ones(elements), torch.ones(elements)

    def exchange():
        requests = (ctypes.c_void_p * 2)()
        check(lib.fwIrecv(ptr(recv), n(elements), FW_FLOAT32, (rank - 1) % world, comm, ctypes.byref(requests, 0)),
              "fwIrecv")
        check(lib.fwIsend(ptr(send), n(elements), FW_FLOAT32, (rank + 1) % world, comm,
                          ctypes.byref(requests, ctypes.sizeof(ctypes.c_void_p))), "fwIsend")
        for r in requests:
            check(lib.fwWait(ctypes.c_void_p(r)), "fwWait")
    return exchange, [send, recv]


def timed(run, barrier, agree, budget_s):
    """Seconds per call of `run` over enough calls to fill about budget_s;
    every rank runs the same count (agreed with a MAX over `agree`)."""
    for _ in range(2):
        run()
    start = time.perf_counter()
    run()
    single = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(single, op=dist.ReduceOp.MAX, group=agree)
    iterations = max(3, min(1000, int(budget_s / max(single.item(), 1e-6))))
    barrier()
    start = time.perf_counter()
    for _ in range(iterations):
        run()
    return (time.perf_counter() - start) / iterations


def measure_torch(rank, world, args, gloo, times, order, api):
    groups = {"fairway": dist.group.WORLD, "gloo": gloo}
    for form in args.forms:
        for size in sizes_between(args.min_bytes, args.max_bytes):
            run, keep = make_c_call(api, form, size, rank, world)
            seconds = torch.tensor([timed(run, lambda: dist.barrier(group=gloo), gloo, args.budget_s)],
                                   dtype=torch.float64)
            dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=gloo)  # the slowest rank's time
            times.setdefault(("capi", form, size), []).append(seconds.item())
            del run, keep
            for mode in ("blocking", "async"):
                for name in order:
                    group = groups[name]
                    copies = [make_call(form, size, rank, world) for _ in range(IN_FLIGHT if mode == "async" else 1)]
                    if mode == "blocking" and form != "send_recv":
                        def run():
                            copies[0](group, False)
                    else:
                        def run():
                            works = [w for call in copies for w in call(group, True)]
                            for w in works:
                                w.wait()
                    try:
                        seconds = timed(run, lambda: dist.barrier(group=gloo), gloo, args.budget_s)
                        seconds /= len(copies)
                    except RuntimeError:  # gloo lacks some forms: n/a
                        seconds = float("nan")
                    seconds = torch.tensor([seconds], dtype=torch.float64)
                    dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=gloo)  # the slowest rank's time
                    times.setdefault((name, form, mode, size), []).append(seconds.item())


def measure_perf(rank, world, args, gloo, times):
    """Rank 0 runs each perf binary on `world` ranks while the others wait
    in a gloo barrier (gloo waits in the kernel)."""
    dist.barrier(group=gloo)
    if rank == 0:
        for binary in sorted({FORMS[f][0] for f in args.forms}):
            command = [os.path.join(ROOT, "build/bin/fairwayrun"), "-np", str(world),
                       os.path.join(ROOT, "build/bin", binary), "-b", str(args.min_bytes), "-e",
                       str(args.max_bytes), "-f", "4", "-n", "20", "-w", "3", "-a", "3"]
            output = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True).stdout
            for line in output.splitlines():
                fields = line.split()
                if len(fields) >= 9 and fields[0].isdigit():
                    times.setdefault((binary, "out", int(fields[0])), []).append(float(fields[5]) * 1e-6)
                    if len(fields) >= 10 and fields[9] != "N/A":
                        times.setdefault((binary, "in", int(fields[0])), []).append(float(fields[9]) * 1e-6)
    dist.barrier(group=gloo)


def step_seconds(kind, group, steps=10):
    """Seconds per training step of a small transformer (4 blocks, 3M
    parameters) under DDP or FSDP2 on `group`. Two floors, every rank
    training at the same time: "local", the step with no DDP at all;
    "ddp_alone", DDP whose communication hook hands each gradient bucket
    back untouched (DDP's own bucket copies and hooks, no backend)."""
    model = blocks()
    if kind == "local":
        pass
    elif kind in ("ddp", "ddp_alone"):
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, process_group=group)
        if kind == "ddp_alone":
            def untouched(state, bucket):
                future = torch.futures.Future()
                future.set_result(bucket.buffer())
                return future
            model.register_comm_hook(None, untouched)
    else:
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.fsdp import fully_shard
        mesh = DeviceMesh.from_group(group, "cpu")
        for block in model:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 32, 256)

    def step():
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()

    for _ in range(2):
        step()
    if group is not None:
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
    api = CApi(rank, gloo)
    times = {}
    for run in range(args.runs):
        order = ["fairway", "gloo"] if run % 2 == 0 else ["gloo", "fairway"]
        if run % 2 == 1:
            measure_perf(rank, world, args, gloo, times)
        measure_torch(rank, world, args, gloo, times, order, api)
        if run % 2 == 0:
            measure_perf(rank, world, args, gloo, times)
        if args.steps:
            for kind in ("ddp", "fsdp2"):
                for name in order:
                    group = dist.group.WORLD if name == "fairway" else gloo
                    seconds = torch.tensor([step_seconds(kind, group)], dtype=torch.float64)
                    dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=gloo)
                    times.setdefault((name, kind), []).append(seconds.item())
            for floor in ("local", "ddp_alone"):
                dist.barrier(group=gloo)
                seconds = torch.tensor([step_seconds(floor, None if floor == "local" else gloo)], dtype=torch.float64)
                dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=gloo)
                times.setdefault(floor, []).append(seconds.item())
    if rank == 0:
        results.put(times)
    api.destroy()
    dist.destroy_process_group()


def busbw(times, key, size, factor):
    samples = times.get(key)
    if not samples:
        return float("nan")
    return size / statistics.median(samples) / 1e9 * factor


def ratio(a, b):
    return a / b if b == b and b > 0 and a == a else float("nan")


def report(world, args, times):
    lines = []
    for form in args.forms:
        binary, column, factor_of = FORMS[form]
        factor = factor_of(world)
        for size in sizes_between(args.min_bytes, args.max_bytes):
            bw = {(name, mode): busbw(times, (name, form, mode, size), size, factor)
                  for name in ("fairway", "gloo") for mode in ("blocking", "async")}
            perf = busbw(times, (binary, column, size), size, factor)
            capi = busbw(times, ("capi", form, size), size, factor)
            lines.append((world, form, size, bw, perf, capi))
    return lines


def fmt(x, suffix=""):
    return "n/a" if x != x else f"{x:.2f}{suffix}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--min-bytes", type=int, default=64 << 10)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--forms", nargs="*", default=list(FORMS), choices=list(FORMS))
    parser.add_argument("--budget-s", type=float, default=0.15, help="time for one measurement")
    parser.add_argument("--no-steps", dest="steps", action="store_false", help="skip the DDP and FSDP2 steps")
    parser.add_argument("--out", help="also write the tables (markdown) here")
    args = parser.parse_args()
    context = mp.get_context("spawn")
    out = ["| ranks | form | size | fairway | gloo | fairway / gloo | fairway async | gloo async | "
           "async fairway / gloo | perf binary | fairway / perf | C API | fairway / C API |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    # The floors: the step with no communication (no DDP at all, or DDP
    # handing its buckets back untouched); gloo / floor is the most any
    # backend could gain over gloo on these ranks.
    # Above the floor is the time the backend adds to a step.
    steps = ["| ranks | step | fairway (ms) | gloo (ms) | gloo / fairway | floor (ms) | gloo / floor | "
             "time added: gloo / fairway |", "|---|---|---|---|---|---|---|---|"]
    print("\n".join(out), flush=True)
    for world in args.ranks:
        results = context.Queue()
        with tempfile.TemporaryDirectory() as directory:
            store = os.path.join(directory, "store")
            processes = [context.Process(target=rank_main, args=(r, world, store, args, results))
                         for r in range(world)]
            for p in processes:
                p.start()
            times = results.get(timeout=7200)
            for p in processes:
                p.join()
        for world_, form, size, bw, perf, capi in report(world, args, times):
            size_text = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
            row = (f"| {world_} | {form} | {size_text} | {fmt(bw['fairway', 'blocking'])} | "
                   f"{fmt(bw['gloo', 'blocking'])} | {fmt(ratio(bw['fairway', 'blocking'], bw['gloo', 'blocking']), 'x')} | "
                   f"{fmt(bw['fairway', 'async'])} | {fmt(bw['gloo', 'async'])} | "
                   f"{fmt(ratio(bw['fairway', 'async'], bw['gloo', 'async']), 'x')} | {fmt(perf)} | "
                   f"{fmt(ratio(bw['fairway', 'blocking'], perf))} | {fmt(capi)} | "
                   f"{fmt(ratio(bw['fairway', 'blocking'], capi))} |")
            out.append(row)
            print(row, flush=True)
        if args.steps:
            for kind in ("ddp", "fsdp2"):
                ours = statistics.median(times[("fairway", kind)])
                theirs = statistics.median(times[("gloo", kind)])
                alone = statistics.median(times["ddp_alone" if kind == "ddp" else "local"])
                steps.append(f"| {world} | {kind} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | {theirs / ours:.2f}x | "
                             f"{alone * 1e3:.1f} | {theirs / alone:.2f}x | {fmt(ratio(theirs - alone, ours - alone), 'x')} |")
    if not args.steps:
        steps = []
    print()
    print("\n".join(steps))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(out) + "\n\n" + "\n".join(steps) + "\n")


if __name__ == "__main__":
    sys.exit(main())
