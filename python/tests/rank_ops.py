"""What the ranks run: every operation x dtype x op on the fairway group,
compared with the gloo backend on the same inputs (or, where gloo has no
form of it, with the result computed from every rank's inputs)."""
import torch
import torch.distributed as dist

from harness import empty, on_device

Op = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
ALL_TYPES = FLOATS + INTS + [torch.bool]


def inputs(rank, dtype, n, salt=0):
    """Small values every rank can recompute for any rank: sums and
    products stay exact in every type."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * n + salt)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    values = torch.randint(0, 4, (n,), generator=g)
    if dtype.is_floating_point:
        return (values.double() * 0.5 + 0.5).to(dtype)
    return values.to(dtype)


def ops_for(dtype):
    if dtype == torch.bool:
        return [Op.SUM, Op.PRODUCT, Op.MIN, Op.MAX, Op.BAND, Op.BOR]
    ops = [Op.SUM, Op.AVG, Op.PRODUCT, Op.MIN, Op.MAX]
    if not dtype.is_floating_point:
        ops += [Op.BAND, Op.BOR, Op.BXOR]
    return ops


def local_reduce(tensors, op):
    """The reference from every rank's input (for what gloo lacks)."""
    stack = torch.stack([t.to(torch.int64) if not t.dtype.is_floating_point else t.double() for t in tensors])
    if op in (Op.SUM,):
        out = stack.sum(0)
    elif op == Op.AVG:
        out = stack.sum(0) / len(tensors) if stack.dtype == torch.float64 else torch.div(
            stack.sum(0), len(tensors), rounding_mode="trunc")
    elif op == Op.PRODUCT:
        out = stack.prod(0)
    elif op == Op.MIN:
        out = stack.min(0).values
    elif op == Op.MAX:
        out = stack.max(0).values
    else:
        out = stack[0].clone()
        for t in stack[1:]:
            out = {Op.BAND: out & t, Op.BOR: out | t, Op.BXOR: out ^ t}[op]
    if tensors[0].dtype == torch.bool:
        return out.bool()
    return out.to(tensors[0].dtype)


def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype in (torch.float16, torch.bfloat16):
        return torch.allclose(a.float(), b.float(), rtol=1e-2, atol=1e-2)
    if a.dtype.is_floating_point:
        return torch.allclose(a, b, rtol=1e-6, atol=1e-6)
    return torch.equal(a, b)


class Checker:
    def __init__(self, rank, world):
        self.rank, self.world = rank, world
        self.gloo = dist.new_group(backend="gloo")
        self.failures = []
        self.checked = 0

    def expect(self, what, got, want):
        self.checked += 1
        got = got.cpu()  # a GPU run's result against the CPU reference
        if not same(got, want):
            self.failures.append(f"rank {self.rank}: {what}: got {got.tolist()[:8]}, want {want.tolist()[:8]}")

    def reference_allreduce(self, x, op, salt=0):
        """gloo's answer, or the local one where gloo has none (AVG; bool)."""
        if op == Op.AVG or x.dtype == torch.bool:
            return local_reduce([inputs(r, x.dtype, x.numel(), salt) for r in range(self.world)], op)
        ref = x.clone()
        dist.all_reduce(ref, op=op, group=self.gloo)
        return ref


