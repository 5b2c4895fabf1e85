"""Runs a function on N ranks (processes forked from a server that has
torch imported) with the fairway backend as the
default group (and a gloo group over the same ranks for reference
results); each rank's return value or exception comes back to the test.

FAIRWAY_TEST_DEVICE=cuda (scripts/gpu_check.sh on a GPU machine) puts the
tensors the rank functions hand to fairway on the GPU (every rank shares
GPU 0) through on_device(); references stay on the CPU."""
import faulthandler
import os
import queue
import shutil
import signal
import subprocess
import sys
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


# What the server that forks the ranks imports once (see _rank_context).
PRELOAD = ["torch", "torch.distributed", "torch.distributed.tensor", "torch.distributed.fsdp"]


def _rank_context():
    """Ranks are forked from a server process that imported torch once
    (multiprocessing's forkserver): a rank starts in a fraction of a second
    instead of the 3 s or more a fresh interpreter spends importing torch.
    The server imports nothing of fairway, so each rank loads the library
    after its environment is set, as a fresh process would."""
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # takes effect when the server starts, on the first call
    return context


def _rank_main(rank, world, store_path, fn, args, results, env, log_path):
    # The server's environment is the one it started with: the caller's now replaces it.
    for name in set(os.environ) - set(env):
        del os.environ[name]
    os.environ.update(env)
    # The rank's output goes to a file of its own, which run_ranks copies to
    # the test's stderr: the server's stdout and stderr are those of the
    # test that started it.
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for fd in (1, 2):
        os.dup2(log, fd)
    os.close(log)
    # SIGUSR2 prints every thread's Python stack: run_ranks asks for it from
    # a rank that did not finish in time (_describe_stalled_rank).
    faulthandler.register(signal.SIGUSR2, all_threads=True)
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


def _describe_stalled_rank(rank, pid):
    """What a rank that did not finish is doing, printed before it is
    killed: its Python stacks, then, where gdb is installed, every native
    thread's (a wait inside the library or a third-party one shows only
    there)."""
    print(f"harness: rank {rank} (pid {pid}) did not finish; its Python stacks are in its output below, "
          "its native stacks:", file=sys.stderr, flush=True)
    try:
        os.kill(pid, signal.SIGUSR2)
        time.sleep(1)
    except ProcessLookupError:
        return
    gdb = shutil.which("gdb")
    if gdb is None:
        return
    try:
        traced = subprocess.run([gdb, "-q", "-batch", "-p", str(pid), "-ex", "thread apply all bt 25"],
                                capture_output=True, text=True, timeout=30)
        frames = [line for line in traced.stdout.splitlines() if line.startswith(("#", "Thread"))]
        print("\n".join(frames) or "  (gdb found no stack)", file=sys.stderr, flush=True)
    except subprocess.TimeoutExpired:
        print("  (gdb did not answer within 30 s)", file=sys.stderr, flush=True)


def _copy_rank_logs(logs):
    """Each rank's output, under its name, on this process's stderr (which
    pytest shows with a failing test)."""
    for rank, path in enumerate(logs):
        try:
            with open(path, errors="replace") as log:
                text = log.read()
        except FileNotFoundError:
            continue
        if text:
            sys.stderr.write(f"--- rank {rank} ---\n{text}" + ("" if text.endswith("\n") else "\n"))
    sys.stderr.flush()


def run_ranks(world, fn, *args, env=None, limit_s=RANK_LIMIT_S, expect_exits=()):
    """fn(rank, world, *args) on `world` ranks; returns the values by rank.
    Raises AssertionError with every failing rank's traceback. Ranks in
    expect_exits may die without reporting."""
    context = _rank_context()
    results = context.Queue()
    rank_env = dict(os.environ, **(env or {}))
    with tempfile.TemporaryDirectory() as directory:
        store_path = os.path.join(directory, "store")
        logs = [os.path.join(directory, f"rank{rank}.log") for rank in range(world)]
        processes = [context.Process(target=_rank_main,
                                     args=(rank, world, store_path, fn, args, results, rank_env, logs[rank]))
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
        for rank, process in enumerate(processes):
            process.join(timeout=max(1.0, deadline - time.monotonic()))
            if process.is_alive():
                if rank not in outcomes and rank not in expect_exits:
                    _describe_stalled_rank(rank, process.pid)
                process.kill()
        _copy_rank_logs(logs)
    missing = [r for r in range(world) if r not in outcomes and r not in expect_exits]
    failures = [f"rank {r}: {value}" for r, (status, value) in sorted(outcomes.items()) if status != "ok"]
    if missing:
        failures.append(f"ranks {missing} did not finish within {limit_s} s")
    if failures:
        raise AssertionError("\n".join(failures))
    return [outcomes[r][1] if r in outcomes else None for r in range(world)]
