"""A small DDP training job on the fairway backend (CPU tensors; CUDA
tensors take the same code with the model and data on the GPU).

    torchrun --nproc-per-node 4 docs/example/ddp_train.py

torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; the process
group's store carries Fairway's unique id, so nothing else is needed.
"""
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import fairway.torch  # registers the "fairway" backend
from fairway.torch import hooks


def main():
    dist.init_process_group("fairway", timeout=timedelta(minutes=5))  # the timeout bounds every Fairway wait
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4)))
    model.register_comm_hook(dist.group.WORLD, hooks.bf16_compress_hook)  # bf16 on the wire
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(rank)  # each rank its own shard
    for step in range(50):
        x, y = torch.randn(32, 64, generator=data), torch.randn(32, 4, generator=data)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if rank == 0 and step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f} on {world} ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
