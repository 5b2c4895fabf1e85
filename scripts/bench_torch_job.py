#!/usr/bin/env python3
"""Whole steps of the jobs Fairway runs inside, fairway against gloo on the
same ranks, in every configuration a job meets on a shared machine:
2 and 4 ranks; unpinned, or each rank pinned to one core; on a quiet
machine, or beside one busy process per core. Ranks run as torchrun
starts them (OMP_NUM_THREADS=1).

  ddp      DistributedDataParallel step of a small transformer (4 blocks, 3M parameters)
  fsdp2    the same model under FSDP2 (fully_shard per block)
  zero2    DeepSpeed ZeRO stage 2 (DS_ACCELERATOR=cpu, fp32, AdamW), the same model
  zero3    DeepSpeed ZeRO stage 3
  decode   tensor-parallel greedy decoding of a small decoder (6 layers of
           512) with torch's tensor-parallel layers (parallelize_module):
           ms per token
  decode-by-hand  the same split on plain tensors with the sum done by
           dist.all_reduce, by fairway.torch.collective.all_reduce
           ("direct") and by DeepSpeed's shared-memory inference_all_reduce
           ("deepspeed"): the last is what CPU tensor-parallel inference
           uses today

Each step's floor is the same work with no communication, every rank
running at once: data-parallel steps on the unwrapped model (ZeRO: the
same model and optimizer in plain torch), decoding with the sums left
out. "Added" is a step minus its floor: what communication costs the job.
The "no comm" column runs the same job on a backend whose collectives do
nothing (scripts/torch_floor_backend.cpp): DDP's buckets, DeepSpeed's
partitions and flattening, torch's tensor-parallel layers and each
call's dispatch all stay, only the communication goes. Its time less
the floor is what the framework costs with any backend; "added over no
comm" is then what each backend's communication costs. (Not for ZeRO-3,
which checks that ranks agree and computes with the parameters it
gathers.)

Each configuration runs --runs times, the backends taking turns (a fresh
set of processes each time); a number is the median over runs of the
slowest rank's median step. Losses and decoded tokens are compared
between backends.

    .venv/bin/python scripts/bench_torch_job.py --ranks 2 4 --runs 3 [--out docs/data/torch_job.md]
"""
import argparse
import itertools
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_yardsticks import FLOOR_BACKEND, load_yardsticks, register_floor_backend  # noqa: E402

WORKLOADS = ["ddp", "fsdp2", "zero2", "zero3", "decode"]
BY_HAND = ["dist", "direct", "deepspeed"]


def ds_config(stage):
    return {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": stage}, "zero_allow_untested_optimizer": True,
            "steps_per_print": 1 << 30, "wall_clock_breakdown": False}


def train(workload, steps, warmup):
    """(median step seconds, losses) of one data-parallel workload on the default group."""
    import torch
    import torch.distributed as dist
    from torch_models import blocks
    model = blocks()
    engine = None
    if workload == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    elif workload == "fsdp2":
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.fsdp import fully_shard
        mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
        for block in model:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if workload in ("zero2", "zero3"):
        import deepspeed
        engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer,
                                                       config=ds_config(int(workload[-1])))
    generator = torch.Generator().manual_seed(1 + dist.get_rank() if dist.is_initialized() else 1)
    batches = [torch.randn(4, 32, 256, generator=generator) for _ in range(4)]
    losses, times = [], []
    for step in range(warmup + steps):
        x = batches[step % len(batches)]
        start = time.perf_counter()
        if engine is not None:
            loss = engine(x).pow(2).mean()
            engine.backward(loss)
            engine.step()
        else:
            optimizer.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            optimizer.step()
        if step >= warmup:
            times.append(time.perf_counter() - start)
            losses.append(loss.item())
    return statistics.median(times), losses


