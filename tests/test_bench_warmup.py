"""bench.bench_warmup and bench.warmup_sweep without a GPU: the workload (vLLM's calls, and the
prewarm manifest naming exactly those), the call sequence on CPU tensors through a recording
module, a phase process stopped at its limit (partial result, process group gone), the phase
order with stand-in sweep processes (skips, --budget, --json after each phase, --append), and
the prewarm phase for real (trivial test kernels)."""
from __future__ import annotations

import json
import os
import sys
import time

import pytest
import torch

from bench import bench_warmup, warmup_sweep
from bench.warmup_sweep import Workload
from dgemm import warm
from dgemm.jobs import manifest as manifests


def small_workload(**changes) -> Workload:
    fields = dict(preset="test", dense=((256, 256), (128, 384)), grouped=((256, 128),),
                  max_m=3, experts=2, topk=1)
    fields.update(changes)
    return Workload(**fields)


# --- the workload -------------------------------------------------------------------------------
def test_the_deepseek_workload_is_vllms_full_warmup_of_the_presets_layers():
    workload = Workload.from_preset("deepseek_v3", 16384, 32, 8)
    assert workload.dense == ((2112, 7168), (24576, 1536), (32768, 512), (7168, 16384),
                              (4096, 7168), (7168, 2048))
    assert workload.grouped == ((4096, 7168), (7168, 2048))
    # vLLM's compute_aligned_M: 16384 tokens x top-8 + 32 experts x 127 rows, aligned to 128.
    assert workload.contiguous_max_m() == 135168
    assert workload.contiguous_ms() == range(128, 135169, 128)
    assert workload.calls() == {"dense": 6 * 16384, "contiguous": 2 * 1056,
                                "total": 6 * 16384 + 2 * 1056}


