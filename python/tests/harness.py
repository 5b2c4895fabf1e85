"""Runs a function on N spawned ranks with the fairway backend as the
default group (and a gloo group over the same ranks for reference
results); each rank's return value or exception comes back to the test.

FAIRWAY_TEST_DEVICE=cuda (scripts/gpu_check.sh on a GPU machine) puts the
tensors the rank functions hand to fairway on the GPU (every rank shares
GPU 0) through on_device(); references stay on the CPU."""
import os
import queue
import tempfile
import time
import traceback
from datetime import timedelta

import torch.multiprocessing as mp

RANK_LIMIT_S = 120
DEVICE = os.environ.get("FAIRWAY_TEST_DEVICE", "cpu")


def on_device(tensor):
    """A copy of the tensor where fairway's calls take it in this run (CPU or GPU)."""
    return tensor.to(DEVICE, copy=True)


def empty(*shape, dtype=None):
    import torch

    return torch.empty(*shape, dtype=dtype, device=DEVICE)


def _rank_main(rank, world, store_path, fn, args, results, env):
    os.environ.update(env)
    try:
        import torch
        import torch.distributed as dist

        if DEVICE == "cuda":
            torch.cuda.set_device(0)
        import fairway.torch  # noqa: F401  registers the backend

        timeout = timedelta(seconds=float(env.get("FAIRWAY_TEST_PG_TIMEOUT_S", "60")))
        dist.init_process_group("fairway", init_method=f"file://{store_path}", rank=rank, world_size=world,
                                timeout=timeout)
        value = fn(rank, world, *args)
        if env.get("FAIRWAY_TEST_NO_TEARDOWN") != "1":
            dist.destroy_process_group()
        results.put((rank, "ok", value))
    except BaseException as error:  # noqa: BLE001  everything goes back to the test
        results.put((rank, "error", f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))


def run_ranks(world, fn, *args, env=None, limit_s=RANK_LIMIT_S, expect_exits=()):
    """fn(rank, world, *args) on `world` ranks; returns the values by rank.
    Raises AssertionError with every failing rank's traceback. Ranks in
    expect_exits may die without reporting."""
    context = mp.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as directory:
        store_path = os.path.join(directory, "store")
        processes = [context.Process(target=_rank_main,
                                     args=(rank, world, store_path, fn, args, results, dict(env or {})))
                     for rank in range(world)]
        for process in processes:
            process.start()
        outcomes = {}
        deadline = time.monotonic() + limit_s
        expected = world - len(expect_exits)
        while len(outcomes) < world and time.monotonic() < deadline:
            try:
                rank, status, value = results.get(timeout=1)
                outcomes[rank] = (status, value)
            except queue.Empty:
                if len(outcomes) >= expected and all(not processes[r].is_alive() for r in expect_exits):
                    if all(r in outcomes or r in expect_exits for r in range(world)):
                        break
        for process in processes:
            process.join(timeout=max(1.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
    missing = [r for r in range(world) if r not in outcomes and r not in expect_exits]
    failures = [f"rank {r}: {value}" for r, (status, value) in sorted(outcomes.items()) if status != "ok"]
    if missing:
        failures.append(f"ranks {missing} did not finish within {limit_s} s")
    if failures:
        raise AssertionError("\n".join(failures))
    return [outcomes[r][1] if r in outcomes else None for r in range(world)]