def decode(how, world, rank, tokens, repeats):
    """(median seconds per generated token, the tokens) of tensor-parallel decoding."""
    import torch
    import torch.distributed as dist
    from torch_models import Decoder, shard_by_hand, tensor_parallel_plan
    model = Decoder().eval()
    if how == "layers":
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.tensor.parallel import parallelize_module
        mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
        parallelize_module(model, mesh, tensor_parallel_plan(model))
    else:
        if how == "none":
            def sum_parts(t):  # the floor: no communication (and wrong sums)
                pass
        elif how == "dist":
            def sum_parts(t):
                dist.all_reduce(t)
        elif how == "direct":
            import fairway.torch.collective as collective

            def sum_parts(t):
                collective.all_reduce(t)
        else:
            import deepspeed.comm as dscomm

            def sum_parts(t):
                dscomm.inference_all_reduce(t)
        shard_by_hand(model, rank, world, sum_parts)
    prompt = torch.arange(8).unsqueeze(0)
    model.generate(prompt, 4)  # warm-up
    per_token, out = [], None
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        out = model.generate(prompt, tokens)
        per_token.append((time.perf_counter() - start) / tokens)
    return statistics.median(per_token), out.flatten().tolist()


def slowest(seconds):
    """The slowest rank's seconds (on the floor backend, which sums nothing, this rank's)."""
    import torch
    import torch.distributed as dist
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def rank_main(rank, world, port, backend, args, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_SIZE=str(world), OMP_NUM_THREADS="1",
                      DS_ACCELERATOR="cpu")
    if args.pinned:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    import torch
    import torch.distributed as dist
    import fairway.torch  # noqa: F401 (registers the backend)
    torch.set_num_threads(1)
    if backend == FLOOR_BACKEND:
        register_floor_backend()
    have_ds = True
    try:
        import deepspeed
        deepspeed.init_distributed(dist_backend=backend)
    except Exception as error:
        have_ds = False
        if rank == 0:
            print(f"bench_torch_job: no DeepSpeed ({type(error).__name__}: {error})", flush=True)
        if not dist.is_initialized():
            dist.init_process_group(backend, rank=rank, world_size=world)
    result = {}
    for workload in args.workloads:
        if workload.startswith("zero") and not have_ds:
            continue
        if workload == "zero3" and backend == FLOOR_BACKEND:
            continue  # it checks that ranks agree (a broadcast) and gathers the parameters it computes with
        if workload == "decode":
            seconds, tokens = decode("layers", world, rank, args.tokens, args.repeats)
            result["decode"] = (slowest(seconds), tokens)
            for how in BY_HAND:
                if backend == FLOOR_BACKEND or (how == "direct" and backend != "fairway") or \
                        (how == "deepspeed" and (not have_ds or backend != "fairway")):
                    continue
                seconds, tokens = decode(how, world, rank, args.tokens, args.repeats)
                result[f"decode-by-hand/{how}"] = (slowest(seconds), tokens)
            seconds, _ = decode("none", world, rank, args.tokens, args.repeats)
            result["decode/floor"] = (slowest(seconds), None)
            continue
        seconds, losses = train(workload, args.steps, args.warmup)
        result[workload] = (slowest(seconds), losses)
        if workload in ("ddp", "zero2") or (workload == "fsdp2" and "ddp" not in args.workloads):
            # The floor of every data-parallel step: the plain model and optimizer, no communication.
            seconds, _ = train("local", args.steps, args.warmup)
            result["train/floor"] = (slowest(seconds), None)
    if rank == 0:
        queue.put(result)
    dist.barrier()
    dist.destroy_process_group()


def busy_processes(count):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def run_once(world, pinned, busy, backend, args, serial):
    import torch.multiprocessing as mp
    from torch_models import remove_deepspeed_buffers
    args.pinned = pinned
    queue = mp.get_context("spawn").SimpleQueue()
    port = 29700 + (os.getpid() + serial) % 2000
    others = busy_processes(os.cpu_count()) if busy else []
    try:
        mp.spawn(rank_main, args=(world, port, backend, args, queue), nprocs=world)
    finally:
        for p in others:
            p.kill()
            p.wait()
        remove_deepspeed_buffers(port)
    return queue.get()


def floor_of(name):
    return "decode/floor" if name.startswith("decode") else "train/floor"


