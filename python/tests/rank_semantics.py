"""What the ranks run for the torch semantics beyond plain collectives:
monitored_barrier, sparse allreduce, the coalescing manager,
batch_isend_irecv, tags and receives from any source, object collectives
on subgroups, profiler events, the group's name; each against gloo's behaviour on the same ranks."""
import re
from datetime import timedelta

import torch
import torch.distributed as dist

from harness import DEVICE, on_device


def _raised(fn):
    """fn's exception message, or None when it returned."""
    try:
        fn()
    except RuntimeError as error:
        return str(error)
    return None


def monitored_barrier(rank, world):
    """Whole barriers pass; with ranks absent, rank 0 names the first (or
    every one, wait_all_ranks) and the ranks that came say rank 0 failed:
    the same ranks raise with the same words on fairway and on gloo.
    Returns {backend: {scenario: message or None}} from this rank."""
    short = timedelta(seconds=1)
    seen = {}
    for name in ("fairway", "gloo"):
        # gloo closes a group's connections when its monitored barrier
        # fails, so each gloo scenario has a group of its own; the ranks
        # meet between scenarios on the default (fairway) group.
        def group():
            return None if name == "fairway" else dist.new_group(backend="gloo")

        whole = group()
        dist.monitored_barrier(whole, timeout=timedelta(seconds=30))
        dist.monitored_barrier(whole, timeout=timedelta(seconds=30), wait_all_ranks=True)
        seen[name] = {}
        one_absent, all_absent = group(), group()
        # The last rank stays away.
        if rank != world - 1:
            seen[name]["one_absent"] = _raised(lambda: dist.monitored_barrier(one_absent, timeout=short))
        dist.barrier()
        # Every rank but 0 stays away, rank 0 waits for all.
        if rank == 0:
            seen[name]["all_absent"] = _raised(
                lambda: dist.monitored_barrier(all_absent, timeout=short, wait_all_ranks=True))
        dist.barrier()
    # The group still works after a failed monitored barrier.
    x = on_device(torch.ones(4))
    dist.all_reduce(x)
    assert torch.all(x.cpu() == world), x
    if rank == 0:
        absent = world - 1
        assert re.search(f"Rank {absent} failed to pass monitoredBarrier", seen["fairway"]["one_absent"]), seen
        listed = ", ".join(str(r) for r in range(1, world))
        assert re.search(f"Ranks? {listed} failed to pass monitoredBarrier", seen["fairway"]["all_absent"]), seen
    elif rank != world - 1:
        assert re.search(f"Rank {rank} successfully reached monitoredBarrier, but received errors while waiting "
                         "for send/recv from rank 0", seen["fairway"]["one_absent"]), seen
    return seen


def _sparse_input(rank, dense_dim):
    """A COO tensor whose entries differ by rank and overlap between ranks."""
    generator = torch.Generator().manual_seed(100 + rank)
    nnz = 3 + 2 * rank
    indices = torch.randint(0, 6, (2, nnz), generator=generator)
    shape = (nnz,) + ((3,) if dense_dim else ())
    values = torch.randn(shape, generator=generator)
    size = (6, 6) + ((3,) if dense_dim else ())
    return torch.sparse_coo_tensor(indices, values, size)


def sparse_allreduce_matches_gloo(rank, world):
    gloo = dist.new_group(backend="gloo")
    for dense_dim in (False, True):
        for async_op in (False, True):
            mine = _sparse_input(rank, dense_dim)
            want = mine.clone()
            dist.all_reduce(want, group=gloo)
            got = mine.clone()
            work = dist.all_reduce(got, async_op=async_op)
            if async_op:
                work.wait()
            assert got.is_sparse
            assert torch.allclose(got.to_dense(), want.to_dense(), atol=1e-6), (dense_dim, got, want)
    try:
        dist.all_reduce(_sparse_input(rank, False), op=dist.ReduceOp.MAX)
    except ValueError as error:
        assert "sparse" in str(error), error
    else:
        raise AssertionError("a sparse all_reduce with MAX did not raise")
    return True


