"""What the ranks run for the compression tests: compressed allreduce and
reduce-scatter against the exact result, DeepSpeed's coalesced
reduce-scatters, the int8 DDP hook with error feedback, bad input."""
import torch
import torch.distributed as dist

from harness import DEVICE, empty, on_device
from rank_features import train


def _gaussian(seed, rank, shape):
    return torch.randn(shape, generator=torch.Generator().manual_seed(1000 * seed + rank))


def _exact_sum(seed, world, shape):
    return sum(_gaussian(seed, r, shape).double() for r in range(world))


def _relative_error(got, want):
    want = want.double()
    return ((got.cpu().double() - want).norm() / want.norm()).item()


def _same_everywhere(tensor):
    gathered = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, tensor)
    return all(torch.equal(gathered[0], g) for g in gathered)


def compressed_collectives(rank, world):
    from fairway.torch.compression import (all_reduce_compressed, all_to_all_quant_reduce,
                                           reduce_scatter_coalesced, reduce_scatter_compressed)

    errors = {}
    n = 1 << 16
    for kind, bound in (("int8", 0.015), ("int4", 0.20), ("bf16", 0.01), ("fp16", 0.001)):
        tensor = on_device(_gaussian(1, rank, n))
        all_reduce_compressed(tensor, kind, dist.ReduceOp.SUM)
        errors[f"all_reduce {kind}"] = _relative_error(tensor, _exact_sum(1, world, n))
        assert errors[f"all_reduce {kind}"] < bound, errors
        assert _same_everywhere(tensor), f"{kind}: ranks differ"
    # Reduce-scatter, average, asynchronous.
    full = on_device(_gaussian(2, rank, world * 1000))
    part = empty(1000)
    work = reduce_scatter_compressed(part, full, "int8", dist.ReduceOp.AVG, async_op=True)
    work.wait()
    want = _exact_sum(2, world, world * 1000)[rank * 1000:(rank + 1) * 1000] / world
    errors["reduce_scatter int8"] = _relative_error(part, want)
    assert errors["reduce_scatter int8"] < 0.01, errors
    # DeepSpeed's coalesced reduce-scatters: odd sizes, padding, several shapes.
    shapes = [(7, 13), (world * 64,), (5,), (3, 1000)]
    tensors = [on_device(_gaussian(3 + i, rank, shape)) for i, shape in enumerate(shapes)]
    for name, parts in (("reduce_scatter_coalesced", reduce_scatter_coalesced(tensors)),
                        ("all_to_all_quant_reduce", all_to_all_quant_reduce(tensors, None))):
        for i, (shape, got) in enumerate(zip(shapes, parts)):
            average = (_exact_sum(3 + i, world, shape) / world).reshape(-1)
            chunk = -(-average.numel() // world)
            want = average[rank * chunk:(rank + 1) * chunk]
            assert got.shape == want.shape, f"{name} {shape}: part of shape {tuple(got.shape)}, not {tuple(want.shape)}"
            if not want.numel():
                continue
            worst = (got.cpu().double() - want).abs().max().item()
            errors[f"{name} {shape}"] = worst
            if name == "reduce_scatter_coalesced":
                assert worst < 1e-6, f"{name} {shape}: off by {worst}"
            else:
                # int4, one quantization: each rank's value is within half a
                # step (its block's absmax / 7) of its own, so the average is
                # too; a block may hold parts of several tensors.
                absmax = max(_gaussian(3 + j, r, s).abs().max().item() for j, s in enumerate(shapes)
                             for r in range(world))
                assert worst <= absmax / 14 * (1 + 1e-5), f"{name} {shape}: off by {worst}, bound {absmax / 14}"
    return errors


def error_feedback_converges(rank, world):
    from fairway.torch.compression import all_reduce_compressed

    n = 1 << 14
    exact = _exact_sum(4, world, n)
    residual = on_device(torch.zeros(n))
    mean = torch.zeros(n, dtype=torch.float64)
    single = None
    for step in range(40):
        tensor = on_device(_gaussian(4, rank, n))
        all_reduce_compressed(tensor, "int8", dist.ReduceOp.SUM, residual=residual)
        if single is None:
            single = _relative_error(tensor, exact)
        mean += tensor.cpu().double() / 40
    averaged = _relative_error(mean, exact)
    assert averaged < 0.1 * single, (single, averaged)
    return single, averaged


def ddp_int8_hook(rank, world):
    from fairway.torch.hooks import ErrorFeedbackState, int8_compress_hook

    gloo = dist.new_group(backend="gloo")
    got = train(dist.group.WORLD, int8_compress_hook, 20, rank, state=ErrorFeedbackState(), device=DEVICE)
    want = train(gloo, None, 20, rank)
    diff = max((a - b).abs().max().item() for a, b in zip(got, want))
    scale = max(b.abs().max().item() for b in want)
    assert diff <= 0.01 * scale, f"int8 hook parameters differ from gloo's by {diff} (largest {scale})"
    for p in got:
        assert _same_everywhere(on_device(p)), "ranks hold different parameters"
    return diff


def compression_bad_input(rank, world):
    from fairway.torch.compression import all_reduce_compressed

    errors = {}
    gloo = dist.new_group(backend="gloo")
    cases = {
        "gloo group": lambda: all_reduce_compressed(torch.ones(8), "int8", group=gloo),
        "unknown kind": lambda: all_reduce_compressed(torch.ones(8), "int3"),
        "max": lambda: all_reduce_compressed(torch.ones(8), "int8", dist.ReduceOp.MAX),
        "int32": lambda: all_reduce_compressed(torch.ones(8, dtype=torch.int32), "int8"),
        "block size": lambda: all_reduce_compressed(torch.ones(8), "int8", block_size=100),
        "residual size": lambda: all_reduce_compressed(torch.ones(8), "int8", residual=torch.zeros(4)),
    }
    for name, call in cases.items():
        try:
            call()
            errors[name] = "no error"
        except (ValueError, RuntimeError) as error:
            errors[name] = str(error)
    # Still healthy afterwards.
    tensor = torch.ones(8)
    all_reduce_compressed(tensor, "fp16", dist.ReduceOp.SUM)
    assert torch.equal(tensor, torch.full((8,), float(world))), tensor
    return errors