def report(world, pinned, busy, runs):
    """runs: backend -> list of results. The configuration's table and its comparisons."""
    def median(backend, name):
        values = [r[name][0] for r in runs[backend] if name in r]
        return statistics.median(values) if values else None

    rows = []
    names = [n for n in ["ddp", "fsdp2", "zero2", "zero3", "decode"] + [f"decode-by-hand/{h}" for h in BY_HAND]
             if any(n in r for rs in runs.values() for r in rs)]
    for name in names:
        floors = [median(b, floor_of(name)) for b in runs if median(b, floor_of(name)) is not None]
        floor = statistics.median(floors) if floors else None
        fw, gl, none = median("fairway", name), median("gloo", name), median(FLOOR_BACKEND, name)
        unit = 1e3
        cells = [f"{v * unit:.2f}" if v is not None else "" for v in (fw, gl, floor, none)]
        ratio = f"{gl / fw:.2f}x" if fw and gl else ""

        def added(base):
            if not (fw and gl and base) or gl - base <= 0:
                return ""
            return f"{(fw - base) * unit:.2f} / {(gl - base) * unit:.2f} = {(fw - base) / (gl - base):.2f}"
        # Same results: losses (training) or tokens (decoding) of fairway against gloo.
        same = ""
        if name in runs.get("fairway", [{}])[0] and name in runs.get("gloo", [{}])[0]:
            a, b = runs["fairway"][0][name][1], runs["gloo"][0][name][1]
            if name.startswith("decode"):
                same = "same tokens" if a == b else "tokens differ"
            else:
                worst = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
                same = f"losses within {worst:.1e}"
        elif name == "decode-by-hand/direct" or name == "decode-by-hand/deepspeed":
            ref = runs["fairway"][0].get("decode-by-hand/dist", (None, None))[1]
            same = "same tokens" if ref == runs["fairway"][0][name][1] else "tokens differ"
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} | {added(floor)} | {added(none)} | {same} |")
    title = f"### {world} ranks, {'pinned' if pinned else 'unpinned'}, {'beside one busy process per core' if busy else 'quiet'}"
    return "\n".join([title, "",
                      "| step | fairway (ms) | gloo (ms) | floor (ms) | no comm (ms) | gloo / fairway "
                      "| added: fairway / gloo (ms) | added over no comm: fairway / gloo (ms) | results |",
                      "|---|---|---|---|---|---|---|---|---|"] + rows) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--pinning", choices=["unpinned", "pinned", "both"], default="both")
    parser.add_argument("--load", choices=["quiet", "busy", "both"], default="both")
    parser.add_argument("--workloads", nargs="+", default=WORKLOADS, choices=WORKLOADS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12, help="timed training steps per run")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=24, help="generated tokens per decoding")
    parser.add_argument("--repeats", type=int, default=3, help="decodings per run")
    parser.add_argument("--out")
    args = parser.parse_args()
    pinnings = {"unpinned": [False], "pinned": [True], "both": [False, True]}[args.pinning]
    loads = {"quiet": [False], "busy": [True], "both": [False, True]}[args.load]
    load_yardsticks()  # built once, before the ranks load it
    sections = []
    serial = 0
    for world, pinned, busy in itertools.product(args.ranks, pinnings, loads):
        order = ["fairway", "gloo", FLOOR_BACKEND]  # each run starts one further along
        runs = {backend: [] for backend in order}
        for run in range(args.runs):
            for backend in order[run % 3:] + order[:run % 3]:
                serial += 1
                runs[backend].append(run_once(world, pinned, busy, backend, args, serial))
        section = report(world, pinned, busy, runs)
        print(section, flush=True)
        sections.append(section)
    if args.out:
        import torch
        with open(args.out, "w") as out:
            out.write(f"torch {torch.version.__version__}, {os.cpu_count()} CPUs; {args.runs} runs, {args.steps} "
                      f"steps and {args.tokens} tokens x {args.repeats} per run.\n\n" + "\n".join(sections))


if __name__ == "__main__":
    sys.exit(main())