def coalescing_manager(rank, world):
    """torch's coalescing manager makes one Fairway call of a group of
    all_reduce, all_gather_into_tensor or reduce_scatter_tensor calls (the
    group's sequence number moves by one), blocking and async."""
    pg = dist.distributed_c10d._get_default_group()
    device = torch.device(DEVICE)
    for async_op in (False, True):
        tensors = [on_device(torch.full((10 + i,), float(rank + i))) for i in range(3)]
        before = pg._get_sequence_number_for_group()
        with dist._coalescing_manager(device=device, async_ops=async_op) as cm:
            for t in tensors:
                dist.all_reduce(t)
        if async_op:
            cm.wait()
        assert pg._get_sequence_number_for_group() == before + 1
        for i, t in enumerate(tensors):
            assert torch.all(t.cpu() == float(sum(r + i for r in range(world)))), (i, t)

        inputs = [on_device(torch.full((4 + i,), float(rank * 10 + i))) for i in range(3)]
        outputs = [on_device(torch.empty(world * (4 + i))) for i in range(3)]
        with dist._coalescing_manager(device=device, async_ops=async_op) as cm:
            for o, x in zip(outputs, inputs):
                dist.all_gather_into_tensor(o, x)
        if async_op:
            cm.wait()
        for i, o in enumerate(outputs):
            want = torch.cat([torch.full((4 + i,), float(r * 10 + i)) for r in range(world)])
            assert torch.equal(o.cpu(), want), (i, o)

        inputs = [on_device(torch.arange(world * (2 + i), dtype=torch.float32) + rank) for i in range(3)]
        outputs = [on_device(torch.empty(2 + i)) for i in range(3)]
        with dist._coalescing_manager(device=device, async_ops=async_op) as cm:
            for o, x in zip(outputs, inputs):
                dist.reduce_scatter_tensor(o, x)
        if async_op:
            cm.wait()
        for i, o in enumerate(outputs):
            full = sum(torch.arange(world * (2 + i), dtype=torch.float32) + r for r in range(world))
            assert torch.equal(o.cpu(), full[rank * (2 + i):(rank + 1) * (2 + i)]), (i, o)
    return True


def batch_isend_irecv(rank, world):
    """A ring both ways at once, with tags, in one batch (torch coalesces it
    through the backend), as on gloo."""
    results = {}
    gloo = dist.new_group(backend="gloo")
    for name, group in (("fairway", None), ("gloo", gloo)):
        right, left = (rank + 1) % world, (rank - 1) % world
        to_right = on_device(torch.full((1000,), float(rank)))
        to_left = on_device(torch.full((10,), float(-rank)))
        from_left = on_device(torch.empty(1000))
        from_right = on_device(torch.empty(10))
        ops = [dist.P2POp(dist.isend, to_right, right, group=group, tag=1),
               dist.P2POp(dist.isend, to_left, left, group=group, tag=2),
               dist.P2POp(dist.irecv, from_left, left, group=group, tag=1),
               dist.P2POp(dist.irecv, from_right, right, group=group, tag=2)]
        if name == "gloo":
            ops = [dist.P2POp(op.op, op.tensor.cpu(), op.peer, group=group, tag=op.tag) for op in ops]
            from_left, from_right = ops[2].tensor, ops[3].tensor
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        results[name] = (from_left.cpu().clone(), from_right.cpu().clone())
    assert torch.all(results["fairway"][0] == float((rank - 1) % world))
    assert torch.all(results["fairway"][1] == float(-((rank + 1) % world)))
    for mine, theirs in zip(results["fairway"], results["gloo"]):
        assert torch.equal(mine, theirs)
    return True


