"""Step torch: the PyTorch backend on CUDA tensors, against torch's own
NCCL backend (one rank: NCCL takes one GPU per rank) and gloo: DDP for 20
steps, the stream-ordering check, DDP with Fairway's compression hooks,
and dist.all_reduce timed. Under the host-emulated runtime torch has no
CUDA tensors: the same checks run on CPU tensors against gloo, so the step
itself is exercised, and what needs CUDA is skipped, saying so."""
import os
import sys

from .common import REPO, figure, median, record

STEP = "torch"
MIB = 1 << 20


def _spawn(ctx, fn, world, backend, *args):
    from . import torch_ranks

    return torch_ranks.run_spawned(getattr(torch_ranks, fn), world, backend, ctx_device(ctx), *args,
                                   log=str(ctx.logs / f"torch-{fn}.log"))


def ctx_device(ctx):
    return "cpu" if ctx.emulated else "cuda"


def max_difference(a, b):
    return max(float(abs(x - y).max()) for x, y in zip(a, b))


def ddp_backends(ctx):
    """Fairway's DDP parameters against the same run on each reference backend."""
    cases = [(2, "gloo")] if ctx.emulated else [(1, "nccl"), (1, "gloo"), (2, "gloo")]
    rows, failures = [], []
    for world, reference in cases:
        try:
            ours = _spawn(ctx, "ddp", world, "fairway")[0]
            theirs = _spawn(ctx, "ddp", world, reference)[0]
        except RuntimeError as error:
            failures.append(f"{world} rank(s) against {reference}: {str(error)[:300]}")
            continue
        diff = max_difference(ours, theirs)
        rows.append([world, reference, f"{diff:.3e}"])
        if diff > 1e-5:
            failures.append(f"{world} rank(s): parameters differ from {reference}'s by {diff:.3e}")
    record(ctx, STEP, "ddp", f"DDP, {20} steps, {ctx_device(ctx)} tensors: parameters against other backends",
           "fail" if failures else "pass", "; ".join(failures),
           table={"columns": ["ranks", "reference", "max |difference|"], "rows": rows},
           target="at most 1e-5 apart", met=not failures)


def ddp_hooks(ctx):
    tolerance = {"allreduce_hook": 1e-5, "fp16_compress_hook": 1e-3, "bf16_compress_hook": 1e-2,
                 "int8_compress_hook": 5e-2}
    try:
        ours = _spawn(ctx, "ddp_hooks", 2, "fairway")[0]
        theirs = _spawn(ctx, "ddp_hooks", 2, "gloo")[0]
    except RuntimeError as error:
        record(ctx, STEP, "hooks", "DDP with Fairway's hooks", "fail", str(error)[:600])
        return
    rows, failures = [], []
    for name, limit in tolerance.items():
        diff = max_difference(ours[name], theirs[name])
        rows.append([name, f"{diff:.3e}", f"{limit:g}"])
        if diff > limit:
            failures.append(f"{name}: {diff:.3e} from gloo's")
    record(ctx, STEP, "hooks", f"DDP with Fairway's hooks, 2 ranks, {ctx_device(ctx)} tensors, against gloo "
                               "(torch's hooks; int8 against no compression)",
           "fail" if failures else "pass", "; ".join(failures),
           table={"columns": ["hook", "max |difference|", "allowed"], "rows": rows})


def stream_order(ctx):
    title = "stream ordering: result read on the current stream after wait(), no device synchronisation"
    if ctx.emulated:
        record(ctx, STEP, "stream_order", title, "skip", "needs CUDA tensors (no GPU: host-emulated runtime)")
        return
    failures = []
    for world in (1, 2):
        try:
            for rank, seen in enumerate(_spawn(ctx, "stream_order", world, "fairway")):
                failures += [f"{world} rank(s), rank {rank}: {f}" for f in seen]
        except RuntimeError as error:
            failures.append(f"{world} rank(s): {str(error)[:300]}")
    record(ctx, STEP, "stream_order", title + " (1 rank: NCCL; 2 ranks sharing the GPU: UCX)",
           "fail" if failures else "pass", "; ".join(failures)[:600])


def all_reduce_timing(ctx):
    reference = "gloo" if ctx.emulated else "nccl"
    top = MIB if ctx.emulated else 256 * MIB
    sizes = [1024 * 4 ** k for k in range(12) if 1024 * 4 ** k <= top]
    samples = {"fairway": {}, reference: {}}
    # Three interleaved rounds, a process each; --quick (CI's emulated
    # form, whose figures mean nothing on a GPU) proves the step in one.
    rounds = 1 if ctx.quick else 3
    try:
        for _ in range(rounds):
            for backend in samples:
                for size, seconds in _spawn(ctx, "all_reduce_times", 1, backend, sizes, 3)[0].items():
                    samples[backend].setdefault(size, []).append(seconds)
    except RuntimeError as error:
        record(ctx, STEP, "all_reduce_timing", "dist.all_reduce, 1 rank", "fail", str(error)[:600])
        return
    rows = []
    for size in sizes:
        ours, theirs = median(samples["fairway"][size]) * 1e6, median(samples[reference][size]) * 1e6
        rows.append([size, f"{ours:.2f}", f"{theirs:.2f}", f"{ours / theirs:.3f}"])
    record(ctx, STEP, "all_reduce_timing",
           f"dist.all_reduce on {ctx_device(ctx)} tensors, 1 rank: fairway against {reference} (median us per call)",
           "info", "" if not ctx.emulated else "CPU tensors against gloo: the step's own check, not a GPU figure",
           figures=[figure("sizes", len(rows), "sizes")],
           table={"columns": ["size (B)", "fairway (us)", f"{reference} (us)", "fairway / " + reference],
                  "rows": rows})


def run_step(ctx):
    # The built package, this package, and python/tests (the training loop).
    paths = [str(ctx.build / "python-site"), str(REPO / "scripts"), str(REPO / "python" / "tests")]
    for path in paths:
        if path not in sys.path:
            sys.path.insert(0, path)
    os.environ.update(ctx.device_env())
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                        if p])
    ddp_backends(ctx)
    ddp_hooks(ctx)
    stream_order(ctx)
    all_reduce_timing(ctx)
