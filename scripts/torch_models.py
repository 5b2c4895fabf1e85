"""The small models scripts/bench_torch.py and scripts/bench_torch_job.py
train and run: a transformer block for data-parallel steps, and a decoder
for tensor-parallel token generation."""
import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, dim=256, heads=4):
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def blocks(count=4, dim=256):
    """The data-parallel benchmarks' model: `count` blocks (3M parameters at 4 x 256)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(*[Block(dim) for _ in range(count)])


class Attention(torch.nn.Module):
    """Multi-head attention over a key/value cache, one token at a time.
    Under tensor parallelism q, k and v hold this rank's heads (their
    output features are split) and o sums the ranks' parts."""

    def __init__(self, dim, heads):
        super().__init__()
        self.head_dim = dim // heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x, cache):
        q, k, v = self.q(x), self.k(x), self.v(x)
        heads = q.shape[-1] // self.head_dim  # this rank's

        def split(t):
            return t.view(t.shape[0], t.shape[1], heads, self.head_dim).transpose(1, 2)

        k, v = split(k), split(v)
        if cache:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        cache[:] = [k, v]
        out = F.scaled_dot_product_attention(split(q), k, v)
        return self.o(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], heads * self.head_dim))


class DecoderLayer(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.attention = Attention(dim, heads)
        self.up = torch.nn.Linear(dim, 4 * dim, bias=False)
        self.down = torch.nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x, cache):
        x = x + self.attention(self.norm1(x), cache)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Decoder(torch.nn.Module):
    """A small decoder-only language model (6 layers of 512, 19M parameters)."""

    def __init__(self, vocab=2048, dim=512, heads=8, layers=6):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(vocab, dim)
        self.layers = torch.nn.ModuleList(DecoderLayer(dim, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, caches):
        x = self.embed(tokens)
        for layer, cache in zip(self.layers, caches):
            x = layer(x, cache)
        return self.head(self.norm(x))

    @torch.no_grad()
    def generate(self, prompt, new_tokens):
        """Greedy decoding, one token per step after the prompt; returns the new tokens."""
        caches = [[] for _ in self.layers]
        logits = self(prompt, caches)
        out = []
        for _ in range(new_tokens):
            token = logits[:, -1:].argmax(dim=-1)
            out.append(token)
            logits = self(token, caches)
        return torch.cat(out, dim=1)


def tensor_parallel_plan(model):
    """torch's tensor-parallel layers for `model` (parallelize_module):
    q, k, v and up split by output features, o and down by input features,
    each of those two summing over the ranks."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    plan = {}
    for i in range(len(model.layers)):
        for name in ("attention.q", "attention.k", "attention.v", "up"):
            plan[f"layers.{i}.{name}"] = ColwiseParallel()
        for name in ("attention.o", "down"):
            plan[f"layers.{i}.{name}"] = RowwiseParallel()
    return plan


class _SummedLinear(torch.nn.Module):
    """A Linear layer's slice of input features whose partial outputs are summed by `all_reduce`."""

    def __init__(self, weight, all_reduce):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.all_reduce = all_reduce

    def forward(self, x):
        out = F.linear(x, self.weight)
        self.all_reduce(out)
        return out


def shard_by_hand(model, rank, world, all_reduce):
    """The same split as tensor_parallel_plan, on plain tensors, with
    `all_reduce(tensor)` (in place) summing o's and down's parts: for
    allreduce functions that are not a torch.distributed backend."""
    def rows(linear):
        part = linear.weight.shape[0] // world
        linear.weight = torch.nn.Parameter(linear.weight[rank * part:(rank + 1) * part].clone(), requires_grad=False)

    def columns(linear):
        part = linear.weight.shape[1] // world
        return _SummedLinear(linear.weight[:, rank * part:(rank + 1) * part].clone(), all_reduce)

    for layer in model.layers:
        for linear in (layer.attention.q, layer.attention.k, layer.attention.v, layer.up):
            rows(linear)
        layer.attention.o = columns(layer.attention.o)
        layer.down = columns(layer.down)
    return model


def remove_deepspeed_buffers(port):
    """DeepSpeed's CPU inference_all_reduce leaves its shared-memory buffers
    (/dev/shm/deepspeed_allreduce_buffer_*_<port>_<rank>, 66 MiB per rank)
    behind when its processes exit; a benchmark that ran it removes those of
    its own port, or a sweep fills /dev/shm and with it the machine's memory."""
    import glob
    import os
    for path in glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_*_{port}_*"):
        try:
            os.remove(path)
        except OSError:
            pass
