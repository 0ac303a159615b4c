"""FP8 training end to end: a small model of MLP and MoE blocks trained with dgemm's FP8 layers
(dgemm.training) against the same model in BF16, on the same data, from the same init.

    python -m bench.train_fp8 [--steps 120] [--tokens 4096] [--json out.json]   # FP8 vs BF16
    DGEMM_REMOTE_CACHE=redis://127.0.0.1:6379/0 torchrun --nproc-per-node 2 -m bench.train_fp8 \\
        --ddp --steps 100 --rank-cache-dir '/tmp/dgemm-rank{rank}'               # two GPUs, DDP

The task is token classification shaped like language modelling. Each step draws fresh inputs
x ~ N(0, I) [tokens, dim] (the embedded tokens) and, for each token, a label SAMPLED from a
fixed random teacher's categorical distribution over `--vocab` classes (`teacher`: a Zipfian
log-prior plus a low-rank random MLP of x, at a temperature that makes its mean per-token
entropy 3 nats). Both models are a trunk (MLP, MoE, MLP, MoE: the FP8 layers in the FP8
model) and an output head dim -> vocab, and the head is BF16 in BOTH models, as FP8 training
recipes keep it (DeepSeek-V3 keeps the embedding, output head, MoE gating and normalisation
in higher precision). Loss: cross-entropy. Its floor is the teacher's entropy (reported as
`teacher_entropy`), as an LM's is the text's, so the loss stays a few nats above zero and
label noise is part of every step: a relative loss gap then measures how FP8 changes what is
learned, not how two trajectories towards zero loss diverge (the earlier noiseless regression
was chaotic: a BF16 run perturbed by one rounding landed 39% away on the mean). The gaps are
relative to the whole loss, as FP8 LM reports quote them; the excess over the floor is
`loss - teacher_entropy`. BF16 at the defaults (on CPU): 8.50 -> 5.00 (mean of the last
20 steps) against 6.64 for the best prediction that ignores x (the marginal) and a floor
of 3.04. Optimiser: AdamW, lr 1e-3 after a 10-step linear warm-up (warm-up as LM recipes do; the
lr as before; neither tuned on the gap).

One process: trains the FP8 model, then the BF16 one, and prints one summary line: the
largest relative loss gap |fp8 - bf16| / bf16 over the last 20 steps, the relative gap of the
two runs' mean losses over those steps, the teacher's entropy over those steps, the median
step time of each (steps 5 on; both include the BF16 head) and dgemm's cache counters
(`compiles` 0: every kernel came from the cache); --json writes both loss curves and step
times too.

--control also trains the BF16 model from weights perturbed by about one bf16 rounding (no FP8
anywhere) and reports the same two gaps against the BF16 run: the metrics' noise floor (top-1
routing flips and a different trajectory through Adam remain); read the FP8 gaps against it.

--ddp (under torchrun; DGEMM_REMOTE_CACHE pointing at one redis-server): rank 0 runs one forward
and backward first (loading or compiling every kernel the step needs and publishing it to
Redis) while the other ranks wait at a barrier; then all ranks train with DDP, each on its own
tokens of the same teacher. Each rank prints one JSON line: its rank, dgemm's cache counters
(rank 1 should show remote hits and no compiles), first and last loss and median step time.
`--rank-cache-dir` gives each rank its own local disk tier (a pattern with {rank}), as ranks on
different nodes would have, so that what rank 1 finds must come from Redis.

`--device cpu --reference-gemms` runs the same code on CPU with the layers' fp32 reference
GEMMs (dgemm.training.reference_gemms) and gloo for --ddp: a check of this script's wiring
without a GPU, not a measurement.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import pathlib
import time

import torch
import torch.nn.functional as F

import dgemm
from dgemm import training
from dgemm.jobs.prewarm import positive_int

VOCAB = 4096
TEACHER_ENTROPY = 3.0      # nats per token: the loss floor, about an LM's
TEACHER_RANK = 64          # the teacher's model width: its logits have rank 64 (+ the prior)
TEACHER_SEED = 0
LR, WARMUP = 1e-3, 10


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


def build(fp8: bool, dim: int, hidden: int, experts: int, device: str, seed: int = 0,
          vocab: int = VOCAB):
    """The trunk (FP8 layers when `fp8`) and the output head, BF16 in both models. No final
    norm (the blocks have none either): with an RMS norm before the head the trunk grew a
    constant ~1e4 times x's size that the norm then divided x by (shrinking the head's random
    initial logits that way was quicker for Adam than shrinking the head), which left only
    the teacher's prior learnable at dim 1024."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        MLP(dim, hidden, fp8, device), MoE(dim, hidden, experts, fp8, device),
        MLP(dim, hidden, fp8, device), MoE(dim, hidden, experts, fp8, device),
        torch.nn.Linear(dim, vocab, bias=False, device=device, dtype=torch.bfloat16))


