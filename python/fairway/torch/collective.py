"""Collectives along a tensor dimension, as model-parallel frameworks call
them: all_gather concatenates along `dim`, reduce_scatter splits along it.
With async_op=True each returns (output, work); the output is valid once
work.wait() returned. When `dim` is the outermost dimension no copy is made
beyond the collective's own output.

On CPU tensors of a group whose CPU backend is Fairway's, each call goes
straight to the backend: the same operation, in the same order with the
group's other calls, without torch.distributed's Python wrapper, its
dispatcher and its per-call hooks (which cost a small call several times
the collective itself; see docs/pytorch.md, "Small calls"). Anything else
(CUDA tensors, complex tensors, another backend, a group this rank is not
in, code being compiled by torch.compile) goes through torch.distributed.
"""
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from fairway import _C


class _Route:
    """What a direct call needs of a group, looked up once per group."""

    __slots__ = ("backend", "size", "group_rank_of")

    def __init__(self, backend, size, group_rank_of):
        self.backend = backend              # the group's FairwayBackend
        self.size = size                    # ranks in the group
        self.group_rank_of = group_rank_of  # global rank -> group rank; None: the same


_routes = {}  # ProcessGroup -> _Route, or None where calls go through torch.distributed


def _route_of(group):
    pg = c10d._world.default_pg if group is None else group
    try:
        return _routes[pg]
    except KeyError:
        pass
    except TypeError:  # not a group (GroupMember.NON_GROUP_MEMBER is an object of its own)
        return None
    route = None
    if isinstance(pg, dist.ProcessGroup):
        try:
            backend = pg._get_backend(torch.device("cpu"))
        except RuntimeError:  # no CPU backend in this group
            backend = None
        if isinstance(backend, _C.FairwayBackend):
            ranks = None if pg is c10d._world.default_pg else dict(c10d._world.pg_group_ranks[pg])
            route = _Route(backend, pg.size(), ranks)
    _routes[pg] = route
    return route


def _direct(group, tensor):
    """The group's route when this call on `tensor` can go straight to the
    Fairway backend, else None."""
    if not tensor.is_cpu or tensor.is_complex() or torch.compiler.is_compiling():
        return None
    return _route_of(group)


def _group_rank(route, global_rank):
    if route.group_rank_of is None:
        return global_rank
    try:
        return route.group_rank_of[global_rank]
    except KeyError:
        raise ValueError(f"Global rank {global_rank} is not part of the group") from None


def _outermost(tensor, dim):
    """The tensor with `dim` moved to the front, contiguous (a copy only if dim != 0)."""
    dim = dim % tensor.dim() if tensor.dim() > 0 else 0
    if dim == 0:
        return tensor.contiguous(), 0
    return tensor.transpose(0, dim).contiguous(), dim


def _result(output, work, async_op):
    return (output, work) if async_op else output


def _world_size(route, group):
    return route.size if route is not None else dist.get_world_size(group)


def all_gather(tensor, dim=-1, group=None, async_op=False):
    """Every rank's `tensor`, concatenated along `dim` in rank order."""
    route = _direct(group, tensor)
    world = _world_size(route, group)
    if world == 1:
        return _result(tensor, None, async_op)
    front, dim = _outermost(tensor, dim)
    gathered = torch.empty((front.shape[0] * world,) + tuple(front.shape[1:]), dtype=tensor.dtype,
                           device=tensor.device)
    if route is not None:
        work = route.backend.direct_all_gather(gathered, front, async_op)
    else:
        work = dist.all_gather_into_tensor(gathered, front, group=group, async_op=async_op)
    output = gathered if dim == 0 else gathered.transpose(0, dim)
    return _result(output, work, async_op)


def reduce_scatter(tensor, dim=-1, op=dist.ReduceOp.SUM, group=None, async_op=False):
    """`tensor` reduced over the ranks, split along `dim`: rank r keeps part r."""
    route = _direct(group, tensor)
    world = _world_size(route, group)
    if world == 1:
        return _result(tensor, None, async_op)
    front, dim = _outermost(tensor, dim)
    if front.shape[0] % world != 0:
        raise ValueError(f"reduce_scatter: dimension {dim} has size {front.shape[0]}, "
                         f"not a multiple of the group size {world}")
    part = torch.empty((front.shape[0] // world,) + tuple(front.shape[1:]), dtype=tensor.dtype,
                       device=tensor.device)
    if route is not None:
        work = route.backend.direct_reduce_scatter(part, front, op, async_op)
    else:
        work = dist.reduce_scatter_tensor(part, front, op=op, group=group, async_op=async_op)
    output = part if dim == 0 else part.transpose(0, dim)
    return _result(output, work, async_op)


def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
    """`tensor` reduced over the ranks (in place when it is contiguous)."""
    output = tensor.contiguous()
    route = _direct(group, output)
    if _world_size(route, group) == 1:
        return _result(output, None, async_op)
    if route is not None:
        work = route.backend.direct_all_reduce(output, op, async_op)
    else:
        work = dist.all_reduce(output, op=op, group=group, async_op=async_op)
    return _result(output, work, async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Rank `src`'s tensor on every rank (`src` is a global rank, as in torch.distributed)."""
    output = tensor.contiguous()
    route = _direct(group, output)
    if _world_size(route, group) == 1:
        return _result(output, None, async_op)
    if route is not None:
        work = route.backend.direct_broadcast(output, _group_rank(route, src), async_op)
    else:
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
