"""DDP communication hooks with PyTorch's semantics, for Fairway groups:

    ddp_model.register_comm_hook(group, fairway.torch.hooks.fp16_compress_hook)

Each averages the bucket's gradients over the group: allreduce_hook in the
gradients' own type, the compress hooks in float16 or bfloat16 on the wire,
written back in the bucket's type.
"""
import torch
import torch.distributed as dist


def _group(process_group):
    return process_group if process_group is not None else dist.group.WORLD


def allreduce_hook(process_group, bucket):
    """The average of the bucket over the group (divided before the sum, as DDP does)."""
    group = _group(process_group)
    tensor = bucket.buffer().div_(dist.get_world_size(group))
    work = dist.all_reduce(tensor, group=group, async_op=True)
    return work.get_future().then(lambda future: future.value()[0])


def _compress_hook(dtype, process_group, bucket):
    group = _group(process_group)
    buffer = bucket.buffer()
    compressed = buffer.to(dtype).div_(dist.get_world_size(group))
    work = dist.all_reduce(compressed, group=group, async_op=True)

    def decompress(future):
        # Into the bucket's own memory, so DDP finds the result where it expects it.
        buffer.copy_(future.value()[0])
        return buffer

    return work.get_future().then(decompress)


def fp16_compress_hook(process_group, bucket):
    """allreduce_hook with the bucket cast to float16 on the wire."""
    return _compress_hook(torch.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """allreduce_hook with the bucket cast to bfloat16 on the wire."""
    return _compress_hook(torch.bfloat16, process_group, bucket)


__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"]
