"""What the ranks run for the feature tests: async work and futures,
subgroups, DDP with each hook, FSDP2, a killed peer, bad input."""
import os
import time

import torch
import torch.distributed as dist

from harness import DEVICE, empty, on_device


def async_and_futures(rank, world):
    x = on_device(torch.full((1 << 16,), float(rank + 1)))
    work = dist.all_reduce(x, async_op=True)
    chained = work.get_future().then(lambda f: f.value()[0] * 2)
    assert work.wait() is True
    assert work.is_completed()
    want = float(sum(range(1, world + 1)))
    assert torch.all(x == want), x[:4]
    assert torch.all(chained.wait() == 2 * want)
    # Many in flight complete in call order.
    tensors = [on_device(torch.full((1000,), float(rank * 10 + i))) for i in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for w in works:
        w.wait()
    for i, t in enumerate(tensors):
        assert torch.all(t == sum(r * 10 + i for r in range(world))), (i, t[:2])
    return True


def subgroups(rank, world):
    # new_group of the even ranks (non-members take part in creating it too).
    evens = list(range(0, world, 2))
    group = dist.new_group(evens)
    if rank in evens:
        x = torch.full((5,), float(rank))
        dist.all_reduce(x, group=group)
        assert torch.all(x == float(sum(evens))), x
        assert dist.get_world_size(group) == len(evens)
    # split_group: the two halves, each in the order given.
    halves = [list(range(0, world // 2)), list(range(world // 2, world))]
    split = dist.split_group(split_ranks=halves)
    mine = halves[0] if rank in halves[0] else halves[1]
    y = torch.full((3,), float(rank + 1))
    dist.all_reduce(y, group=split)
    assert torch.all(y == float(sum(r + 1 for r in mine))), y
    out = torch.empty(3 * len(mine))
    dist.all_gather_into_tensor(out, torch.full((3,), float(rank)), group=split)
    assert out.tolist() == [float(r) for r in mine for _ in range(3)], out
    dist.barrier()
    return True


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))

    def forward(self, x):
        return self.net(x)


def train(group, hook, steps, rank, state=None, device="cpu"):
    """A small MLP under DDP on `group` with `hook` (state: the group unless
    given), on `device`; the final parameters on the CPU."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(Mlp().to(device), process_group=group, bucket_cap_mb=0.01)  # several buckets
    if hook is not None:
        model.register_comm_hook(group if state is None else state, hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=data).to(device)
        y = torch.randn(16, 8, generator=data).to(device)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return [p.detach().cpu().clone() for p in model.parameters()]


def ddp_hooks_match_gloo(rank, world):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    import fairway.torch.hooks as hooks

    gloo = dist.new_group(backend="gloo")
    fairway_group = dist.group.WORLD
    pairs = {
        "none": (None, None),
        "allreduce_hook": (hooks.allreduce_hook, default_hooks.allreduce_hook),
        "fp16_compress_hook": (hooks.fp16_compress_hook, default_hooks.fp16_compress_hook),
        "bf16_compress_hook": (hooks.bf16_compress_hook, default_hooks.bf16_compress_hook),
    }
    worst = {}
    for name, (ours, torchs) in pairs.items():
        got = train(fairway_group, ours, 20, rank, device=DEVICE)
        want = train(gloo, torchs, 20, rank)
        diff = max((a - b).abs().max().item() for a, b in zip(got, want))
        worst[name] = diff
        # A GPU's float32 arithmetic rounds differently from the CPU's gloo run.
        exact = 1e-5 if DEVICE == "cpu" else 1e-4
        tolerance = exact if name in ("none", "allreduce_hook") else 1e-3
        assert diff <= tolerance, f"{name}: parameters differ from gloo's by {diff}"
    return worst


def fsdp2_matches_gloo(rank, world):
    from torch.distributed.fsdp import fully_shard

    def run(group):
        from torch.distributed.device_mesh import DeviceMesh

        torch.manual_seed(0)
        model = Mlp()
        mesh = DeviceMesh.from_group(group, "cpu")
        for layer in model.net:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        data = torch.Generator().manual_seed(100 + rank)
        for _ in range(5):
            x = torch.randn(16, 32, generator=data)
            y = torch.randn(16, 8, generator=data)
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        return [p.full_tensor().detach().clone() for p in model.parameters()]

    gloo = dist.new_group(backend="gloo")
    got = run(dist.group.WORLD)
    want = run(gloo)
    diff = max((a - b).abs().max().item() for a, b in zip(got, want))
    assert diff <= 1e-5, f"FSDP2 parameters differ from gloo's by {diff}"
    return diff


def killed_peer(rank, world):
    x = torch.ones(1 << 10)
    dist.all_reduce(x)
    if rank == world - 1:
        os._exit(3)  # dies without a word mid-training
    start = time.monotonic()
    try:
        for _ in range(100):
            dist.all_reduce(x)
    except RuntimeError as error:
        return time.monotonic() - start, str(error)
    return time.monotonic() - start, "no error"


def bad_input(rank, world):
    errors = {}

    def expect(name, kinds, fn):
        try:
            fn()
        except kinds as error:
            errors[name] = f"{type(error).__name__}: {error}"
            return
        raise AssertionError(f"{name}: no error")

    expect("non-contiguous", (ValueError,), lambda: dist.all_reduce(torch.ones(4, 4).t()))
    expect("int16 dtype", (ValueError,), lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)))
    expect("uint16 dtype", (ValueError,), lambda: dist.all_reduce(torch.ones(4, dtype=torch.uint16)))
    expect("output size", (ValueError,),
           lambda: dist.all_gather_into_tensor(torch.empty(3), torch.ones(2)))
    expect("mixed dtypes", (ValueError,),
           lambda: dist.all_gather_into_tensor(torch.empty(2 * world, dtype=torch.float64), torch.ones(2)))
    expect("bitwise on float", (RuntimeError,), lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND))
    expect("avg of bool", (ValueError,),
           lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG))
    expect("split sizes", (ValueError,),
           lambda: dist.all_to_all_single(torch.empty(4), torch.ones(4), [1] * world, [5] * world))
    # The group still works after refusing all of that.
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.all(x == world)
    return errors


def interleaved_with_gloo(rank, world):
    """Fairway and gloo collectives in turn, as a job with both groups runs
    them: a rank that has finished its Fairway call and waits in gloo must
    still let its Fairway peers' sends complete."""
    gloo = dist.new_group(backend="gloo")
    for size in (1 << 14, 1 << 16, 1 << 18, 1 << 20):
        x = torch.ones(size)
        for _ in range(10):
            dist.all_reduce(x)
            flag = torch.ones(1)
            dist.all_reduce(flag, group=gloo)
        assert torch.all(x == float(world) ** 10)
    return True


def fp8_dtypes(rank, world):
    """float8_e4m3fn and float8_e5m2 through allreduce (sum of values whose
    sums both formats hold exactly, and max), all_gather and broadcast."""
    checked = 0
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        def values(r):
            g = torch.Generator().manual_seed(31 * r + 7)
            return (torch.randint(0, 3, (1000,), generator=g).float() * 0.5)

        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
            tensor = on_device(values(rank).to(dtype))
            dist.all_reduce(tensor, op=op)
            stack = torch.stack([values(r) for r in range(world)])
            want = (stack.sum(0) if op == dist.ReduceOp.SUM else stack.max(0).values).to(dtype)
            assert torch.equal(tensor.cpu().float(), want.float()), f"{dtype} {op}"
            checked += 1
        gathered = empty(1000 * world, dtype=dtype)
        dist.all_gather_into_tensor(gathered, on_device(values(rank).to(dtype)))
        want = torch.cat([values(r) for r in range(world)]).to(dtype).float()
        assert torch.equal(gathered.cpu().float(), want), dtype
        tensor = on_device(values(rank).to(dtype))
        dist.broadcast(tensor, src=world - 1)
        assert torch.equal(tensor.cpu().float(), values(world - 1).to(dtype).float()), dtype
        checked += 2
    return checked


def all_gather_coalesced_matches_gloo(rank, world):
    """torch's all_gather_coalesced (one output list per rank), blocking and
    asynchronous, against gloo's result for the same inputs."""
    import warnings

    gloo = dist.new_group(backend="gloo")
    shapes = [(2, 3), (1,), (5,)]
    inputs = [torch.full(shape, float(10 * rank + i)) for i, shape in enumerate(shapes)]

    def outputs(device):
        return [[torch.full(shape, -1.0, device=device) for shape in shapes] for _ in range(world)]

    want = outputs("cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch marks the call for deprecation
        dist.all_gather_coalesced(want, inputs, group=gloo)
        for async_op in (False, True):
            got = outputs(DEVICE)
            future = dist.all_gather_coalesced(got, [on_device(t) for t in inputs], async_op=async_op)
            if async_op:
                future.wait()
            for r in range(world):
                for i in range(len(shapes)):
                    assert torch.equal(got[r][i].cpu(), want[r][i]), (async_op, r, i, got[r][i], want[r][i])
    return True


def async_ops_return_before_data_moves(rank, world):
    """Every operation with async_op=True returns while a peer has not yet
    called it (the last rank starts 2 s late), and its result is right once
    waited for, with all of them outstanding at once. Returns {operation:
    seconds the call took} on rank 0."""
    late = world - 1
    n = 1 << 12
    x = torch.full((n,), float(rank + 1))
    total = float(sum(range(1, world + 1)))
    blocks = [torch.full((n,), float(rank * world + j)) for j in range(world)]

    def gathered_list():
        return [torch.empty(n) for _ in range(world)]

    ops = {
        "all_reduce": lambda: (x.clone(), lambda t: dist.all_reduce(t, async_op=True), lambda t: torch.all(t == total)),
        "broadcast": lambda: (x.clone(), lambda t: dist.broadcast(t, src=late, async_op=True),
                              lambda t: torch.all(t == float(late + 1))),
        "reduce": lambda: (x.clone(), lambda t: dist.reduce(t, dst=0, async_op=True),
                           lambda t: rank != 0 or torch.all(t == total)),
        "all_gather": lambda: (gathered_list(), lambda out: dist.all_gather(out, x, async_op=True),
                               lambda out: all(torch.all(o == float(r + 1)) for r, o in enumerate(out))),
        "all_gather_into_tensor": lambda: (torch.empty(n * world),
                                           lambda out: dist.all_gather_into_tensor(out, x, async_op=True),
                                           lambda out: torch.equal(out, torch.cat([torch.full((n,), float(r + 1))
                                                                                   for r in range(world)]))),
        "reduce_scatter": lambda: (torch.empty(n), lambda out: dist.reduce_scatter(out, blocks, async_op=True),
                                   lambda out: torch.all(out == float(sum(r * world + rank for r in range(world))))),
        "reduce_scatter_tensor": lambda: (torch.empty(n),
                                          lambda out: dist.reduce_scatter_tensor(out, torch.cat(blocks), async_op=True),
                                          lambda out: torch.all(out == float(sum(r * world + rank
                                                                                 for r in range(world))))),
        "all_to_all": lambda: (gathered_list(), lambda out: dist.all_to_all(out, blocks, async_op=True),
                               lambda out: all(torch.all(o == float(r * world + rank)) for r, o in enumerate(out))),
        "all_to_all_single": lambda: (torch.empty(n * world),
                                      lambda out: dist.all_to_all_single(out, torch.cat(blocks), async_op=True),
                                      lambda out: all(torch.all(out[r * n:(r + 1) * n] == float(r * world + rank))
                                                      for r in range(world))),
        "gather": lambda: (gathered_list() if rank == 0 else None,
                           lambda out: dist.gather(x, out, dst=0, async_op=True),
                           lambda out: rank != 0 or all(torch.all(o == float(r + 1)) for r, o in enumerate(out))),
        # The late rank is the source: a source's sends may finish eagerly
        # without their receivers, so only a receiver must wait for a peer.
        "scatter": lambda: (torch.empty(n), lambda out: dist.scatter(out, [torch.full((n,), float(r)) for r in
                                                                            range(world)] if rank == late else None,
                                                                      src=late, async_op=True),
                            lambda out: torch.all(out == float(rank))),
        "barrier": lambda: (None, lambda _: dist.barrier(async_op=True), lambda _: True),
    }
    # Every rank posts them all in this order, the late rank 2 s after the
    # others: no operation can complete on rank 0 before then.
    made = {name: make() for name, make in ops.items()}
    dist.barrier()
    if rank == late:
        time.sleep(2.0)
    seconds, works, completed = {}, {}, {}
    for name, (target, call, _) in made.items():
        start = time.monotonic()
        works[name] = call(target)
        seconds[name] = time.monotonic() - start
        completed[name] = works[name].is_completed()
    for name, (target, _, check) in made.items():
        works[name].wait()
        assert check(target), f"{name}: wrong result after wait()"
        if rank == 0:
            assert not completed[name] and seconds[name] < 0.5, \
                f"{name}: the call took {seconds[name]:.2f} s and returned completed={completed[name]}"
    return seconds


def sequence_numbers(rank, world):
    """The group's sequence number counts its collectives alike on every
    rank; point-to-point messages do not count."""
    pg = dist.distributed_c10d._get_default_group()
    first = pg._get_sequence_number_for_group()
    x = torch.ones(4)
    dist.all_reduce(x)
    dist.all_gather_into_tensor(torch.empty(4 * world), x)
    dist.barrier()
    if world > 1:
        peer = rank ^ 1
        if peer < world:
            if rank % 2 == 0:
                dist.send(x, peer)
            else:
                dist.recv(x, peer)
    after = pg._get_sequence_number_for_group()
    everyone = [None] * world
    dist.all_gather_object(everyone, (first, after))
    return everyone


def barrier_timeout(rank, world):
    """The last rank comes to the barrier after the group's timeout: the
    others' barrier raises, in words torch recognises as a timeout."""
    if rank == world - 1:
        time.sleep(4)
        return "late"
    try:
        dist.barrier()
    except RuntimeError as error:
        return str(error)
    return "no error"


def collective_module_goes_straight_to_the_backend(rank, world):
    """fairway.torch.collective on CPU tensors of a fairway group calls the
    backend directly (torch.distributed's functions are not called) and
    gives gloo's results, blocking and async, on the world and on a
    subgroup; on a gloo group it goes through torch.distributed."""
    import fairway.torch.collective as collective
    gloo = dist.new_group(backend="gloo")
    evens = list(range(0, world, 2))
    sub = dist.new_group(evens)
    names = ("all_reduce", "broadcast", "all_gather_into_tensor", "reduce_scatter_tensor")
    saved = {name: getattr(dist, name) for name in names}

    def refuse(*args, **kwargs):
        raise AssertionError("fairway.torch.collective went through torch.distributed")

    def results(group, async_op):
        x = torch.arange(6 * world, dtype=torch.float32).reshape(2 * world, 3) + rank
        out = {}
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
            done = collective.all_reduce(x.clone(), op=op, group=group, async_op=async_op)
            if async_op:
                done[1].wait()
                done = done[0]
            out[f"all_reduce {op}"] = done
        for dim in (0, -1):
            done = collective.all_gather(x, dim=dim, group=group, async_op=async_op)
            out[f"all_gather {dim}"] = done[1].wait() and done[0] if async_op else done
        done = collective.reduce_scatter(x, dim=0, group=group, async_op=async_op)
        out["reduce_scatter"] = done[1].wait() and done[0] if async_op else done
        src = evens[-1] if group is sub else world - 1
        done = collective.broadcast(x.clone(), src, group=group, async_op=async_op)
        out["broadcast"] = done[1].wait() and done[0] if async_op else done
        return out

    for async_op in (False, True):
        for name in names:
            setattr(dist, name, refuse)
        try:
            mine = results(None, async_op)
            mine_sub = results(sub, async_op) if rank in evens else None
        finally:
            for name in names:
                setattr(dist, name, saved[name])
        want = results(gloo, async_op)
        for key, value in want.items():
            assert torch.equal(mine[key], value), (key, async_op, mine[key], value)
        if rank in evens:
            sub_gloo = dist.new_group(evens, backend="gloo")
            want_sub = results(sub_gloo, async_op)
            for key, value in want_sub.items():
                assert torch.equal(mine_sub[key], value), ("subgroup", key, async_op)
        else:
            dist.new_group(evens, backend="gloo")  # every rank takes part in making a group
    return True


def mappable_tensors(rank, world):
    """Collectives on fairway.torch.mappable_empty tensors, on every rank or
    only some, past the size where the ranks agree to write into each
    other's outputs; the peers' memory is mapped here where every rank's is."""
    import fairway.torch

    def peer_mappings():
        with open("/proc/self/maps") as maps:
            return sum("memfd:fairway-host-memory" in line for line in maps)

    z = fairway.torch.mappable_empty(3, 5, dtype=torch.bfloat16)
    assert z.shape == (3, 5) and z.dtype == torch.bfloat16 and not z.is_cuda and torch.all(z == 0)
    count = 300007
    for everyone in (True, False):
        mine = everyone or rank % 2 == 0
        make = (lambda: fairway.torch.mappable_empty(count)) if mine else (lambda: torch.empty(count))
        x = make()
        x.copy_(torch.arange(count, dtype=torch.float32) + rank)
        dist.all_reduce(x)
        want = torch.arange(count, dtype=torch.float32) * world + sum(range(world))
        assert torch.equal(x, want), (everyone, x[:4])
        out = fairway.torch.mappable_empty(count * world) if mine else torch.empty(count * world)
        dist.all_gather_into_tensor(out, torch.full((count,), float(rank)))
        assert torch.equal(out, torch.arange(world).repeat_interleave(count).float()), everyone
    return peer_mappings() > 0
