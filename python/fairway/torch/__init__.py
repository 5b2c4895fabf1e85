"""The "fairway" torch.distributed backend.

    import fairway.torch  # registers the backend
    torch.distributed.init_process_group("fairway")

Works with torchrun and init_method="env://" (or any store): group rank 0
makes Fairway's unique id and publishes it in the group's store. The
group's timeout becomes its Fairway timeout (FAIRWAY_TIMEOUT_MS).
"""
import torch.distributed as dist

from fairway import _C

BACKEND_NAME = "fairway"
FairwayBackend = _C.FairwayBackend


def _timeout_ms(timeout):
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    return max(1, int(seconds * 1000))


def _create_backend(options, backend_options=None, name=BACKEND_NAME):
    """torch.distributed's creator (extended API): one Fairway communicator
    per group. `name`: what torch calls the backend (its profiler events
    carry it), for a creator registered under another name."""
    timeout_ms = _timeout_ms(options.timeout)
    parent = getattr(options, "split_from", None)
    if isinstance(parent, FairwayBackend):
        # new_group on a default group bound to a device: a split of it,
        # colored by the group's lowest global rank (non-members split with
        # no color through perform_nocolor_split).
        ranks = list(options.global_ranks_in_group)
        return parent.split_for_group(min(ranks), options.group_rank, options.group_size, timeout_ms, options.store)
    return FairwayBackend(options.store, options.group_rank, options.group_size, timeout_ms, name)


def register():
    """Registers the backend once; importing this module does it."""
    if BACKEND_NAME.upper() in dist.Backend.backend_list or BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"])


register()

__all__ = ["BACKEND_NAME", "FairwayBackend", "register"]
