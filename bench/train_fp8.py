"""FP8 training end to end: a small model of MLP and MoE blocks trained with dgemm's FP8 layers
(dgemm.training) against the same model in BF16, on the same data, from the same init.

    python -m bench.train_fp8 [--steps 100] [--tokens 4096]           # one GPU: FP8 vs BF16
    torchrun --nproc-per-node 2 -m bench.train_fp8 --ddp --steps 100    # two GPUs, DDP, FP8

Single GPU: prints both loss curves, the largest relative gap |fp8 - bf16| / bf16 over the
last 20 steps, and the median step time of each. With --ddp (DGEMM_REMOTE_CACHE pointing at
one redis-server): rank 0 runs its first step (compiling every kernel) while rank 1 waits at a
barrier, then rank 1 starts and should find every kernel in Redis; each rank prints its
dgemm.jit.stats() and losses. Written in training t0 without a GPU (bench/NOTES.md).
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.nn.functional as F

from dgemm import training


class MLP(torch.nn.Module):
    def __init__(self, dim: int, hidden: int, fp8: bool):
        super().__init__()
        make = (lambda i, o: training.FP8Linear(i, o, device="cuda")) if fp8 else (
            lambda i, o: torch.nn.Linear(i, o, bias=False, device="cuda", dtype=torch.bfloat16))
        self.up, self.down = make(dim, hidden), make(hidden, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


class MoE(torch.nn.Module):
    """Top-1 routing (the router in bf16), experts on the contiguous layout."""

    def __init__(self, dim: int, hidden: int, experts: int, fp8: bool):
        super().__init__()
        self.fp8, self.experts = fp8, experts
        self.router = torch.nn.Linear(dim, experts, bias=False, device="cuda",
                                      dtype=torch.bfloat16)
        self.up = training.FP8Experts(experts, dim, hidden, device="cuda")
        self.down = training.FP8Experts(experts, hidden, dim, device="cuda")

    def forward(self, x):
        logits = self.router(x)
        gate, expert = logits.softmax(-1).max(-1)
        order = expert.argsort()
        counts = torch.bincount(expert, minlength=self.experts).tolist()   # host: layout
        m_indices, group_rows = training.contiguous_layout(counts, device="cuda")
        rows = torch.cat([torch.arange(sum(group_rows[:g]), sum(group_rows[:g]) + c,
                                       device="cuda") for g, c in enumerate(counts)])
        packed = x.new_zeros((sum(group_rows), x.shape[1]))
        packed[rows] = x[order]
        if self.fp8:
            h = self.down(F.gelu(self.up(packed, m_indices, group_rows)), m_indices, group_rows)
        else:
            h = torch.zeros_like(packed)
            for g in range(self.experts):
                sel = m_indices == g
                h[sel] = F.gelu(packed[sel] @ self.up.weight[g].t()) @ self.down.weight[g].t()
        out = torch.empty_like(x)
        out[order] = h[rows]
        return x + out * gate.unsqueeze(1).to(x.dtype)


def build(fp8: bool, dim: int, hidden: int, experts: int, seed: int = 0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(MLP(dim, hidden, fp8), MoE(dim, hidden, experts, fp8),
                               MLP(dim, hidden, fp8), MoE(dim, hidden, experts, fp8))


def batches(steps: int, tokens: int, dim: int, seed: int = 1):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    teacher = torch.randn(dim, dim, device="cuda", generator=generator) / dim ** 0.5
    for _ in range(steps):
        x = torch.randn(tokens, dim, device="cuda", generator=generator)
        yield x.bfloat16(), torch.tanh(x @ teacher).bfloat16()


def train(model, steps: int, tokens: int, dim: int, lr: float = 1e-3):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses, times = [], []
    for x, y in batches(steps, tokens, dim):
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = F.mse_loss(model(x).float(), y.float())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return losses, times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--experts", type=int, default=4)
    parser.add_argument("--ddp", action="store_true")
    args = parser.parse_args(argv)
    shape = (args.dim, args.hidden, args.experts)
    if not args.ddp:
        fp8_losses, fp8_times = train(build(True, *shape), args.steps, args.tokens, args.dim)
        bf16_losses, bf16_times = train(build(False, *shape), args.steps, args.tokens, args.dim)
        gap = max(abs(f - b) / b for f, b in zip(fp8_losses[-20:], bf16_losses[-20:]))
        median = lambda v: sorted(v)[len(v) // 2]
        print(json.dumps({"fp8_loss": fp8_losses, "bf16_loss": bf16_losses,
                          "max_rel_gap_last_20": gap,
                          "fp8_step_ms": median(fp8_times[5:]) * 1e3,
                          "bf16_step_ms": median(bf16_times[5:]) * 1e3}))
        return 0
    import torch.distributed as dist
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    model = torch.nn.parallel.DistributedDataParallel(build(True, *shape))
    if rank == 0:
        # A forward and backward without the gradient all-reduce (rank 1 waits at the
        # barrier) and without a step: every kernel is compiled and published to Redis.
        x, y = next(batches(1, args.tokens, args.dim))
        with model.no_sync():
            F.mse_loss(model(x).float(), y.float()).backward()
        model.zero_grad(set_to_none=True)
    dist.barrier()
    losses, times = train(model, args.steps, args.tokens, args.dim)
    import dgemm.jit
    print(json.dumps({"rank": rank, "stats": dgemm.jit.stats(), "loss_first": losses[0],
                      "loss_last": losses[-1],
                      "step_ms": sorted(times[5:])[len(times[5:]) // 2] * 1e3}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