def tags_and_any_source(rank, world):
    """Tags match independently (a later tag is received first) and a
    receive from any source names its sender and keeps each sender's
    order, on CPU tensors as on gloo."""
    gloo = dist.new_group(backend="gloo")
    right, left = (rank + 1) % world, (rank - 1) % world
    seen = {}
    for name, group in (("fairway", None), ("gloo", gloo)):
        first = torch.full((100000,), float(rank))
        second = torch.full((3,), float(100 + rank))
        sends = [dist.isend(first, right, group=group, tag=7), dist.isend(second, right, group=group, tag=3)]
        got_second, got_first = torch.empty(3), torch.empty(100000)
        dist.recv(got_second, left, group=group, tag=3)
        dist.recv(got_first, left, group=group, tag=7)
        for work in sends:
            work.wait()
        assert torch.all(got_second == 100 + left) and torch.all(got_first == left), name

        # Every other rank sends rank 0 two numbered messages of tag 5.
        order = []
        if rank == 0:
            for _ in range(2 * (world - 1)):
                value = torch.empty(1)
                if len(order) % 2:
                    work = dist.irecv(value, group=group, tag=5)  # no source: any
                    work.wait()
                    source = work._source_rank()
                else:
                    source = dist.recv(value, group=group, tag=5)
                order.append((source, int(value.item())))
        else:
            for k in range(2):
                dist.send(torch.tensor([float(rank * 10 + k)]), 0, group=group, tag=5)
        by_source = {}
        for source, value in order:
            by_source.setdefault(source, []).append(value)
        seen[name] = by_source
        dist.barrier(group=group)
    if rank == 0:
        assert seen["fairway"] == {r: [r * 10, r * 10 + 1] for r in range(1, world)}, seen["fairway"]
        assert seen["fairway"] == seen["gloo"]
    try:
        dist.send(torch.ones(1), right, tag=-1)
        raise AssertionError("a negative tag was accepted")
    except ValueError as error:
        assert "tag -1" in str(error), error
    return True


def list_forms_of_views(rank, world):
    """gather and all_gather into, and scatter and reduce_scatter from,
    lists of non-contiguous views (the columns of one tensor), all_to_all
    of lists, all_gather in place (the input is the rank's own output) and
    of blocks larger than a round of the node's segment: gather, all_gather
    and all_to_all as on gloo; scatter and reduce_scatter against the
    values expected (gloo's scatter reads such views as if they were
    contiguous)."""
    gloo = dist.new_group(backend="gloo")
    results = {}
    for name, group in (("fairway", None), ("gloo", gloo)):
        mine = torch.arange(4, dtype=torch.float32) + 10 * rank
        columns = torch.full((4, world), -1.0)
        dist.gather(mine, [columns[:, r] for r in range(world)] if rank == 1 else None, dst=1, group=group)
        source = torch.arange(4 * world, dtype=torch.float32).reshape(4, world) * (rank + 1)
        part = torch.empty(4)
        dist.scatter(part, [source[:, r] for r in range(world)] if rank == 0 else None, src=0, group=group)
        sent = [torch.full((3,), float(rank * world + r)) for r in range(world)]
        got = [torch.empty(3) for _ in range(world)]
        dist.all_to_all(got, sent, group=group)
        gathered = torch.full((5, world), -1.0)
        dist.all_gather([gathered[:, r] for r in range(world)], torch.arange(5.0) * (rank + 1), group=group)
        in_place = [torch.full((6,), -1.0) for _ in range(world)]
        in_place[rank].copy_(torch.arange(6.0) + rank)
        dist.all_gather(in_place, in_place[rank], group=group)
        large = [torch.empty(70001) for _ in range(world)]
        dist.all_gather(large, torch.arange(70001, dtype=torch.float32) + 7 * rank, group=group)
        results[name] = (columns, part, torch.stack(got), gathered, torch.stack(in_place), torch.stack(large))
        if name == "fairway":
            # Rank r's part of the sum over ranks of source columns q * (rank + 1) + j.
            source = torch.arange(3 * world, dtype=torch.float32).reshape(3, world) * (rank + 1)
            summed = torch.full((3,), -1.0)
            dist.reduce_scatter(summed, [source[:, q] for q in range(world)])
            total = sum(r + 1 for r in range(world))
            assert torch.equal(summed, torch.arange(3 * world, dtype=torch.float32).reshape(3, world)[:, rank] * total)
            blocks = [torch.full((70001,), float(rank + q)) for q in range(world)]
            out = torch.empty(70001)
            dist.reduce_scatter(out, blocks)
            assert torch.equal(out, torch.full((70001,), float(sum(r + rank for r in range(world))))), out
            assert all(torch.equal(b, torch.full((70001,), float(rank + q))) for q, b in enumerate(blocks))
    if rank == 1:
        assert torch.equal(results["fairway"][0], torch.arange(4.0)[:, None] + 10 * torch.arange(world)[None, :])
    assert torch.equal(results["fairway"][1], torch.arange(4 * world, dtype=torch.float32).reshape(4, world)[:, rank])
    assert torch.equal(results["fairway"][0], results["gloo"][0])
    for k in (2, 3, 4, 5):
        assert torch.equal(results["fairway"][k], results["gloo"][k]), k
    assert torch.equal(results["fairway"][3], torch.arange(5.0)[:, None] * (torch.arange(world) + 1)[None, :])
    return True


