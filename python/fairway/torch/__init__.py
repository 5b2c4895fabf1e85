"""The "fairway" torch.distributed backend.

    import fairway.torch  # registers the backend
    torch.distributed.init_process_group("fairway")

Works with torchrun and init_method="env://" (or any store): group rank 0
makes Fairway's unique id and publishes it in the group's store. The
group's timeout becomes its Fairway timeout (FAIRWAY_TIMEOUT_MS).
"""
import sys

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from fairway import _C

BACKEND_NAME = "fairway"
FairwayBackend = _C.FairwayBackend
NamedProcessGroup = _C.NamedProcessGroup


# Names torch's C++ code takes as its own backends (DDP's logger, for one,
# looks a group named "gloo" up as ProcessGroupGloo): a creator registered
# under one of them leaves the naming to torch.
_TORCH_OWN_NAMES = {"gloo", "nccl", "ucc", "mpi", "xccl"}


def _timeout_ms(timeout):
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    return max(1, int(seconds * 1000))


def _create_backend(options, backend_options=None, name=BACKEND_NAME):
    """torch.distributed's creator (extended API): one Fairway communicator
    per group. `name`: what torch calls the backend (its profiler events
    carry it), for a creator registered under another name."""
    timeout_ms = _timeout_ms(options.timeout)
    parent = getattr(options, "split_from", None)
    if getattr(options, "enable_reconfigure", False):
        # The communicator forms at reconfigure, with the membership the handles give.
        backend = FairwayBackend(options.store, options.group_rank, options.group_size, timeout_ms, name,
                                 deferred=True)
    elif isinstance(parent, FairwayBackend):
        # new_group on a default group bound to a device: a split of it,
        # colored by the group's lowest global rank (non-members split with
        # no color through perform_nocolor_split).
        ranks = list(options.global_ranks_in_group)
        backend = parent.split_for_group(min(ranks), options.group_rank, options.group_size, timeout_ms, options.store)
    else:
        backend = FairwayBackend(options.store, options.group_rank, options.group_size, timeout_ms, name)
    if name in _TORCH_OWN_NAMES or getattr(options, "process_group", None) is None:
        return backend
    devices = _devices_of_plain_group(name)
    return backend if devices is None else _named_group(options, backend, name, devices)


def _devices_of_plain_group(name):
    """The devices of the group torch is making when all of them run this
    backend (init_process_group("fairway")), else None.

    torch passes its creator no backend string, so this reads the device map
    of the torch function making the group. A mixed group such as
    "cpu:gloo,cuda:fairway", or a torch whose group-making function this
    does not find, gives None: the creator then returns the backend alone
    and torch assembles the group (named "custom") as for any plugin."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_new_process_group_helper":
            config = frame.f_locals.get("backend_config")
            device_map = config.get_device_backend_map() if hasattr(config, "get_device_backend_map") else {}
            if device_map and all(str(backend) == name for backend in device_map.values()):
                return list(device_map)
            return None
        frame = frame.f_back
    return None


def _named_group(options, backend, name, devices):
    """The group torch will keep, reporting `name` (DDP's logging data and
    torch's messages read it), with `backend` for each of `devices`: what
    torch would have assembled itself, DETAIL debug wrapper included."""
    made_by_torch = options.process_group
    group = _C.NamedProcessGroup(made_by_torch, options.group_rank, options.group_size, name)
    group.bound_device_id = made_by_torch.bound_device_id
    backend_type = dist.ProcessGroup.BackendType.CUSTOM
    group._set_default_backend(backend_type)
    if dist.get_debug_level() == dist.DebugLevel.DETAIL and dist.is_gloo_available():
        # torch wraps a plugin's backend for collective checks at DETAIL
        # but not a group a creator returns, so the wrapping happens here.
        backend = c10d._create_process_group_wrapper(
            wrapped_pg=backend,
            store_prefix=options.group_id,
            store=options.store,
            rank=options.group_rank,
            world_size=options.group_size,
            timeout=options.timeout,
        )
    for device in devices:
        group._register_backend(torch.device(device), backend_type, backend)
    return group


def register():
    """Registers the backend once; importing this module does it."""
    if BACKEND_NAME.upper() in dist.Backend.backend_list or BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"])


def mappable_empty(*size, dtype=torch.float32):
    """A zeroed CPU tensor in memory the node's other ranks can map
    (fwHostMemAlloc, freed with the tensor). Collectives on such tensors
    have their peers copy with plain loads and stores instead of the
    kernel's copy between processes, and large ones move each byte once
    (docs/usage.md); any other CPU tensor works as before. Sizes as for
    torch.empty: mappable_empty(4, 1024) or mappable_empty((4, 1024))."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    return _C.mappable_empty([int(s) for s in size], dtype)


register()

__all__ = ["BACKEND_NAME", "FairwayBackend", "NamedProcessGroup", "mappable_empty", "register"]
