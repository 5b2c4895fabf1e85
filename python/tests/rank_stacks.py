"""What the ranks run for the training stacks above the collectives:
a 2-D DeviceMesh with tensor parallel inside and FSDP2 across, FSDP2 with a
bf16 mixed-precision policy, and functional collectives eager and under
torch.compile; each against the same run on gloo."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import fairway.torch


class Block(nn.Module):
    """A pre-norm transformer block: self-attention, then an MLP."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.head_dim = dim // heads
        self.norm1 = nn.LayerNorm(dim)
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.norm1(x)
        # Under tensor parallel q, k and v hold this rank's heads only.
        q, k, v = (p(h).view(b, t, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(attended.transpose(1, 2).reshape(b, t, -1))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def _mesh(backend):
    from torch.distributed.device_mesh import init_device_mesh

    override = None if backend == "fairway" else {"dp": backend, "tp": backend}
    return init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"), backend_override=override)


def _train_tp_fsdp(mesh, steps):
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    model = Block()
    parallelize_module(model, mesh["tp"], {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                                           "out": RowwiseParallel(), "up": ColwiseParallel(),
                                           "down": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    # Tensor-parallel ranks see the same batch; data-parallel ranks differ.
    generator = torch.Generator().manual_seed(10 + mesh["dp"].get_local_rank())
    losses = []
    for _ in range(steps):
        x = torch.randn(2, 8, 32, generator=generator)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    params = {name: p.full_tensor().detach().clone() for name, p in model.named_parameters()}
    return losses, params


def tensor_parallel_inside_fsdp2_across(rank, world):
    """A 2 x 2 mesh (dp x tp) on fairway: 10 steps give gloo's losses and
    parameters."""
    assert world == 4
    mesh = _mesh("fairway")
    for dim in ("dp", "tp"):
        backend = mesh.get_group(dim)._get_backend(torch.device("cpu"))
        assert isinstance(backend, fairway.torch.FairwayBackend), (dim, type(backend))
    losses, params = _train_tp_fsdp(mesh, 10)
    want_losses, want_params = _train_tp_fsdp(_mesh("gloo"), 10)
    assert all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(losses, want_losses)), (losses, want_losses)
    diff = max((params[n] - want_params[n]).abs().max().item() for n in params)
    assert diff <= 1e-5, f"parameters differ from gloo's by {diff}"
    return losses


def _train_fsdp_bf16(group, steps, rank):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = DeviceMesh.from_group(group, "cpu")
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block())
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    for block in model:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    generator = torch.Generator().manual_seed(20 + rank)
    losses = []
    for _ in range(steps):
        loss = model(torch.randn(2, 8, 32, generator=generator)).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, {n: p.full_tensor().detach().clone() for n, p in model.named_parameters()}


def fsdp2_bf16_mixed_precision(rank, world):
    """FSDP2 with bf16 parameters and bf16 gradient reduction: fairway's
    bf16 reduce-scatter gives gloo's training to bf16 precision."""
    losses, params = _train_fsdp_bf16(dist.group.WORLD, 5, rank)
    want_losses, want_params = _train_fsdp_bf16(dist.new_group(backend="gloo"), 5, rank)
    assert all(abs(a - b) <= 2e-2 * max(1.0, abs(b)) for a, b in zip(losses, want_losses)), (losses, want_losses)
    diff = max((params[n] - want_params[n]).abs().max().item() for n in params)
    assert diff <= 2e-2, f"parameters differ from gloo's by {diff}"
    assert all(p.dtype == torch.float32 for p in params.values())
    return losses


def _functional(x, group):
    import torch.distributed._functional_collectives as funcol

    world = dist.get_world_size(group)
    summed = funcol.all_reduce(x * 2, "sum", group)
    gathered = funcol.all_gather_tensor(summed + 1, 0, group)
    scattered = funcol.reduce_scatter_tensor(gathered, "sum", 0, group)
    exchanged = funcol.all_to_all_single(scattered.reshape(world, -1).contiguous().reshape(-1), None, None, group)
    return summed, gathered, scattered, exchanged


def functional_collectives(rank, world):
    """all_reduce, all_gather_tensor, reduce_scatter_tensor and
    all_to_all_single from torch.distributed._functional_collectives,
    eager and compiled with torch.compile, equal to gloo's."""
    gloo = dist.new_group(backend="gloo")
    fairway_group = dist.group.WORLD
    x = torch.arange(world * 6, dtype=torch.float32).reshape(world * 2, 3) + rank
    want = _functional(x, gloo)
    eager = _functional(x, fairway_group)
    compiled = torch.compile(_functional, fullgraph=True)(x, fairway_group)
    for name, got in (("eager", eager), ("compiled", compiled)):
        for i, (a, b) in enumerate(zip(got, want)):
            assert torch.equal(a, b), (name, i, a, b)
    return True
