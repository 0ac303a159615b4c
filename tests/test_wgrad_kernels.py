"""The weight-gradient kernel families on CPU: selection, the real sm_90a and portable cubins
(NVRTC and NVCC) against what Python launches them with, the headers' checks of Python's plan,
the training sections of shape manifests, and a CPU-only prewarm that compiles the training
kernels into the cache. (Correctness and speed need a GPU: tests/gpu/test_wgrad_gpu.py.)"""
from __future__ import annotations

import concurrent.futures
import ctypes
import dataclasses
import json
import multiprocessing
import os

import pytest

from dgemm import kernels
from dgemm.heuristics import WGRAD_KINDS, select
from dgemm.jit import compiler as compiler_module
from dgemm.jit import elf, source
from dgemm.jobs import manifest, prewarm
from dgemm.kernels import hopper_wgrad, portable_wgrad

# Odd and even N (the epilogue's paired and single stores), both tile widths, a 152-wide tile in
# clusters (the reduce epilogue's tail chunk), both arches.
SPECS = list(dict.fromkeys(
    [select("fp8_gemm_nt_wgrad", 7168, 2048, 8192)]                                # 128x128
    + [select("fp8_gemm_nt_wgrad", 129, 2049, 128)]                                # 128x64
    + [select("k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, 4096, 8)]
    + [dataclasses.replace(select("fp8_gemm_nt_wgrad", 2112, 7168, 4096), block_n=152,
                           num_stages=hopper_wgrad.num_stages(152), num_tma_multicast=2)]
    + [select("fp8_gemm_nt_wgrad", 255, n, 4096, arch="sm_80") for n in (2048, 4097)]))
COMPILERS = ("nvrtc", "nvcc")


def _id(spec) -> str:
    return f"{spec.kernel}-{spec.arch}-n{spec.n}-{spec.block_m}x{spec.block_n}s{spec.num_stages}"


def _compile(spec, name="nvrtc"):
    compiled = compiler_module.get_compiler(name).compile(spec, source.render(spec))
    return compiled.cubin, compiled.symbol


@pytest.fixture(scope="module")
def cubins() -> dict:
    jobs = [(spec, name) for spec in SPECS for name in COMPILERS]
    workers = max(1, min(len(jobs), len(os.sched_getaffinity(0))))
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return dict(zip(jobs, pool.map(_compile, *zip(*jobs))))


# --- selection ----------------------------------------------------------------------------------
def test_the_wgrad_kinds_pick_the_wgrad_families_by_arch():
    for kind in WGRAD_KINDS:
        assert select(kind, 4096, 7168, 4096, 4).kernel == hopper_wgrad.NAME
        assert select(kind, 4096, 7168, 4096, 4, arch="sm_80").kernel == portable_wgrad.NAME
        # The oracle (DGEMM_FORCE_PORTABLE / prewarm --portable) forces the portable wgrad.
        assert select(kind, 4096, 7168, 4096, 4, family="fp8_gemm_portable").kernel == \
            portable_wgrad.NAME


def test_k_does_not_enter_a_wgrad_spec():
    """K is a run-time argument: one kernel serves every token count of a layer and the uneven
    K of a k-grouped call's groups. The group count enters the pick only through the waves of
    a launch (launch_waves), and one group is the dense GEMM."""
    dense = {select("fp8_gemm_nt_wgrad", 4096, 7168, k) for k in (128, 4096, 16384)}
    assert len(dense) == 1 and next(iter(dense)).k == 0
    for groups in (1, 4, 16):
        grouped = {select("k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, k, groups)
                   for k in (128, 2048, 8192)}
        assert len(grouped) == 1 and next(iter(grouped)).k == 0
    assert select("k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, 2048, 1) in dense


@pytest.mark.parametrize("block_n", hopper_wgrad.BLOCK_NS)
def test_every_hopper_wgrad_tile_has_a_pipeline_that_fits(block_n):
    stages = hopper_wgrad.num_stages(block_n)
    assert stages >= 3
    assert hopper_wgrad.smem_plan(128, block_n, stages) <= hopper_wgrad.SMEM_CAPACITY
    assert (stages == hopper_wgrad.MAX_STAGES
            or hopper_wgrad.smem_plan(128, block_n, stages + 1) > hopper_wgrad.SMEM_CAPACITY)


@pytest.mark.parametrize("block_n", hopper_wgrad.BLOCK_NS)
def test_the_reduce_epilogue_stages_the_whole_tile_or_reuses_at_least_two_slots(block_n):
    """The chunk slots never cost a stage: the ring is as deep as with the fewest slots, and
    the slots are as many as fit beside it (the whole tile, its tail slot tail-sized, where
    that fits)."""
    chunks, stages = hopper_wgrad.d_chunks(block_n), hopper_wgrad.num_stages(block_n)
    slots = hopper_wgrad.d_slots(128, block_n, stages)
    assert min(chunks, 2) == hopper_wgrad.min_d_slots(block_n) <= slots <= chunks
    assert (slots == chunks or hopper_wgrad._smem(128, block_n, stages, slots + 1)
            > hopper_wgrad.SMEM_CAPACITY)
    whole = hopper_wgrad.d_bytes(block_n, chunks)
    assert whole == 64 * block_n * 4                    # a warpgroup's 64 rows, fp32
    assert hopper_wgrad.d_bytes(block_n, slots) == (whole if slots == chunks else slots * 8192)


def test_the_128_and_136_wide_tiles_trade_whole_tile_staging_for_a_fifth_stage():
    for block_n in (128, 136):
        assert hopper_wgrad.num_stages(block_n) == 5
        assert hopper_wgrad.d_slots(128, block_n, 5) == 3 < hopper_wgrad.d_chunks(block_n)
        assert hopper_wgrad.d_slots(128, block_n, 4) == hopper_wgrad.d_chunks(block_n)


def test_the_wgrad_heuristic_keeps_four_stages_and_whole_clusters():
    """Every pick has at least four stages; a cluster's grid is whole pairs."""
    for m in (1, 7, 129, 2112, 4096, 7168, 24576, 32768):
        for n in (1, 129, 512, 1536, 2048, 2049, 4097, 7168, 16384):
            spec = hopper_wgrad.select("normal", m, n, 4096, 1, 132)
            assert spec.num_stages >= 4 and spec.num_stages == hopper_wgrad.num_stages(spec.block_n)
            grid = hopper_wgrad.grid_size(spec, m)
            assert grid % spec.num_tma_multicast == 0 and 0 < grid <= 132


def test_launch_waves_count_every_launch_of_a_k_grouped_call():
    """Groups run MAX_GROUPS per launch in even shares; each launch fills its own waves."""
    assert hopper_wgrad.MAX_GROUPS == 12
    assert hopper_wgrad.launch_waves(100, 1, 132) == 1
    assert hopper_wgrad.launch_waves(100, 12, 132) == 10              # 1200 tiles, one launch
    assert hopper_wgrad.launch_waves(100, 13, 132) == 6 + 5           # 7 + 6 groups
    assert hopper_wgrad.launch_waves(1696, 4, 132) == 52
    assert hopper_wgrad.launch_waves(15, 25, 132) == 2 + 2 + 1       # 9 + 9 + 7 groups
    assert hopper_wgrad.launch_waves(1, 2 ** 31 - 1, 132) > 0        # closed form: no loop


def test_the_wgrad_pick_is_a_candidate_and_the_same_for_every_k():
    """K is a run-time value: one kernel serves every K of a layer (and uneven K per group)."""
    for m, n, groups in ((24576, 1536, 1), (2112, 7168, 1), (4096, 7168, 4), (7168, 2048, 64)):
        picks = {hopper_wgrad.select("normal", m, n, k, groups, 132) for k in (128, 4096, 16384)}
        assert len(picks) == 1
        assert picks.pop().block_n in hopper_wgrad.CANDIDATE_BLOCK_NS


def test_the_wgrad_pick_counts_the_waves_of_all_groups_of_a_launch():
    """4096 x 7168: 136 columns fill one group's waves better (13 against 14 for 128), four
    groups in one launch fill 128's better (55 x 1 against 52 x 136 / 128 block times)."""
    assert hopper_wgrad.select("normal", 4096, 7168, 4096, 1, 132).block_n == 136
    assert hopper_wgrad.select("normal", 4096, 7168, 4096, 4, 132).block_n == 128


# --- compiled kernels ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", COMPILERS)
@pytest.mark.parametrize("spec", SPECS, ids=_id)
def test_the_compiled_wgrad_kernel_matches_what_python_launches(spec, name, cubins):
    cubin, symbol = cubins[spec, name]
    info = elf.read_cubin(cubin)
    assert (info.machine, info.sm) == (elf.EM_CUDA, int(spec.arch[3:5]))
    assert info.entry_symbols == (symbol,)
    assert spec.cpp_instance().split("<")[0].split("::")[1] in symbol
    recorded = elf.kernel_info(cubin, symbol)
    assert recorded.max_threads == (spec.num_threads, 1, 1)
    family = kernels.family(spec.kernel)
    assert recorded.param_sizes == tuple(ctypes.sizeof(t) for t in family.ARGS.types)


@pytest.mark.parametrize("name", COMPILERS)
def test_a_wgrad_kernel_compiles_to_the_same_bytes_in_another_process(name, cubins):
    """Ranks that compile the same spec get the same cubin (a namespace-scope constexpr
    variable once made NVRTC name a symbol with a per-compilation ID)."""
    spec = SPECS[0]
    assert _compile(spec, name)[0] == cubins[spec, name][0]


def _front_end_fails(spec) -> bool:
    try:
        _compile(spec)
    except Exception as exc:                         # CompileError with the compiler's log
        assert "static assertion failed" in str(exc) or "static_assert" in str(exc), exc
        return True
    return False


@pytest.mark.parametrize("family, planned", [
    (hopper_wgrad, "smem_bytes"), (hopper_wgrad, "num_threads"), (hopper_wgrad, "groups_bytes"),
    (portable_wgrad, "smem_bytes"), (portable_wgrad, "num_threads")])
def test_a_wgrad_plan_that_differs_from_the_header_fails_the_compile(family, planned,
                                                                     monkeypatch):
    spec = select("fp8_gemm_nt_wgrad", 4096, 2048, 4096,
                  arch="sm_90a" if family is hopper_wgrad else "sm_80")
    assert not _front_end_fails(spec)
    true_value = getattr(family, planned)
    monkeypatch.setattr(family, planned, lambda s: true_value(s) + 8)
    assert _front_end_fails(spec)


def test_a_hand_built_tile_the_kernel_refuses_is_named_before_the_compiler():
    spec = select("fp8_gemm_nt_wgrad", 4096, 2048, 4096)
    bad = kernels.KernelSpec(**dict(vars(spec), block_n=84))
    with pytest.raises(ValueError, match="128x84 is not a tile of the fp8_wgrad kernel"):
        bad.plan_checks()


# --- manifests and prewarm ----------------------------------------------------------------------
TRAINING = {"wgrad": {"mn": [[2112, 7168], [7168, 2049]], "k": [4096, 8192]},
            "k_grouped": [{"groups": 4, "m": 4096, "n": 7168, "k_per_group": 8192}]}


def test_the_training_sections_become_weight_gradient_problems():
    problems = manifest.problems(TRAINING)
    assert {(p.kind, p.m, p.n, p.k, p.num_groups) for p in problems} == {
        ("fp8_gemm_nt_wgrad", 2112, 7168, 4096, 1), ("fp8_gemm_nt_wgrad", 2112, 7168, 8192, 1),
        ("fp8_gemm_nt_wgrad", 7168, 2049, 4096, 1), ("fp8_gemm_nt_wgrad", 7168, 2049, 8192, 1),
        ("k_grouped_fp8_gemm_nt_contiguous", 4096, 7168, 8192, 4)}
    # At most one kernel per (M, N) and group count: K does not split them.
    specs = manifest.specs_for(problems, 132, "sm_90a")
    assert {s.kernel for s in specs} == {hopper_wgrad.NAME}
    assert len(specs) <= len({(p.m, p.n, p.num_groups) for p in problems})


@pytest.mark.parametrize("bad, match", [
    ({"wgrad": [[1, 2]]}, r'"wgrad" must be an object'),
    ({"wgrad": {"mn": [[2112, 7168]]}}, r"no token counts"),
    ({"wgrad": {"mn": [[2112]], "k": [4096]}}, r"wgrad.mn\[0\] must be \[m, n\]"),
    ({"wgrad": {"mn": [[2112, 7168]], "k": [4000]}}, r"multiples of 128; got 4000"),
    ({"k_grouped": [{"groups": 4, "m": 4096, "n": 7168}]}, r"k_grouped\[0\] must be an object "
                                                            r"with groups, m, n, k_per_group"),
    ({"k_grouped": {"groups": 4}}, r'"k_grouped" must be a list of objects')])
def test_malformed_training_sections_are_refused_with_the_fix(bad, match):
    with pytest.raises(manifest.ManifestError, match=match):
        manifest.problems(bad)


@pytest.mark.parametrize("portable", [False, True])
def test_a_cpu_only_prewarm_compiles_the_training_kernels(portable, tmp_path, capsys,
                                                          fresh_dgemm_cache, monkeypatch):
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "training.json"
    path.write_text(json.dumps(TRAINING))
    argv = ["--manifest", str(path), "--jobs", "4", "--json", "--no-progress"]
    code = prewarm.main(argv + (["--portable"] if portable else []))
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    expected = manifest.specs_for(manifest.problems(TRAINING), 132, "sm_90a",
                                  family="fp8_gemm_portable" if portable else None)
    assert {s.kernel for s in expected} == {portable_wgrad.NAME if portable
                                            else hopper_wgrad.NAME}
    assert (report["specs_total"], report["compiled"], report["failed"]) == (
        len(expected), len(expected), 0)
    assert len(list(fresh_dgemm_cache.rglob("*.kbin"))) == len(expected)


def test_warmup_plans_the_training_kernels_by_manifest_and_by_kind():
    from dgemm import warm
    planned = warm.plan(manifest=TRAINING, num_sms=132, arch="sm_90a")
    assert planned == manifest.specs_for(manifest.problems(TRAINING), 132, "sm_90a")
    by_kind = warm.plan("fp8_gemm_nt_wgrad", m=[4096], n=7168, k=4096, num_sms=132,
                        arch="sm_90a")
    assert list(by_kind) == [select("fp8_gemm_nt_wgrad", 4096, 7168, 4096)]


def _nvdisasm():
    import shutil
    from pathlib import Path
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia.cu13
        candidate = Path(list(nvidia.cu13.__path__)[0]) / "bin" / "nvdisasm"
        return str(candidate) if candidate.is_file() else None
    except Exception:
        return None


@pytest.mark.parametrize("name", COMPILERS)
def test_the_hopper_wgrad_cubin_runs_fp8_wgmma_not_the_trap_stub(name, cubins, tmp_path):
    """The kernel body is guarded by the sm_90a feature macro; compiled without it the kernel
    would be one trap instruction. Its SASS must hold the FP8 warpgroup MMA (QGMMA), the TMA
    loads (UTMALDG), the reduce epilogue's TMA additions (UTMAREDG) and the register hand-over
    (USETMAXREG)."""
    import subprocess
    tool = _nvdisasm()
    if tool is None:
        pytest.skip("nvdisasm not found (CUDA toolkit bin/ or the nvidia-cuda-nvdisasm wheel)")
    spec = SPECS[0]
    assert spec.kernel == hopper_wgrad.NAME
    path = tmp_path / "wgrad.cubin"
    path.write_bytes(cubins[spec, name][0])
    sass = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=120,
                          check=True).stdout
    for instruction in ("QGMMA", "UTMALDG", "UTMAREDG", "USETMAXREG", "SYNCS"):
        assert instruction in sass, instruction