@pytest.mark.parametrize("max_m", [2048, 100])
def test_the_prewarm_manifest_names_the_sweeps_calls(max_m):
    workload = Workload.from_preset("deepseek_v3", max_m, 32, 8)
    calls = {manifests.Problem("fp8_gemm_nt", m, n, k) for n, k in workload.dense
             for m in workload.dense_ms()}
    calls |= {manifests.Problem("m_grouped_fp8_gemm_nt_contiguous", m, n, k, 32)
              for n, k in workload.grouped for m in workload.contiguous_ms()}
    named = set(manifests.problems(workload.manifest(), [], 0.0))
    assert calls <= named
    # Only when the largest total is not a multiple of experts x 128 does prewarm also name
    # the aligned total of each of the last entries (32 x 128-aligned rows per group).
    extra = named - calls
    if workload.contiguous_max_m() % (32 * 128) == 0:
        assert not extra
    else:
        assert {p.m for p in extra} == {-(-workload.contiguous_max_m() // 4096) * 4096}


def test_workload_arguments_are_checked():
    with pytest.raises(ValueError, match="experts must divide 128"):
        small_workload(experts=3)
    with pytest.raises(ValueError, match="max_m must be a positive integer"):
        small_workload(max_m=0)
    assert Workload.from_json(small_workload().to_json()) == small_workload()


# --- the calls ----------------------------------------------------------------------------------
class Recorder:
    """A stand-in `deep_gemm` that records what each call receives."""
    __name__ = "recorder"

    def __init__(self):
        self.calls = []

    def fp8_gemm_nt(self, a, b, d, **kwargs):
        self.calls.append(("dense", a, b, d, None, kwargs))

    def m_grouped_fp8_gemm_nt_contiguous(self, a, b, d, layout, **kwargs):
        self.calls.append(("contiguous", a, b, d, layout, kwargs))


def test_the_sweep_makes_vllms_calls_on_slices_of_max_row_buffers():
    workload = small_workload()
    layers = warmup_sweep.prepare(workload, device="cpu")
    recorder, ticks = Recorder(), []
    assert warmup_sweep.sweep(recorder, layers, lambda calls, at: ticks.append(calls)) == 9
    assert ticks == list(range(1, 10))
    dense = [c for c in recorder.calls if c[0] == "dense"]
    assert [(c[1][0].shape[0], c[2][0].shape) for c in dense] == [
        (m, (n, k)) for n, k in workload.dense for m in (1, 2, 3)]
    for _, (a, sa), (b, sb), d, _, kwargs in dense:
        m, k = a.shape
        assert kwargs == {"disable_ue8m0_cast": True}
        assert a.dtype == b.dtype == torch.float8_e4m3fn and d.dtype == torch.bfloat16
        assert sa.shape == (m, k // 128) and sa.is_contiguous()       # row-major, as vLLM's
        assert sb.shape == (-(-b.shape[0] // 128), k // 128)
        assert d.shape == (m, b.shape[0]) and d.is_contiguous()
    first = [c for c in dense if c[2][0].shape == (256, 256)]
    assert len({c[3].data_ptr() for c in first}) == 1     # out[:m] of one buffer
    grouped = [c for c in recorder.calls if c[0] == "contiguous"]
    assert [c[1][0].shape[0] for c in grouped] == [128, 256, 384]   # 3 + 2 x 127 -> 384
    for _, (a, _), (b, sb), d, layout, kwargs in grouped:
        assert b.shape == (2, 256, 128) and sb.shape == (2, 2, 1)
        assert layout.dtype == torch.int32 and layout.shape == (a.shape[0],)
        blocks = layout.view(-1, 128)
        assert bool((blocks == blocks[:, :1]).all())     # one expert per 128-row block
        assert bool(((layout >= 0) & (layout < 2)).all())
        assert kwargs == {"disable_ue8m0_cast": True}


def test_dgemms_drop_in_takes_every_call_of_the_sweep_as_vllm_makes_it():
    """Fake CUDA tensors (FakeTensorMode): dgemm.compat.deep_gemm and dgemm's own checks run
    on each call's arguments (dtypes, shapes, strides, slices), with no device."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from dgemm.compat import deep_gemm

    workload = small_workload(max_m=130, experts=4, topk=2)
    with FakeTensorMode(allow_non_fake_inputs=True):
        layers = warmup_sweep.prepare(workload, device="cuda")
        assert warmup_sweep.sweep(deep_gemm, layers) == workload.calls()["total"]


def test_kernels_are_counted_in_both_libraries_cache_layouts(tmp_path):
    (tmp_path / "v1" / "ab").mkdir(parents=True)
    (tmp_path / "v1" / "ab" / "abcd.kbin").write_bytes(b"x")
    (tmp_path / "v1" / "ab" / "abcd.kbin.tmp").write_bytes(b"x")
    assert warmup_sweep.dgemm_entries(tmp_path) == 1
    for name in ("kernel.sm90_fp8_gemm_1d2d.aa", "kernel.sm90_fp8_gemm_1d2d.bb",
                 "kernel.transpose_fp32.cc"):
        (tmp_path / "cache" / name).mkdir(parents=True)
        (tmp_path / "cache" / name / "kernel.cubin").write_bytes(b"x")
    (tmp_path / "cache" / "kernel.half.dd").mkdir()           # no cubin: not a kernel
    assert warmup_sweep.deepgemm_kernels(tmp_path) == {"sm90_fp8_gemm_1d2d": 2,
                                                       "transpose_fp32": 1}


# --- one phase process --------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_phase_stopped_at_its_limit_keeps_its_progress_and_leaves_no_process(tmp_path):
    script = f"""
import json, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open({str(tmp_path / 'pid')!r}, "w").write(str(child.pid))
with open({str(tmp_path / 'progress.jsonl')!r}, "a") as f:
    f.write(json.dumps({{"calls": 10, "seconds": 0.5, "kernels": 2, "at": "dense 1x128"}}) + "\\n")
    f.write('{{"calls": 20, "seco')       # a line cut by the stop
    f.flush()
    time.sleep(60)
"""
    started = time.monotonic()
    child = bench_warmup.run_child([sys.executable, "-c", script], dict(os.environ), 3.0,
                                   tmp_path / "log.txt")
    assert child.timed_out and time.monotonic() - started < 20
    phase = bench_warmup.PHASES[0]
    record = bench_warmup.sweep_record(phase, child, tmp_path, tmp_path / "cache", 100, 3.0)
    assert record["status"] == "timeout"
    assert (record["calls_done"], record["kernels_compiled"], record["at"]) == (
        10, 2, "dense 1x128")
    grandchild = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_a_failed_phase_reports_the_end_of_its_log(tmp_path):
    script = "import sys; print('trace...', file=sys.stderr); sys.exit('warmup_sweep: no GPU')"
    child = bench_warmup.run_child([sys.executable, "-c", script], dict(os.environ), 30,
                                   tmp_path / "log.txt")
    record = bench_warmup.sweep_record(bench_warmup.PHASES[0], child, tmp_path,
                                       tmp_path / "cache", 100, 30)
    assert record["status"] == "failed" and record["returncode"] == 1
    assert record["error"].splitlines()[-1] == "warmup_sweep: no GPU"


# --- the phases, with stand-in sweep processes --------------------------------------------------
FAKE_SWEEP = """
import json, os, sys, time
from pathlib import Path
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
library = args["--library"]
time.sleep(float(os.environ.get("FAKE_SWEEP_SECONDS", "0")))
if library == "dgemm":
    cache = Path(os.environ["DGEMM_CACHE_DIR"]) / "v1" / "ab"
    cache.mkdir(parents=True, exist_ok=True)
    fresh = not (cache / "ab01.kbin").exists()
    (cache / "ab01.kbin").write_bytes(b"x")
else:
    cache = Path(os.environ["DG_JIT_CACHE_DIR"]) / "cache" / "kernel.gemm.01"
    fresh = not cache.exists()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "kernel.cubin").write_bytes(b"x")
Path(args["--result"]).write_text(json.dumps({
    "library": library, "gpu": "Fake H100", "num_sms": 132, "seconds": 1.5, "calls": 9,
    "kernels_compiled": int(fresh), "kernels_in_cache": 1}))
"""


@pytest.fixture
def fake_sweeps(tmp_path, monkeypatch):
    """Sweep phases run FAKE_SWEEP (writes a kernel into the phase's cache and a result)."""
    script = tmp_path / "fake_sweep.py"
    script.write_text(FAKE_SWEEP)

    def command(phase, workload, phase_dir, second_pass):
        return [sys.executable, str(script), "--library", phase.library,
                "--result", str(phase_dir / "result.json")]
    monkeypatch.setattr(bench_warmup, "sweep_command", command)
    return tmp_path


def run_main(tmp_path, *options, experts: int = 2) -> tuple:
    out = tmp_path / "warmup.json"
    status = bench_warmup.main(["--max-m", "3", "--experts", str(experts), "--topk", "1",
                                "--work-dir", str(tmp_path / "work"), "--json", str(out),
                                *options])
    return status, json.loads(out.read_text()) if out.exists() else None


def test_phases_run_in_order_reuse_caches_and_skip_what_lacks_its_cache(fake_sweeps, capsys):
    status, results = run_main(fake_sweeps, "--only",
                               "deepgemm-warm,dgemm-warm,dgemm-cold,dgemm-prewarmed")
    assert status == 0
    phases = results["phases"]
    assert list(phases) == ["dgemm-cold", "dgemm-prewarmed", "dgemm-warm", "deepgemm-warm"]
    assert phases["dgemm-cold"]["status"] == "ok" and phases["dgemm-cold"]["kernels_compiled"] == 1
    assert phases["dgemm-warm"]["status"] == "ok" and phases["dgemm-warm"]["kernels_compiled"] == 0
    assert phases["dgemm-prewarmed"] == {"status": "skipped",
                                         "note": "needs prewarm first (same --work-dir)"}
    assert phases["deepgemm-warm"]["status"] == "skipped"
    assert results["device"] == {"gpu": "Fake H100", "num_sms": 132}
    assert results["calls"] == {"dense": 6 * 3, "contiguous": 2 * 3, "total": 24}
    out = capsys.readouterr().out
    assert "GPU: Fake H100, 132 SMs" in out and "needs prewarm first" in out


def test_append_adds_phases_of_the_same_workload_and_refuses_another(fake_sweeps, capsys):
    assert run_main(fake_sweeps, "--only", "dgemm-cold")[0] == 0
    status, results = run_main(fake_sweeps, "--only", "deepgemm-cold,deepgemm-warm",
                               "--append")
    assert status == 0
    assert list(results["phases"]) == ["dgemm-cold", "deepgemm-cold", "deepgemm-warm"]
    assert results["phases"]["deepgemm-warm"]["kernels_compiled"] == 0
    status = bench_warmup.main(["--max-m", "4", "--experts", "2", "--topk", "1", "--only",
                                "dgemm-cold", "--work-dir", str(fake_sweeps / "work"),
                                "--json", str(fake_sweeps / "warmup.json"), "--append"])
    assert status == 2
    assert "holds another workload" in capsys.readouterr().err


def test_the_budget_skips_the_phases_it_cannot_fit(fake_sweeps, monkeypatch):
    monkeypatch.setenv("FAKE_SWEEP_SECONDS", "1.5")
    status, results = run_main(fake_sweeps, "--only", "dgemm-cold,deepgemm-cold",
                               "--budget", str(bench_warmup.MIN_PHASE_S + 1))
    assert status == 0
    assert results["phases"]["dgemm-cold"]["timeout_s"] == pytest.approx(
        bench_warmup.MIN_PHASE_S + 1, abs=0.5)
    assert results["phases"]["deepgemm-cold"]["status"] == "skipped"
    assert "--budget" in results["phases"]["deepgemm-cold"]["note"]


def test_a_phase_over_its_timeout_is_reported_and_fails_the_run(fake_sweeps, monkeypatch):
    monkeypatch.setenv("FAKE_SWEEP_SECONDS", "30")
    status, results = run_main(fake_sweeps, "--only", "dgemm-cold,dgemm-warm",
                               "--timeout", "dgemm-cold=1")
    assert status == 1
    assert results["phases"]["dgemm-cold"]["status"] == "timeout"
    assert results["phases"]["dgemm-warm"]["status"] == "skipped"      # nothing compiled


@pytest.mark.parametrize("options, message", [
    (["--quick", "--max-m", "64"], "not allowed with"),
    (["--only", "dgemm-cold,nope"], "unknown phase nope"),
    (["--timeout", "nope=3"], "unknown phase 'nope'"),
    (["--timeout", "0"], "positive number of seconds"),
    (["--experts", "48"], "experts must divide 128"),
    (["--preset", "nope"], "unknown preset"),
    (["--append"], "--append needs --json"),
])
def test_bad_arguments_exit_2_with_the_fix(options, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_warmup.parse_args(options)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# --- the prewarm phase, for real ----------------------------------------------------------------
def test_the_prewarm_phase_compiles_the_sweeps_kernels_once(tmp_path, test_kernels):
    status, results = run_main(tmp_path, "--only", "prewarm", "--num-sms", "132", "--jobs",
                               "2", experts=1)
    assert status == 0
    record = results["phases"]["prewarm"]
    workload = Workload.from_preset("deepseek_v3", 3, 1, 1)
    specs = set()
    for n, k in workload.dense:
        specs |= set(warm.plan("fp8_gemm_nt", m=workload.dense_ms(), n=n, k=k, num_sms=132,
                               arch="sm_90a"))
    for n, k in workload.grouped:
        specs |= set(warm.plan("m_grouped_fp8_gemm_nt_contiguous", m=workload.contiguous_ms(),
                               n=n, k=k, num_groups=1, num_sms=132, arch="sm_90a"))
    assert record["status"] == "ok"
    assert record["specs_total"] == record["kernels_compiled"] == record["kernels_in_cache"] \
        == len(specs)
    assert record["problems"] == workload.calls()["total"]
