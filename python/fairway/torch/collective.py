"""Collectives along a tensor dimension, as model-parallel frameworks call
them: all_gather concatenates along `dim`, reduce_scatter splits along it.
With async_op=True each returns (output, work); the output is valid once
work.wait() returned. When `dim` is the outermost dimension no copy is made
beyond the collective's own output.
"""
import torch
import torch.distributed as dist


def _outermost(tensor, dim):
    """The tensor with `dim` moved to the front, contiguous (a copy only if dim != 0)."""
    dim = dim % tensor.dim() if tensor.dim() > 0 else 0
    if dim == 0:
        return tensor.contiguous(), 0
    return tensor.transpose(0, dim).contiguous(), dim


def _result(output, work, async_op):
    return (output, work) if async_op else output


def all_gather(tensor, dim=-1, group=None, async_op=False):
    """Every rank's `tensor`, concatenated along `dim` in rank order."""
    world = dist.get_world_size(group)
    if world == 1:
        return _result(tensor, None, async_op)
    front, dim = _outermost(tensor, dim)
    gathered = torch.empty((front.shape[0] * world,) + tuple(front.shape[1:]), dtype=tensor.dtype,
                           device=tensor.device)
    work = dist.all_gather_into_tensor(gathered, front, group=group, async_op=async_op)
    output = gathered if dim == 0 else gathered.transpose(0, dim)
    return _result(output, work, async_op)


def reduce_scatter(tensor, dim=-1, op=dist.ReduceOp.SUM, group=None, async_op=False):
    """`tensor` reduced over the ranks, split along `dim`: rank r keeps part r."""
    world = dist.get_world_size(group)
    if world == 1:
        return _result(tensor, None, async_op)
    front, dim = _outermost(tensor, dim)
    if front.shape[0] % world != 0:
        raise ValueError(f"reduce_scatter: dimension {dim} has size {front.shape[0]}, "
                         f"not a multiple of the group size {world}")
    part = torch.empty((front.shape[0] // world,) + tuple(front.shape[1:]), dtype=tensor.dtype,
                       device=tensor.device)
    work = dist.reduce_scatter_tensor(part, front, op=op, group=group, async_op=async_op)
    output = part if dim == 0 else part.transpose(0, dim)
    return _result(output, work, async_op)


def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
    """`tensor` reduced over the ranks (in place when it is contiguous)."""
    output = tensor.contiguous()
    if dist.get_world_size(group) == 1:
        return _result(output, None, async_op)
    work = dist.all_reduce(output, op=op, group=group, async_op=async_op)
    return _result(output, work, async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Rank `src`'s tensor on every rank (`src` is a global rank, as in torch.distributed)."""
    output = tensor.contiguous()
    if dist.get_world_size(group) == 1:
        return _result(output, None, async_op)
    work = dist.broadcast(output, src=src, group=group, async_op=async_op)
    return _result(output, work, async_op)


def reduce(tensor, dst, op=dist.ReduceOp.SUM, group=None, async_op=False):
    """`tensor` reduced onto rank `dst` (a global rank); other ranks' outputs are undefined."""
    output = tensor.contiguous()
    if dist.get_world_size(group) == 1:
        return _result(output, None, async_op)
    work = dist.reduce(output, dst=dst, op=op, group=group, async_op=async_op)
    return _result(output, work, async_op)


__all__ = ["all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce"]
