"""Compressed collectives on fairway groups (Fairway's fwAllReduceCompressed
and fwReduceScatterCompressed), and the coalesced reduce-scatters DeepSpeed's
ZeRO stage 3 and ZeRO++ (qgZ) call.

Wire formats: "fp16" and "bf16" casts, "int8" and "int4" blocks of
`block_size` values (a power of two from 32 to 4096) sharing one float32
scale. Each element is quantized at most twice end to end (once for a
reduce-scatter): across nodes of equal size the node sums in full precision
first and only the rails carry the compressed bytes. float32, float16 and
bfloat16 tensors, on CPU or CUDA; sum or average. A `residual` (float32,
one element per input element, zeros at first, on the tensor's device)
turns on error feedback: each call adds it to the input and leaves in it
what the quantization lost.
"""
import math

import torch
import torch.distributed as dist

from fairway import _C
from fairway.torch import FairwayBackend

KINDS = _C.compression_kinds()


def _backend(group, tensor):
    group = group if group is not None else dist.group.WORLD
    backend = group._get_backend(tensor.device)
    if not isinstance(backend, FairwayBackend):
        raise ValueError(f"fairway compression needs a group of the fairway backend, not {type(backend).__name__}")
    return backend


def _kind(name):
    if name not in KINDS:
        raise ValueError(f"compression {name!r} is not one of {', '.join(KINDS)}")
    return KINDS[name]


def _average(op):
    if op == dist.ReduceOp.AVG:
        return True
    if op == dist.ReduceOp.SUM:
        return False
    raise ValueError(f"compressed collectives reduce with SUM or AVG, not {op}")


def all_reduce_compressed(tensor, compression="int8", op=dist.ReduceOp.AVG, group=None, block_size=256,
                          residual=None, async_op=False):
    """`tensor` reduced over the group in place, compressed on the wire; every
    rank ends with the same values. Returns a Work when async_op."""
    work = _backend(group, tensor).allreduce_compressed(tensor, _kind(compression), block_size, residual,
                                                        _average(op), async_op)
    return work if async_op else None


def reduce_scatter_compressed(output, input, compression="int8", op=dist.ReduceOp.AVG, group=None, block_size=256,
                              residual=None, async_op=False):
    """Rank r's `output` gets part r of `input` reduced over the group."""
    work = _backend(group, input).reduce_scatter_compressed(output, input, _kind(compression), block_size, residual,
                                                            _average(op), async_op)
    return work if async_op else None


def _coalesced_reduce_scatter(tensors, group, compression, block_size):
    """One reduce-scatter for every tensor: each is cut into world parts of
    ceil(numel / world) (the last ones short, padded with zeros), the parts
    laid out by rank, so rank r receives part r of each; returns those parts
    (averaged over the group) without the padding."""
    if not tensors:
        return []
    group = group if group is not None else dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    dtype, device = tensors[0].dtype, tensors[0].device
    for t in tensors:
        if t.dtype != dtype or t.device != device:
            raise ValueError("reduce_scatter_coalesced: every tensor needs the same dtype and device "
                             f"({dtype} on {device}, not {t.dtype} on {t.device})")
    parts = [math.ceil(t.numel() / world) for t in tensors]
    per_rank = sum(parts)
    flat = torch.zeros(world * per_rank, dtype=dtype, device=device)
    offset = 0
    for t, part in zip(tensors, parts):
        values = t.reshape(-1)
        for r in range(world):
            piece = values[r * part:(r + 1) * part]
            start = r * per_rank + offset
            flat[start:start + piece.numel()].copy_(piece)
        offset += part
    out = torch.empty(per_rank, dtype=dtype, device=device)
    if compression == "none":
        dist.reduce_scatter_tensor(out, flat, op=dist.ReduceOp.AVG, group=group)
    else:
        reduce_scatter_compressed(out, flat, compression, dist.ReduceOp.AVG, group, block_size)
    results, offset = [], 0
    for t, part in zip(tensors, parts):
        real = max(0, min(part, t.numel() - rank * part))
        results.append(out.narrow(0, offset, real))
        offset += part
    return results


def reduce_scatter_coalesced(tensors, group=None, compression="none", block_size=256):
    """DeepSpeed's reduce_scatter_coalesced: for each tensor, this rank's
    part (part r of ceil(numel / world) elements, shorter or empty at the
    end) of its average over the group, in one collective."""
    return _coalesced_reduce_scatter(list(tensors), group, compression, block_size)


def all_to_all_quant_reduce(tensors, groups=None, compression="int4", block_size=256):
    """DeepSpeed ZeRO++'s qgZ gradient reduce-scatter: for each tensor, this
    rank's part of its average over the world, as a 1-D tensor, quantized
    once per level (full precision inside each node, `compression` across
    nodes; Fairway finds the nodes itself, so `groups`, DeepSpeed's
    intra- and inter-node groups, is accepted and not needed). A process
    group may be passed as `groups` to reduce over it instead of the world."""
    group = groups if isinstance(groups, dist.ProcessGroup) else None
    return [part.view(-1) for part in _coalesced_reduce_scatter(list(tensors), group, compression, block_size)]


__all__ = ["KINDS", "all_reduce_compressed", "reduce_scatter_compressed", "reduce_scatter_coalesced",
           "all_to_all_quant_reduce"]
