"""FP8 training end to end: a small model of MLP and MoE blocks trained with dgemm's FP8 layers
(dgemm.training) against the same model in BF16, on the same data, from the same init.

    python -m bench.train_fp8 [--steps 120] [--tokens 4096] [--json out.json]   # FP8 vs BF16
    DGEMM_REMOTE_CACHE=redis://127.0.0.1:6379/0 torchrun --nproc-per-node 2 -m bench.train_fp8 \\
        --ddp --steps 100 --rank-cache-dir '/tmp/dgemm-rank{rank}'               # two GPUs, DDP

One process: trains the FP8 model, then the BF16 one, and prints one summary line: the
largest relative loss gap |fp8 - bf16| / bf16 over the last 20 steps, the relative gap of the
two runs' mean losses over those steps, the median step time of each (steps 5 on) and dgemm's
cache counters (`compiles` 0: every kernel came from the cache); --json writes both loss
curves and step times too.

--control also trains the BF16 model from weights perturbed by about one bf16 rounding (no FP8
anywhere) and reports the same two gaps against the BF16 run: the metrics' noise floor. The
model is chaotic (top-1 routing flips, Adam), so two runs that differ by rounding drift apart
and spike at different steps; a per-step max gap measures that as much as it measures FP8.

--ddp (under torchrun; DGEMM_REMOTE_CACHE pointing at one redis-server): rank 0 runs one forward
and backward first (loading or compiling every kernel the step needs and publishing it to
Redis) while the other ranks wait at a barrier; then all ranks train with DDP. Each rank prints
one JSON line: its rank, dgemm's cache counters (rank 1 should show remote hits and no
compiles), first and last loss and median step time. `--rank-cache-dir` gives each rank its
own local disk tier (a pattern with {rank}), as ranks on different nodes would have, so that
what rank 1 finds must come from Redis.

`--device cpu --reference-gemms` runs the same code on CPU with the layers' fp32 reference
GEMMs (dgemm.training.reference_gemms) and gloo for --ddp: a check of this script's wiring
without a GPU, not a measurement.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import time

import torch
import torch.nn.functional as F

from dgemm import training


class MLP(torch.nn.Module):
    def __init__(self, dim: int, hidden: int, fp8: bool, device: str):
        super().__init__()
        make = (lambda i, o: training.FP8Linear(i, o, device=device)) if fp8 else (
            lambda i, o: torch.nn.Linear(i, o, bias=False, device=device, dtype=torch.bfloat16))
        self.up, self.down = make(dim, hidden), make(hidden, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


class MoE(torch.nn.Module):
    """Top-1 routing (the router in bf16), experts on the contiguous layout."""

    def __init__(self, dim: int, hidden: int, experts: int, fp8: bool, device: str):
        super().__init__()
        self.fp8, self.experts = fp8, experts
        self.router = torch.nn.Linear(dim, experts, bias=False, device=device,
                                      dtype=torch.bfloat16)
        self.up = training.FP8Experts(experts, dim, hidden, device=device)
        self.down = training.FP8Experts(experts, hidden, dim, device=device)

    def forward(self, x):
        logits = self.router(x)
        gate, expert = logits.float().softmax(-1).max(-1)
        order = expert.argsort()
        counts = torch.bincount(expert, minlength=self.experts).tolist()   # host: layout
        m_indices, group_rows = training.contiguous_layout(counts, device=x.device)
        starts = [sum(group_rows[:g]) for g in range(self.experts)]
        rows = torch.cat([torch.arange(starts[g], starts[g] + c, device=x.device)
                          for g, c in enumerate(counts)])
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


def build(fp8: bool, dim: int, hidden: int, experts: int, device: str, seed: int = 0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(MLP(dim, hidden, fp8, device), MoE(dim, hidden, experts, fp8, device),
                               MLP(dim, hidden, fp8, device), MoE(dim, hidden, experts, fp8, device))


def batches(steps: int, tokens: int, dim: int, device: str, seed: int = 1):
    generator = torch.Generator(device=device).manual_seed(seed)
    teacher = torch.randn(dim, dim, device=device, generator=generator) / dim ** 0.5
    for _ in range(steps):
        x = torch.randn(tokens, dim, device=device, generator=generator)
        yield x.bfloat16(), torch.tanh(x @ teacher).bfloat16()


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def train(model, steps: int, tokens: int, dim: int, device: str, lr: float = 1e-3,
          seed: int = 1):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses, times = [], []
    for x, y in batches(steps, tokens, dim, device, seed):
        _sync(device)
        start = time.perf_counter()
        loss = F.mse_loss(model(x).float(), y.float())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        _sync(device)
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return losses, times


def median_ms(times: list, skip: int = 5) -> float:
    kept = sorted(times[skip:] or times)
    return kept[len(kept) // 2] * 1e3


def max_relative_gap(fp8: list, bf16: list, last: int = 20) -> float:
    return max(abs(f - b) / b for f, b in zip(fp8[-last:], bf16[-last:]))


def mean_relative_gap(fp8: list, bf16: list, last: int = 20) -> float:
    """|mean fp8 - mean bf16| / mean bf16 over the last steps: spikes at single steps (either
    run's) average out, a systematic gap does not."""
    return abs(sum(fp8[-last:]) - sum(bf16[-last:])) / sum(bf16[-last:])


def perturb(model, relative: float = 2 ** -8, seed: int = 2):
    """Each weight times (1 + relative * N(0, 1)), back in bf16: about one bf16 rounding."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            noise = torch.randn(p.shape, generator=generator).to(p.device)
            p.copy_((p.float() * (1 + relative * noise)).to(p.dtype))
    return model


def gaps(losses: list, bf16_losses: list, prefix: str = "") -> dict:
    return {f"{prefix}max_rel_gap_last_20": max_relative_gap(losses, bf16_losses),
            f"{prefix}rel_gap_mean_last_20": mean_relative_gap(losses, bf16_losses)}


def _cache_stats() -> dict:
    import dgemm.jit
    return dgemm.jit.stats()


def single(args, shape) -> int:
    fp8_losses, fp8_times = train(build(True, *shape, args.device), args.steps, args.tokens,
                                  args.dim, args.device)
    stats = _cache_stats()
    bf16_losses, bf16_times = train(build(False, *shape, args.device), args.steps, args.tokens,
                                    args.dim, args.device)
    curves = dict(fp8_loss=fp8_losses, bf16_loss=bf16_losses)
    summary = {"steps": args.steps, "tokens": args.tokens, "dim": args.dim,
               "hidden": args.hidden, "experts": args.experts,
               **gaps(fp8_losses, bf16_losses),
               "fp8_loss_last": fp8_losses[-1], "bf16_loss_last": bf16_losses[-1],
               "fp8_loss_first": fp8_losses[0], "bf16_loss_first": bf16_losses[0],
               "fp8_step_ms": median_ms(fp8_times), "bf16_step_ms": median_ms(bf16_times),
               "fp8_first_step_ms": fp8_times[0] * 1e3, "dgemm_cache": stats}
    if args.control:
        control, _ = train(perturb(build(False, *shape, args.device)), args.steps, args.tokens,
                           args.dim, args.device)
        summary.update(gaps(control, bf16_losses, "control_"))
        curves["control_loss"] = control
    print(json.dumps(summary), flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(summary, **curves, fp8_step_s=fp8_times,
                                             bf16_step_s=bf16_times), indent=1))
    return 0


def distributed(args, shape) -> int:
    import torch.distributed as dist
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if args.rank_cache_dir:
        os.environ["DGEMM_CACHE_DIR"] = args.rank_cache_dir.format(rank=rank)
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    model = build(True, *shape, args.device)
    model = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[local_rank] if args.device == "cuda" else None)
    if rank == 0:
        # One forward and backward without the gradient all-reduce (the others wait at the
        # barrier) and without a step: every kernel is loaded or compiled and published.
        x, y = next(batches(1, args.tokens, args.dim, args.device))
        with model.no_sync():
            F.mse_loss(model(x).float(), y.float()).backward()
        model.zero_grad(set_to_none=True)
    dist.barrier()
    losses, times = train(model, args.steps, args.tokens, args.dim, args.device,
                          seed=1 + rank)
    report = {"rank": rank, "world_size": dist.get_world_size(),
              "cache_dir": os.environ.get("DGEMM_CACHE_DIR"),
              "remote": bool(os.environ.get("DGEMM_REMOTE_CACHE")),
              "stats": _cache_stats(), "loss_first": losses[0], "loss_last": losses[-1],
              "step_ms": median_ms(times)}
    print(json.dumps(report), flush=True)
    if args.json:
        path = pathlib.Path(str(args.json).replace("{rank}", str(rank)))
        path.write_text(json.dumps(dict(report, loss=losses, step_s=times), indent=1))
    dist.destroy_process_group()
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--experts", type=int, default=4)
    parser.add_argument("--ddp", action="store_true", help="under torchrun: DDP, FP8 only")
    parser.add_argument("--rank-cache-dir", metavar="PATTERN",
                        help="with --ddp: DGEMM_CACHE_DIR of each rank, e.g. /tmp/c{rank}")
    parser.add_argument("--json", type=pathlib.Path,
                        help="write curves and step times here ({rank} is replaced with --ddp)")
    parser.add_argument("--control", action="store_true",
                        help="also train BF16 from weights perturbed by ~one bf16 rounding: "
                             "the loss-gap metrics' noise floor")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--reference-gemms", action="store_true",
                        help="the layers' fp32 reference GEMMs instead of dgemm's kernels "
                             "(the CPU wiring check)")
    return parser


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.steps < 20:
        parser.error("--steps must be at least 20 (the loss gap is taken over the last 20)")
    if args.device == "cpu" and not args.reference_gemms:
        parser.error("--device cpu needs --reference-gemms (dgemm's kernels need a GPU)")
    if args.rank_cache_dir and not args.ddp:
        parser.error("--rank-cache-dir goes with --ddp")
    if args.control and args.ddp:
        parser.error("--control goes without --ddp")
    shape = (args.dim, args.hidden, args.experts)
    gemms = (training.use_gemms(training.reference_gemms()) if args.reference_gemms
             else contextlib.nullcontext())
    with gemms:
        return distributed(args, shape) if args.ddp else single(args, shape)


if __name__ == "__main__":
    raise SystemExit(main())
