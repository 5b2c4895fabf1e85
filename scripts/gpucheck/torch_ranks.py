"""What the torch step's ranks run (spawned; imported by name): DDP training
compared across backends (python/tests' model and training loop), the
stream-ordering check, DDP with Fairway's compression hooks, and
dist.all_reduce timed. Each function returns plain data for the parent to
compare."""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

STEPS = 20


def init(rank, world, backend, store, device):
    if device == "cuda":
        torch.cuda.set_device(0)  # one GPU: every rank shares it
    if backend == "fairway":
        import fairway.torch  # noqa: F401  registers the backend
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))


def train(rank, device, hook=None, state=None):
    """STEPS steps of DDP on the default group (python/tests' model and
    loop); the final parameters as numpy arrays (plain data: a tensor sent
    to the parent needs its sender alive)."""
    from rank_features import train as train_on  # python/tests, on PYTHONPATH

    params = train_on(dist.group.WORLD, hook, STEPS, rank, state=state, device=device)
    return [p.numpy() for p in params]


def ddp(rank, world, backend, store, device):
    init(rank, world, backend, store, device)
    params = train(rank, device)
    dist.destroy_process_group()
    return params


def ddp_hooks(rank, world, backend, store, device):
    """DDP with each hook: {hook name: final parameters}. On the fairway
    backend Fairway's hooks; on a reference backend torch's own (and no
    hook for int8, which torch lacks: the uncompressed run)."""
    init(rank, world, backend, store, device)
    group = dist.group.WORLD
    out = {}
    if backend == "fairway":
        import fairway.torch.hooks as hooks

        for name in ("allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"):
            out[name] = train(rank, device, getattr(hooks, name), group)
        out["int8_compress_hook"] = train(rank, device, hooks.int8_compress_hook, hooks.ErrorFeedbackState(group))
    else:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        for name in ("allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"):
            out[name] = train(rank, device, getattr(default_hooks, name), group)
        out["int8_compress_hook"] = train(rank, device)
    dist.destroy_process_group()
    return out


def stream_order(rank, world, backend, store, device):
    """A side stream made current; slow work on it writes the input; an
    async all_reduce, wait(), then the result is read on the same stream,
    with no device synchronisation anywhere. Wrong values mean the call or
    wait() did not order against the current stream."""
    init(rank, world, backend, store, device)
    failures = []
    stream = torch.cuda.Stream()
    n = 16 << 20  # 64 MiB of float32
    with torch.cuda.stream(stream):
        for trial in range(3):
            a = torch.randn(2048, 2048, device="cuda")
            for _ in range(20):  # tens of milliseconds of work ahead of the fill
                a = a @ a
                a = a / a.norm()
            x = torch.empty(n, device="cuda")
            x.fill_(float(rank + 1 + trial))
            work = dist.all_reduce(x, async_op=True)
            work.wait()
            y = x * 2  # on the current stream, after wait()
            got = y[::4096].to("cpu", non_blocking=False)
            want = 2.0 * sum(r + 1 + trial for r in range(world))
            if not torch.all(got == want):
                failures.append(f"trial {trial}: saw {got[:4].tolist()}, want {want}")
    dist.destroy_process_group()
    return failures


def all_reduce_times(rank, world, backend, store, device, sizes, repeats):
    """{bytes: median seconds per dist.all_reduce} over `repeats` windows."""
    init(rank, world, backend, store, device)
    out = {}
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for size in sizes:
        x = torch.ones(size // 4, device=device)
        iters = max(5, min(200, (64 << 20) // size))
        for _ in range(3):
            dist.all_reduce(x)
        sync()
        windows = []
        for _ in range(repeats):
            dist.barrier()
            sync()
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x)
            sync()
            windows.append((time.perf_counter() - start) / iters)
        windows.sort()
        out[size] = windows[len(windows) // 2]
    dist.destroy_process_group()
    return out


def run_spawned(fn, world, *args, limit_s=300, log=None):
    """fn(rank, world, backend-args...) on world spawned ranks; values by
    rank. The ranks' output goes to `log` (appended) when given."""
    import queue
    import tempfile

    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as directory:
        store = os.path.join(directory, "store")
        processes = [context.Process(target=_rank_main, args=(fn, rank, world, store, args, results, log))
                     for rank in range(world)]
        for p in processes:
            p.start()
        outcomes = {}
        deadline = time.monotonic() + limit_s
        while len(outcomes) < world and time.monotonic() < deadline:
            try:
                rank, ok, value = results.get(timeout=1)
                outcomes[rank] = (ok, value)
            except queue.Empty:
                if all(not p.is_alive() for p in processes) and results.empty():
                    errors_exit = {r: p.exitcode for r, p in enumerate(processes) if r not in outcomes}
                    outcomes.update({r: (False, f"exited with status {code} without a result")
                                     for r, code in errors_exit.items()})
                    break
        for p in processes:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    errors = [f"rank {r}: {v}" for r, (ok, v) in sorted(outcomes.items()) if not ok]
    missing = [r for r in range(world) if r not in outcomes]
    if missing:
        errors.append(f"ranks {missing} did not finish within {limit_s} s")
    if errors:
        raise RuntimeError("\n".join(errors))
    return [outcomes[r][1] for r in range(world)]


def _rank_main(fn, rank, world, store, args, results, log):
    import traceback

    if log is not None:
        with open(log, "a") as f:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
    try:
        backend, device = args[0], args[1]
        value = fn(rank, world, backend, store, device, *args[2:])
        results.put((rank, True, value))
    except BaseException as error:  # noqa: BLE001  everything goes back to the parent
        results.put((rank, False, f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))