def object_collectives_on_subgroups(rank, world):
    """all_gather_object, gather_object, broadcast_object_list and
    scatter_object_list on a subgroup of ranks 1.. (rank 0 not a member)."""
    members = list(range(1, world))
    group = dist.new_group(members)
    if rank not in members:
        return True
    mine = {"rank": rank, "payload": list(range(rank))}
    everyone = [None] * len(members)
    dist.all_gather_object(everyone, mine, group=group)
    assert everyone == [{"rank": r, "payload": list(range(r))} for r in members], everyone
    gathered = [None] * len(members) if rank == members[0] else None
    dist.gather_object(mine, gathered, dst=members[0], group=group)
    if rank == members[0]:
        assert gathered == everyone, gathered
    objects = [("from", members[-1]), {"x": 3}] if rank == members[-1] else [None, None]
    dist.broadcast_object_list(objects, src=members[-1], group=group)
    assert objects == [("from", members[-1]), {"x": 3}], objects
    out = [None]
    scattered = [f"to {r}" for r in members] if rank == members[0] else None
    dist.scatter_object_list(out, scattered, src=members[0], group=group)
    assert out == [f"to {rank}"], out
    return True


def profiler_events(rank, world):
    """torch's profiler shows each call as '<backend>:<operation>' with its
    input's shape, as it does for gloo's calls."""
    names = set()
    with torch.autograd.profiler.profile(record_shapes=True) as profile:
        x = on_device(torch.ones(7, 3))
        dist.all_reduce(x)
        dist.all_reduce(x, async_op=True).wait()
        dist.broadcast(x, src=0)
        out = on_device(torch.empty(7 * world, 3))
        dist.all_gather_into_tensor(out, x)
    shapes = {}
    for event in profile.function_events:
        names.add(event.name)
        if event.name == "fairway:all_reduce":
            shapes[event.name] = event.input_shapes
    want = {"fairway:all_reduce", "fairway:broadcast", "fairway:all_gather_into_tensor"}
    assert want <= names, sorted(n for n in names if ":" in n)
    assert shapes["fairway:all_reduce"] == [[7, 3]], shapes
    return True


def group_names(rank, world):
    """A group made with "fairway" is named so (as a gloo group is "gloo"),
    where DDP's logging data and torch's messages read it; a mixed group
    keeps each device's backend; DETAIL debugging still wraps fairway's
    backend with torch's collective checks."""
    world_group = dist.group.WORLD
    assert world_group.name() == "fairway", world_group.name()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
    model(torch.ones(2, 4)).sum().backward()
    assert model._get_ddp_logging_data().get("backend_name") == "fairway"
    gloo_model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4), process_group=dist.new_group(backend="gloo"))
    assert gloo_model._get_ddp_logging_data().get("backend_name") == "gloo"

    subgroup = dist.new_group(list(range(world)))
    assert subgroup.name() == "fairway"

    mixed = dist.new_group(backend="cpu:gloo,cuda:fairway")
    kinds = {device.type: type(mixed._get_backend(device)).__name__ for device in mixed._device_types}
    assert kinds == {"cpu": "ProcessGroupGloo", "cuda": "FairwayBackend"}, kinds
    x = torch.ones(3)
    dist.all_reduce(x, group=mixed)
    assert x.tolist() == [world] * 3

    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        checked = dist.new_group(list(range(world)))
    finally:
        dist.set_debug_level(dist.DebugLevel.OFF)
    assert checked.name() == "fairway"
    assert type(checked._get_backend(torch.device("cpu"))).__name__ == "_ProcessGroupWrapper"
    x = torch.ones(3)
    dist.all_reduce(x, group=checked)
    assert x.tolist() == [world] * 3
    return True
