"""DDP communication hooks with PyTorch's semantics, for Fairway groups:

    ddp_model.register_comm_hook(group, fairway.torch.hooks.fp16_compress_hook)

Each averages the bucket's gradients over the group: allreduce_hook in the
gradients' own type, the compress hooks in float16 or bfloat16 on the wire,
written back in the bucket's type. int8_compress_hook sends int8 blocks
with error feedback and takes an ErrorFeedbackState as its state:

    ddp_model.register_comm_hook(ErrorFeedbackState(group), int8_compress_hook)
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


class ErrorFeedbackState:
    """int8_compress_hook's state: the group, the wire format, and one
    residual per DDP bucket (float32, what earlier rounds' quantization lost,
    sent with the next round's gradients)."""

    def __init__(self, process_group=None, compression="int8", block_size=256):
        self.process_group = process_group
        self.compression = compression
        self.block_size = block_size
        self.residuals = {}

    def residual_for(self, index, buffer):
        residual = self.residuals.get(index)
        if residual is None or residual.numel() != buffer.numel() or residual.device != buffer.device:
            # New, or DDP rebuilt its buckets: what was owed to the old layout is dropped.
            residual = torch.zeros(buffer.numel(), dtype=torch.float32, device=buffer.device)
            self.residuals[index] = residual
        return residual


def int8_compress_hook(state, bucket):
    """The bucket's average over the group, crossing the wire as int8 blocks
    (one quantization of each rank's gradients, one of the reduced shard)
    with error feedback: what quantization loses in one step is added to the
    next step's gradients, so nothing is lost for good. Every rank ends with
    the same averaged gradients."""
    from fairway.torch.compression import all_reduce_compressed

    buffer = bucket.buffer()
    residual = state.residual_for(bucket.index(), buffer)
    work = all_reduce_compressed(buffer, state.compression, dist.ReduceOp.AVG, _group(state.process_group),
                                 state.block_size, residual, async_op=True)
    return work.get_future().then(lambda future: buffer)


__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "ErrorFeedbackState",
           "int8_compress_hook"]
