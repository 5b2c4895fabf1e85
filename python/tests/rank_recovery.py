"""Rank functions of test_recovery.py: a rank dies inside training, the
survivors catch the error, shrink the group (fairway.torch.recovery's
shrink_group, over dist.shrink_group) and go on; the DDP run's survivors
end with the parameters a run of the remaining ranks from the same step
reaches. Also torch's reconfigure on the fairway backend."""
import os
import signal
import sys

import torch
import torch.distributed as dist
from fairway.torch.recovery import SHRINK_ABORT, shrink_group

# The model and data of the recovery example, which test_recovery.py also runs whole.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from ddp_recovery import Mlp, batch  # noqa: E402

STEPS = 12


def shrink_after_killed_peer(rank, world):
    x = torch.ones(4)
    dist.all_reduce(x)
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        for _ in range(100):
            dist.all_reduce(x)
        return "no error"
    except RuntimeError:
        pass
    group = shrink_group([world - 1], shrink_flags=SHRINK_ABORT)
    y = torch.full((4,), float(dist.get_rank(group) + 1))
    dist.all_reduce(y, group=group)
    return dist.get_rank(group), dist.get_world_size(group), y.tolist()


def _step(model, optimizer, data_rank, step):
    x, y = batch(data_rank, step)
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()


def ddp_survives_a_killed_rank(rank, world, victim, kill_step, snapshot):
    """DDP for STEPS steps; `victim` dies at the start of step kill_step's
    backward. Survivors restore the step's starting parameters, shrink, wrap
    the model again and redo the step. Rank 0 of the survivors saves those
    starting parameters to `snapshot` for the reference run."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    module = Mlp()
    model = DDP(module, bucket_cap_mb=0.001)  # several buckets: the failure lands mid-backward
    optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
    step = 0
    while step < STEPS:
        start = [p.detach().clone() for p in module.parameters()]
        if rank == victim and step == kill_step:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            _step(model, optimizer, rank, step)
            step += 1
        except RuntimeError:
            with torch.no_grad():
                for p, saved in zip(module.parameters(), start):
                    p.copy_(saved)
            shrink_group([victim], shrink_flags=SHRINK_ABORT)  # the new default group
            if dist.get_rank() == 0:
                torch.save(start, snapshot)
            model = DDP(module, bucket_cap_mb=0.001)
            optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
    # Plain data: a tensor sent to the parent needs its sender alive.
    return [p.detach().numpy().copy() for p in module.parameters()], dist.get_world_size()


def ddp_reference_from(rank, world, victim, kill_step, snapshot):
    """The remaining ranks alone, from the snapshot at kill_step: each uses
    the data of the rank it was before the shrink."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    module = Mlp()
    with torch.no_grad():
        for p, saved in zip(module.parameters(), torch.load(snapshot)):
            p.copy_(saved)
    model = DDP(module, bucket_cap_mb=0.001)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
    old_rank = rank if rank < victim else rank + 1
    for step in range(kill_step, STEPS):
        _step(model, optimizer, old_rank, step)
    return [p.detach().numpy().copy() for p in module.parameters()]


def reconfigure_forms_a_group(rank, world):
    """Reconfigure re-forms the default group from the handles (a list:
    ranks by position; a set: sorted) and refuses a used uuid or handles
    that are none of this process's; a backend made deferred (what
    enable_reconfigure makes) has no communicator until reconfigure."""
    from fairway.torch import FairwayBackend

    group = dist.group.WORLD
    assert dist._supports_reconfigure(group)
    outcome = {}

    def gathered_handles():
        handles = [None] * world
        dist.all_gather_object(handles, dist._get_reconfigure_handle(group))
        return handles

    handles = gathered_handles()
    dist._reconfigure(uuid=1, handles=list(reversed(handles)), group=group).wait()  # ranks reversed
    x = torch.full((2,), float(group.rank() + 1))
    dist.all_reduce(x, group=group)
    outcome["reversed"] = (group.rank(), group.size(), x.tolist())

    handles = gathered_handles()
    my_handle = handles[group.rank()]
    dist._reconfigure(uuid=2, handles=set(handles), group=group).wait()
    outcome["set_rank"] = (group.rank(), sorted(handles).index(my_handle))
    mine = dist._get_reconfigure_handle(group)
    for name, attempt in (("used uuid", lambda: dist._reconfigure(uuid=2, handles=[mine], group=group)),
                          ("not mine", lambda: dist._reconfigure(uuid=3, handles=["fairway-reconfigure:1:" + "0" * 256],
                                                                  group=group)),
                          ("garbage", lambda: dist._reconfigure(uuid=4, handles=["x"], group=group))):
        try:
            attempt()
            outcome[name] = "no error"
        except (RuntimeError, ValueError) as error:
            outcome[name] = str(error)
    y = torch.ones(3)
    dist.all_reduce(y, group=group)  # the group formed at uuid 2 still works
    outcome["after"] = y.tolist()

    deferred = FairwayBackend(dist.HashStore(), 0, 1, 5000, "fairway", deferred=True)
    try:
        deferred.allreduce([torch.ones(1)]).wait()
        outcome["before"] = "no error"
    except RuntimeError as error:
        outcome["before"] = str(error)
    options = torch._C._distributed_c10d.ReconfigureOptions()
    options.uuid = 7
    options.handles = [deferred.get_reconfigure_handle()]
    deferred.reconfigure(options).wait()
    z = torch.full((2,), 5.0)
    deferred.allreduce([z]).wait()
    outcome["deferred"] = (deferred.rank(), deferred.size(), z.tolist())
    return outcome
