"""Surviving a lost rank from torch: failed_ranks, shrink_group, and
re-forming a group with replacements through torch's reconfigure.

    import fairway.torch.recovery as recovery
    group = recovery.shrink_group(recovery.failed_ranks(), shrink_flags=SHRINK_ABORT)

dist.shrink_group drives the backend's shrink (fwCommShrink: the survivors
agree on whom to leave out and form a new communicator), then assembles
the new group itself. For a backend other than NCCL it registers the new
backend as gloo's on the CPU, and torch's C++ then takes it for
ProcessGroupGloo (DDP's logger casts it and crashes), and torch's
reconfigure refuses a group holding a backend under two types. This
function calls dist.shrink_group with the group assembled as for a plain
fairway group: the backend registered as the custom backend it is, on the
CPU and CUDA, in a group named "fairway"."""
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.distributed.distributed_c10d import SHRINK_ABORT, SHRINK_DEFAULT

from fairway.torch import BACKEND_NAME, NamedProcessGroup

__all__ = ["failed_ranks", "shrink_group", "SHRINK_ABORT", "SHRINK_DEFAULT"]


def failed_ranks(group=None):
    """The ranks of `group` (the default group if None) this process knows
    to have failed, ascending (fwCommGetFailedRanks): seen here, or named
    by a peer that saw them."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return list(pg._get_backend(torch.device("cpu")).failed_ranks())


def shrink_group(ranks_to_exclude, group=None, shrink_flags=SHRINK_DEFAULT, pg_options=None):
    """dist.shrink_group for a group on the fairway backend; the same arguments and result."""
    made_by_torch = getattr(c10d, "_create_shrunk_process_group", None)
    if made_by_torch is None:  # a torch that assembles the group elsewhere: re-register on its group
        shrunk = dist.shrink_group(ranks_to_exclude, group=group, shrink_flags=shrink_flags, pg_options=pg_options)
        backend = shrunk._get_backend(torch.device("cpu"))
        _register_as_custom(shrunk, backend)
        return shrunk

    def on_custom(new_backend, remaining_ranks, metadata, is_default_group):
        made = made_by_torch(new_backend, remaining_ranks, metadata, is_default_group)
        return _custom_group_like(made, new_backend)

    c10d._create_shrunk_process_group = on_custom
    try:
        return dist.shrink_group(ranks_to_exclude, group=group, shrink_flags=shrink_flags, pg_options=pg_options)
    finally:
        c10d._create_shrunk_process_group = made_by_torch


def _register_as_custom(group, backend):
    custom = dist.ProcessGroup.BackendType.CUSTOM
    for device in ("cpu", "cuda"):
        group._register_backend(torch.device(device), custom, backend)
    group._set_default_backend(custom)


def _custom_group_like(made, backend):
    """A group like the one torch made for the shrunk backend (its store,
    name, description and device), with the backend registered only as
    the custom backend it is: torch's holds it as gloo's too, which its
    reconfigure then takes for a second backend."""
    group = NamedProcessGroup(made, backend.rank(), backend.size(), BACKEND_NAME)
    group._set_group_name(made.group_name)
    group._set_group_desc(made.group_desc)
    if made.bound_device_id is not None:
        group.bound_device_id = made.bound_device_id
    _register_as_custom(group, backend)
    config = c10d._world.pg_backend_config.pop(made, None)
    if config is not None:
        c10d._world.pg_backend_config[group] = config
    return group