def sweep(rank, world):
    c = Checker(rank, world)
    n = 7
    for dtype in ALL_TYPES:
        tag = str(dtype).replace("torch.", "")
        for op in ops_for(dtype):
            x = inputs(rank, dtype, n)
            got = on_device(x)
            dist.all_reduce(got, op=op)
            c.expect(f"all_reduce {tag} {op}", got, c.reference_allreduce(x, op))

            got = on_device(x)
            dist.reduce(got, dst=world - 1, op=op)
            want = c.reference_allreduce(x, op)  # on every rank: gloo's is collective too
            if rank == world - 1:
                c.expect(f"reduce {tag} {op}", got, want)

            if dtype != torch.bool:
                full = inputs(rank, dtype, n * world, salt=1)
                out = empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out, on_device(full), op=op)
                whole = c.reference_allreduce(full, op, salt=1)
                c.expect(f"reduce_scatter_tensor {tag} {op}", out, whole[rank * n:(rank + 1) * n])

                out_list = empty(n, dtype=dtype)
                dist.reduce_scatter(out_list, list(on_device(full).chunk(world)), op=op)
                c.expect(f"reduce_scatter {tag} {op}", out_list, whole[rank * n:(rank + 1) * n])

        # Data movement: every type, bool included.
        x = inputs(rank, dtype, n, salt=2)
        got = on_device(x)
        dist.broadcast(got, src=1 % world)
        want = x.clone()
        dist.broadcast(want, src=1 % world, group=c.gloo)
        c.expect(f"broadcast {tag}", got, want)

        gathered = empty(n * world, dtype=dtype)
        dist.all_gather_into_tensor(gathered, on_device(x))
        want_list = [torch.empty(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(want_list, x, group=c.gloo)
        c.expect(f"all_gather_into_tensor {tag}", gathered, torch.cat(want_list))
        got_list = [empty(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(got_list, on_device(x))
        c.expect(f"all_gather {tag}", torch.cat([g.cpu() for g in got_list]), torch.cat(want_list))

        blocks = [on_device(inputs(rank, dtype, n, salt=10 + j)) for j in range(world)]
        got_list = [empty(n, dtype=dtype) for _ in range(world)]
        dist.all_to_all(got_list, blocks)
        want = [inputs(j, dtype, n, salt=10 + rank) for j in range(world)]
        c.expect(f"all_to_all {tag}", torch.cat([g.cpu() for g in got_list]), torch.cat(want))

        root = world - 1
        got_list = [empty(n, dtype=dtype) for _ in range(world)] if rank == root else None
        dist.gather(on_device(x), got_list, dst=root)
        if rank == root:
            c.expect(f"gather {tag}", torch.cat([g.cpu() for g in got_list]), torch.cat(want_list))
        out = empty(n, dtype=dtype)
        dist.scatter(out, [on_device(inputs(j, dtype, n, salt=3)) for j in range(world)] if rank == 0 else None,
                     src=0)
        c.expect(f"scatter {tag}", out, inputs(rank, dtype, n, salt=3))

    # all_to_all_single with uneven split sizes: rank r sends j+1 rows of 3 to rank j.
    rows_out = [j + 1 for j in range(world)]
    rows_in = [rank + 1] * world
    send = torch.arange(sum(rows_out) * 3, dtype=torch.float32).reshape(-1, 3) + 100 * rank
    recv = empty(sum(rows_in), 3)
    dist.all_to_all_single(recv, on_device(send), output_split_sizes=rows_in, input_split_sizes=rows_out)
    want = torch.empty(sum(rows_in), 3)
    dist.all_to_all_single(want, send, output_split_sizes=rows_in, input_split_sizes=rows_out, group=c.gloo)
    c.expect("all_to_all_single uneven", recv, want)

    # Coalesced forms (what FSDP and DDP's bucketing call).
    pg = dist.distributed_c10d._get_default_group()
    xs = [inputs(rank, torch.float32, k + 2, salt=20 + k) for k in range(3)]
    outs = [empty(x.numel() * world) for x in xs]
    pg.allgather_into_tensor_coalesced(outs, [on_device(x) for x in xs]).wait()
    for k, x in enumerate(xs):
        want = torch.cat([inputs(r, torch.float32, k + 2, salt=20 + k) for r in range(world)])
        c.expect(f"allgather_into_tensor_coalesced #{k}", outs[k], want)
    fulls = [on_device(inputs(rank, torch.float32, (k + 1) * world, salt=30 + k)) for k in range(3)]
    parts = [empty(k + 1) for k in range(3)]
    pg.reduce_scatter_tensor_coalesced(parts, fulls).wait()
    for k in range(3):
        whole = local_reduce([inputs(r, torch.float32, (k + 1) * world, salt=30 + k) for r in range(world)], Op.SUM)
        c.expect(f"reduce_scatter_tensor_coalesced #{k}", parts[k], whole[rank * (k + 1):(rank + 1) * (k + 1)])
    ys = [on_device(x) for x in xs]
    dist.all_reduce_coalesced(ys)
    for k, y in enumerate(ys):
        c.expect(f"all_reduce_coalesced #{k}", y,
                 local_reduce([inputs(r, torch.float32, k + 2, salt=20 + k) for r in range(world)], Op.SUM))

    # send/recv around the ring (a rank has no peer of its own to message
    # alone), and a barrier.
    if world > 1:
        right, left = (rank + 1) % world, (rank - 1) % world
        token = on_device(torch.full((4,), float(rank)))
        got = empty(4)
        if rank % 2 == 0:
            dist.send(token, right)
            dist.recv(got, left)
        else:
            dist.recv(got, left)
            dist.send(token, right)
        c.expect("send/recv", got, torch.full((4,), float(left)))
    dist.barrier()
    return c.checked, c.failures
