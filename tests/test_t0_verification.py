"""The training-t0 GPU verification, prepared on CPU (bench/gpu_verify_t0.sh, bench/NOTES.md):

- bench/t0_shapes.json, prewarmed for sm_90a with 132 SMs, holds every kernel the script's GPU
  processes select: bench.train_fp8 at its defaults (its GEMM calls recorded through the
  layers' seam), bench.bench_wgrad's rows and bench.sanitizer_wgrad's calls; so the device
  loads them instead of compiling.
- bench.train_fp8 runs end to end on CPU with the reference GEMMs, alone and as two torchrun
  ranks over gloo with a disk tier each (--ddp), printing what the GPU run prints.
- the script parses its modes and splits its time budget without a GPU (T0_DRY_RUN=1).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import bench_wgrad, sanitizer_wgrad, train_fp8
from bench import suite as suites
from dgemm import heuristics, training, warm
from dgemm.utils import calc_diff
from dgemm.jobs import manifest as manifests

REPO = Path(__file__).resolve().parent.parent
SHAPES = REPO / "bench" / "t0_shapes.json"
HOPPER = {"num_sms": 132, "arch": "sm_90a"}


@pytest.fixture(scope="module")
def prewarmed() -> set:
    """The specs `dgemm-cache prewarm --manifest bench/t0_shapes.json --arch sm_90a --num-sms
    132` compiles (default --contiguous-spread 0.3, as the script's local prep runs it)."""
    problems = manifests.problems(manifests.load_manifest(SHAPES), [], 0.3)
    return set(manifests.specs_for(problems, HOPPER["num_sms"], HOPPER["arch"]))


def _selected(kind, m, n, k, groups=1):
    """The spec a call on an H100/H200 launches (dgemm.gemm / dgemm.wgrad, autotuning off)."""
    k = max(k, heuristics.BLOCK_K) if kind in heuristics.WGRAD_KINDS else k
    return heuristics.select(kind, m, n, k, groups, **HOPPER)


def _recording_gemms(calls: list) -> training.Gemms:
    """A GEMM seam that records each call's (kind, m, n, k, groups) as dgemm would select its
    kernel and returns zeros of the right shape (the values do not matter here)."""
    def dense(a, b):
        calls.append(("fp8_gemm_nt", a[0].shape[0], b[0].shape[0], a[0].shape[1], 1))
        return torch.zeros(a[0].shape[0], b[0].shape[0], dtype=torch.bfloat16)

    def wgrad(a, b, c, d):
        calls.append(("fp8_gemm_nt_wgrad", a[0].shape[0], b[0].shape[0], a[0].shape[1], 1))
        return d

    def grouped(a, b, m_indices):
        calls.append(("m_grouped_fp8_gemm_nt_contiguous", a[0].shape[0], b[0].shape[1],
                      a[0].shape[1], b[0].shape[0]))
        return torch.zeros(a[0].shape[0], b[0].shape[1], dtype=torch.bfloat16)

    def k_grouped(a, b, c, d, ks):
        busy = [k for k in ks if k]
        if busy:
            calls.append(("k_grouped_fp8_gemm_nt_contiguous", d.shape[1], d.shape[2],
                          max(busy), len(ks)))
        return d

    return training.Gemms("recording", dense, wgrad, grouped, k_grouped)


def test_every_kernel_train_fp8_selects_at_its_defaults_is_prewarmed(prewarmed):
    args = {"dim": 1024, "hidden": 2048, "experts": 4, "tokens": 4096}
    parser_defaults = vars(train_fp8.make_parser().parse_args([]))
    assert {name: parser_defaults[name] for name in args} == args
    calls = []
    with training.use_gemms(_recording_gemms(calls)):
        model = train_fp8.build(True, args["dim"], args["hidden"], args["experts"], "cpu")
        for x, labels, _ in train_fp8.batches(1, args["tokens"], args["dim"], "cpu"):
            train_fp8.lm_loss(model, x, labels).backward()
    kinds = {call[0] for call in calls}
    assert kinds == {"fp8_gemm_nt", "fp8_gemm_nt_wgrad", "m_grouped_fp8_gemm_nt_contiguous",
                     "k_grouped_fp8_gemm_nt_contiguous"}
    missing = {call for call in calls if _selected(*call) not in prewarmed}
    assert not missing, f"calls whose kernel bench/t0_shapes.json does not prewarm: {missing}"


def test_every_contiguous_total_the_moe_layers_can_reach_is_prewarmed(prewarmed):
    """4096 tokens over 4 experts, each padded to 128 rows: m_sum is 4096 + 128 * j, j < 4."""
    for total in (4096, 4224, 4352, 4480):
        for n, k in ((2048, 1024), (1024, 2048)):
            assert _selected("m_grouped_fp8_gemm_nt_contiguous", total, n, k, 4) in prewarmed


def test_every_bench_wgrad_row_and_sanitizer_call_is_prewarmed(prewarmed):
    rows = suites.wgrad_cases("deepseek_v3", ["wgrad", "k_grouped"])
    assert len(rows) == 24
    calls = [("fp8_gemm_nt_wgrad", *row.shape) for row in rows if row.kind == "wgrad"]
    for groups, m, n, k in (row.shape for row in rows if row.kind == "k_grouped"):
        calls.append(("k_grouped_fp8_gemm_nt_contiguous", m, n,
                      max(bench_wgrad.k_grouped_ks(groups, k)), groups))
    calls += [("fp8_gemm_nt_wgrad", *shape) for shape in sanitizer_wgrad.DENSE]
    m, n, ks = sanitizer_wgrad.K_GROUPED
    calls.append(("k_grouped_fp8_gemm_nt_contiguous", m, n, max(ks), len(ks)))
    missing = [call for call in calls if _selected(*call) not in prewarmed]
    assert not missing


def test_bench_wgrad_warms_deep_gemm_with_the_timed_shapes():
    rows = suites.wgrad_cases("deepseek_v3", ["k_grouped"])
    jobs = bench_wgrad.deep_gemm_jobs(rows)
    for (groups, m, n, k), job in zip((row.shape for row in rows), jobs):
        assert job == ("k_grouped", m, n, tuple(bench_wgrad.k_grouped_ks(groups, k)))
        assert all(k_g % 128 == 0 and k_g > 0 for k_g in job[3])


def test_warmup_with_the_t0_manifest_plans_what_prewarm_compiles(prewarmed):
    planned = warm.plan(manifest=str(SHAPES), contiguous_spread=0.3, **HOPPER)
    assert set(planned) == prewarmed


# --- bench.train_fp8 on CPU ---------------------------------------------------------------------
TINY = ["--device", "cpu", "--reference-gemms", "--steps", "20", "--tokens", "256", "--dim",
        "128", "--hidden", "256", "--experts", "2", "--vocab", "512"]


def test_train_fp8_compares_fp8_with_bf16_and_writes_its_json(tmp_path, capsys):
    assert train_fp8.main(TINY + ["--json", str(tmp_path / "t.json")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    saved = json.loads((tmp_path / "t.json").read_text())
    assert len(saved["fp8_loss"]) == len(saved["bf16_loss"]) == 20
    assert summary["max_rel_gap_last_20"] == pytest.approx(max(
        abs(f - b) / b for f, b in zip(saved["fp8_loss"][-20:], saved["bf16_loss"][-20:])))
    assert summary["rel_gap_mean_last_20"] == pytest.approx(
        abs(sum(saved["fp8_loss"]) - sum(saved["bf16_loss"])) / sum(saved["bf16_loss"]))
    assert "control_loss" not in saved and "control_max_rel_gap_last_20" not in summary
    assert summary["fp8_loss_last"] < summary["fp8_loss_first"]          # it learns
    assert summary["teacher_entropy"] == pytest.approx(3.0, abs=0.3)     # the loss floor
    assert summary["teacher_entropy"] < summary["fp8_loss_last"]
    assert set(summary["dgemm_cache"]) >= {"compiles", "remote_hits", "disk_hits"}


def test_train_fp8_control_is_bf16_from_weights_one_rounding_away(tmp_path, capsys):
    assert train_fp8.main(TINY + ["--control", "--json", str(tmp_path / "t.json")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    saved = json.loads((tmp_path / "t.json").read_text())
    control, bf16 = saved["control_loss"], saved["bf16_loss"]
    assert control[0] != bf16[0] and control[0] == pytest.approx(bf16[0], rel=1e-2)
    assert summary["control_max_rel_gap_last_20"] == pytest.approx(
        train_fp8.max_relative_gap(control, bf16))
    assert summary["control_rel_gap_mean_last_20"] == pytest.approx(
        train_fp8.mean_relative_gap(control, bf16))


def test_train_fp8_batches_are_seeded_and_every_seed_samples_one_teacher():
    """Every run of one seed sees the same tokens and labels; another seed (a DDP rank) other
    tokens of the same teacher, whose entropy is the loss floor the summary reports."""
    first, again = (list(train_fp8.batches(2, 256, 128, "cpu", vocab=512)) for _ in range(2))
    for (x, labels, floor), (x2, labels2, floor2) in zip(first, again):
        assert torch.equal(x, x2) and torch.equal(labels, labels2) and floor == floor2
    x, labels, _ = next(train_fp8.batches(1, 256, 128, "cpu", seed=2, vocab=512))
    assert not torch.equal(x, first[0][0])
    teacher = train_fp8.teacher(128, 512, "cpu")
    assert torch.equal(teacher(x.float()), train_fp8.teacher(128, 512, "cpu")(x.float()))
    floor = train_fp8.entropy(teacher(torch.randn(4096, 128))).mean().item()
    assert floor == pytest.approx(train_fp8.TEACHER_ENTROPY, abs=0.1)


def _lossless(monkeypatch):
    """The layers' quantization replaced by fp32 values with scale 1 (the reference GEMMs
    dequantize as data * scales), so the FP8 model computes what the BF16 one does."""
    def rows(x):
        return x.float(), torch.ones(x.shape[0], x.shape[1] // 128)

    def weight(w):
        scales = torch.ones(w.shape[0] // 128, w.shape[1] // 128)
        return (w.float(), scales), (w.float().t().contiguous(), scales.t().contiguous())
    monkeypatch.setattr(training, "per_token_cast_to_fp8", rows)
    monkeypatch.setattr(training, "quantize_weight", weight)


def _model_grads(fp8: bool) -> dict:
    model = train_fp8.build(fp8, 128, 256, 2, "cpu", vocab=512)
    x, labels, _ = next(train_fp8.batches(1, 512, 128, "cpu", vocab=512))
    with training.use_gemms(training.reference_gemms()):
        train_fp8.lm_loss(model, x, labels).backward()
    return {name: p.grad.float() for name, p in model.named_parameters()}


def test_without_quantization_the_fp8_model_has_the_bf16_models_gradients(monkeypatch):
    """Every path of the FP8 model's backward (routers, residuals, experts' padding, dgrad's
    W^T, wgrad) is wired as autograd's BF16 model: quantization is the only difference."""
    bf16 = _model_grads(False)
    _lossless(monkeypatch)
    fp8 = _model_grads(True)
    assert set(fp8) == set(bf16) and any("router" in name for name in fp8)
    for name in bf16:
        assert calc_diff(fp8[name], bf16[name]) < 1e-5, name


@pytest.mark.parametrize("argv, message", [
    (["--steps", "10"], "at least 20"),
    (["--control", "--ddp"], "goes without --ddp"),
    (["--device", "cpu"], "needs --reference-gemms"),
    (["--rank-cache-dir", "/tmp/x{rank}"], "goes with --ddp"),
])
def test_train_fp8_refuses_bad_arguments_with_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        train_fp8.main(argv)
    assert caught.value.code == 2 and message in capsys.readouterr().err


def test_train_fp8_ddp_runs_two_torchrun_ranks_each_with_its_own_disk_tier(tmp_path):
    if not (torch.distributed.is_available() and torch.distributed.is_gloo_available()):
        pytest.skip("this torch has no gloo")
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                   "MASTER_PORT") and not name.startswith("TORCHELASTIC_")}
    environment.update(PYTHONPATH=str(REPO), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    from redis_server import free_port
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "-m",
         "bench.train_fp8", "--ddp", *TINY, "--rank-cache-dir", str(tmp_path / "rank{rank}"),
         "--json", str(tmp_path / "ddp{rank}.json")],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    # Each rank's report from its --json file: the two ranks' stdout lines share one pipe
    # under torchrun and came back interleaved on a loaded machine.
    reports = [json.loads((tmp_path / f"ddp{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["rank"] for r in reports] == [0, 1]
    for report in reports:
        assert report["world_size"] == 2
        assert report["cache_dir"] == str(tmp_path / f"rank{report['rank']}")
        assert {"compiles", "remote_hits"} <= set(report["stats"])
        assert len(report["loss"]) == int(TINY[TINY.index("--steps") + 1])


# --- the script ---------------------------------------------------------------------------------
SCRIPT = REPO / "bench" / "gpu_verify_t0.sh"


def _script(*args, **env):
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, **env))


def test_the_verification_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True,
                          timeout=60).returncode == 0


def test_the_script_splits_its_budget_so_bench_and_train_keep_their_time(tmp_path):
    result = _script("all", T0_DRY_RUN="1", OUT=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "modes=tests,bench,train" in result.stdout
    assert "bench: 300 s" in result.stdout and "train: 180 s" in result.stdout
    tight = _script("tests,bench,train", T0_DRY_RUN="1", T0_BUDGET_S="400", OUT=str(tmp_path))
    assert "wgrad tests 70 s" in tight.stdout           # 400 - (60 + 180 + 90) reserved


def test_the_script_refuses_an_unknown_mode_with_exit_2(tmp_path):
    result = _script("benchmark", OUT=str(tmp_path))
    assert result.returncode == 2 and "unknown mode benchmark" in result.stdout


def test_the_scripts_prewarm_check_runs_on_a_host_without_redis_py(tmp_path):
    """The GPU image has no redis-py; `prewarm --dry-run` without a remote must not need it."""
    code = ("import sys; sys.modules['redis'] = None\n"
            "from dgemm.cli import main\n"
            f"sys.exit(main(['prewarm', '--manifest', {str(SHAPES)!r}, '--arch', 'sm_90a', "
            f"'--num-sms', '132', '--dry-run', '--no-progress', '--cache-dir', "
            f"{str(tmp_path)!r}]))")
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("DGEMM_")}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=120, env=dict(environment, PYTHONPATH=str(REPO)))
    assert result.returncode == 0, result.stderr[-2000:]
    summary = result.stdout.splitlines()[1]
    assert re.search(r"\b(\d+) kernels .*: 0 on local disk .*; \1 to compile", summary), summary
