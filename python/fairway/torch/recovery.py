"""Surviving a lost rank from torch: shrink_group.

    import fairway.torch.recovery as recovery
    group = recovery.shrink_group([lost_rank], shrink_flags=SHRINK_ABORT)

dist.shrink_group drives the backend's shrink (fwCommShrink: the survivors
agree on whom to leave out and form a new communicator), then assembles
the new group itself. For a backend other than NCCL it registers the new
backend as gloo's on the CPU, and torch's C++ then takes it for
ProcessGroupGloo (DDP's logger casts it and crashes). This function calls
dist.shrink_group and registers the new backend as the custom backend it
is, on the CPU and CUDA as the fairway group was."""
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import SHRINK_ABORT, SHRINK_DEFAULT

__all__ = ["shrink_group", "SHRINK_ABORT", "SHRINK_DEFAULT"]


def shrink_group(ranks_to_exclude, group=None, shrink_flags=SHRINK_DEFAULT, pg_options=None):
    """dist.shrink_group for a group on the fairway backend; the same arguments and result."""
    shrunk = dist.shrink_group(ranks_to_exclude, group=group, shrink_flags=shrink_flags, pg_options=pg_options)
    backend = shrunk._get_backend(torch.device("cpu"))
    custom = dist.ProcessGroup.BackendType.CUSTOM
    for device in ("cpu", "cuda"):
        shrunk._register_backend(torch.device(device), custom, backend)
    shrunk._set_default_backend(custom)
    return shrunk