# --- the task: labels sampled from a fixed random teacher --------------------------------------
def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Per-row entropy (nats) of softmax(logits)."""
    log_p = logits.float().log_softmax(-1)
    return -(log_p.exp() * log_p).sum(-1)


def teacher(dim: int, vocab: int, device: str, target: float = TEACHER_ENTROPY,
            seed: int = TEACHER_SEED):
    """The teacher's logits as a function of x: a fixed random MLP dim -> dim -> TEACHER_RANK
    (gelu between) read out by a fixed random unembedding TEACHER_RANK -> vocab, times one
    inverse temperature, plus a Zipfian log-prior (token k has frequency ~ 1/(k + 1), as in
    text). The temperature makes the mean per-token entropy over N(0, I) inputs `target` nats.
    The prior is what a model learns first (an LM's unigram stage), the context part what it
    learns next. Low rank as an LM's logits are (width << vocab), and so that 120 steps of
    sampled labels teach some of it: in a CPU trial at dim 256 a full-rank context part was
    barely learnt where a rank-64 one was."""
    generator = torch.Generator(device=device).manual_seed(seed)
    w1 = torch.randn(dim, dim, device=device, generator=generator) / dim ** 0.5
    w2 = torch.randn(dim, TEACHER_RANK, device=device, generator=generator) / dim ** 0.5
    unembed = torch.randn(TEACHER_RANK, vocab, device=device, generator=generator)
    unembed /= TEACHER_RANK ** 0.5
    prior = -torch.arange(1, vocab + 1, device=device).float().log()

    def context(x):
        return F.gelu(x @ w1) @ w2 @ unembed

    calibration = context(torch.randn(2048, dim, device=device, generator=generator))
    low, high = 1e-3, 1e3                   # entropy falls as the inverse temperature grows
    for _ in range(50):
        beta = (low * high) ** 0.5
        too_flat = entropy(calibration * beta + prior).mean() > target
        low, high = (beta, high) if too_flat else (low, beta)
    return lambda x: context(x) * beta + prior


def batches(steps: int, tokens: int, dim: int, device: str, seed: int = 1, vocab: int = VOCAB):
    """Yields (x bf16 [tokens, dim], labels int64 [tokens], the teacher's mean entropy): x
    fresh N(0, I) each step, labels sampled from the teacher's distribution; the teacher is the
    same for every seed (DDP ranks draw different tokens of one task)."""
    logits_of = teacher(dim, vocab, device)
    generator = torch.Generator(device=device).manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(tokens, dim, device=device, generator=generator)
        logits = logits_of(x)
        labels = torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)
        yield x.bfloat16(), labels, entropy(logits).mean()


def lm_loss(model, x, labels):
    return F.cross_entropy(model(x).float(), labels)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def train(model, steps: int, tokens: int, dim: int, device: str, lr: float = LR,
          warmup: int = WARMUP, seed: int = 1, vocab: int = VOCAB):
    """AdamW, lr warmed up linearly over the first `warmup` steps, then constant. Returns
    (losses, step times, the teacher's mean entropy per step)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                 lambda step: min(1.0, (step + 1) / warmup))
    losses, times, entropies = [], [], []
    for x, labels, teacher_entropy in batches(steps, tokens, dim, device, seed, vocab):
        _sync(device)
        start = time.perf_counter()
        loss = lm_loss(model, x, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        _sync(device)
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        entropies.append(teacher_entropy.item())
    return losses, times, entropies


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


def _train(model, args, seed: int = 1):
    return train(model, args.steps, args.tokens, args.dim, args.device, args.lr, args.warmup,
                 seed, args.vocab)


def single(args, shape) -> int:
    build_model = lambda fp8: build(fp8, *shape, args.device, vocab=args.vocab)
    fp8_losses, fp8_times, entropies = _train(build_model(True), args)
    stats = _cache_stats()
    bf16_losses, bf16_times, _ = _train(build_model(False), args)
    curves = dict(fp8_loss=fp8_losses, bf16_loss=bf16_losses, teacher_entropy_per_step=entropies)
    summary = {"steps": args.steps, "tokens": args.tokens, "dim": args.dim,
               "hidden": args.hidden, "experts": args.experts, "vocab": args.vocab,
               "lr": args.lr, "warmup": args.warmup,
               **gaps(fp8_losses, bf16_losses),
               "teacher_entropy": sum(entropies[-20:]) / len(entropies[-20:]),
               "fp8_loss_last": fp8_losses[-1], "bf16_loss_last": bf16_losses[-1],
               "fp8_loss_first": fp8_losses[0], "bf16_loss_first": bf16_losses[0],
               "fp8_step_ms": median_ms(fp8_times), "bf16_step_ms": median_ms(bf16_times),
               "fp8_first_step_ms": fp8_times[0] * 1e3, "dgemm_cache": stats}
    if args.control:
        control, _, _ = _train(perturb(build_model(False)), args)
        summary.update(gaps(control, bf16_losses, "control_"))
        curves["control_loss"] = control
    print(json.dumps(summary), flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(summary, **curves, fp8_step_s=fp8_times,
                                             bf16_step_s=bf16_times), indent=1))
    return 0


def warm_expert_rows(tokens: int, dim: int, hidden: int, experts: int) -> None:
    """Load the experts' kernels for every row total top-1 routing of `tokens` can produce
    (each expert's rows padded to the contiguous alignment): the total picks the tile, and it
    changes with the routing, so one batch's does not cover the other ranks' (q16: rank 1
    compiled 2 kernels after rank 0's warm-up batch). Forward and dgrad of both projections
    are contiguous GEMMs of (N, K) = (hidden, dim) and (dim, hidden)."""
    align = dgemm.get_mk_alignment_for_contiguous_layout()
    lo = dgemm.ceil_div(tokens, align) * align
    hi = (tokens + experts * (align - 1)) // align * align
    for n, k in ((hidden, dim), (dim, hidden)):
        dgemm.warmup("m_grouped_fp8_gemm_nt_contiguous", m=f"{lo}-{hi}:{align}", n=n, k=k,
                     num_groups=experts)


def distributed(args, shape) -> int:
    import torch.distributed as dist
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if args.rank_cache_dir:
        os.environ["DGEMM_CACHE_DIR"] = args.rank_cache_dir.format(rank=rank)
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    model = build(True, *shape, args.device, vocab=args.vocab)
    model = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[local_rank] if args.device == "cuda" else None)
    if rank == 0:
        # One forward and backward without the gradient all-reduce (the others wait at the
        # barrier) and without a step: every kernel is loaded or compiled and published.
        x, labels, _ = next(batches(1, args.tokens, args.dim, args.device, vocab=args.vocab))
        with model.no_sync():
            lm_loss(model, x, labels).backward()
        model.zero_grad(set_to_none=True)
        if not args.reference_gemms:
            warm_expert_rows(args.tokens, *shape)
    dist.barrier()
    losses, times, _ = _train(model, args, seed=1 + rank)
    report = {"rank": rank, "world_size": dist.get_world_size(),
              "cache_dir": os.environ.get("DGEMM_CACHE_DIR"),
              "remote": bool(os.environ.get("DGEMM_REMOTE_CACHE")),
              "stats": _cache_stats(), "loss_first": losses[0], "loss_last": losses[-1],
              "step_ms": median_ms(times)}
    print(json.dumps(report), flush=True)
    if args.json:
        path = pathlib.Path(str(args.json).replace("{rank}", str(rank)))
        path.write_text(json.dumps(dict(report, loss=losses, step_s=times), indent=1))
    # Both ranks reach teardown before either closes its gloo sockets: a rank still in a
    # collective's background thread when its peer hung up aborted ("terminate called without
    # an active exception", seen once in CI under load, session 13). The DDP model goes first:
    # its reducer holds the process group, which then outlived destroy_process_group until
    # interpreter exit, where the peer's closed sockets still aborted 1 run in 15 (session 25).
    del model
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--experts", type=int, default=4)
    parser.add_argument("--vocab", type=positive_int, default=VOCAB,
                        help="the output head's size (BF16 in both models)")
    parser.add_argument("--lr", type=float, default=LR, help="AdamW's lr after warm-up")
    parser.add_argument("--warmup", type=positive_int, default=WARMUP,
                        help="steps of linear lr warm-up")
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
