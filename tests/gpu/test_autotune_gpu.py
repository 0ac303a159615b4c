"""Autotuning on the GPU (DGEMM_AUTOTUNE=1): the first call of a shape class times the cost
model's best candidates with the real timer, runs a valid kernel that matches the reference, and
a second process reuses the decision without timing anything.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import dgemm
import dgemm.jit
from dgemm.autotune import classes, shape_class
from dgemm.jit import env
from dgemm.kernels import loader
from dgemm import heuristics

from helpers import (DIFF_BAR, calc_diff_rows, poisoned, random_contiguous, random_dense,
                     random_masked, unwritten_count)

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="needs an sm_90 (Hopper) GPU")


@pytest.fixture(autouse=True)
def autotune_on(monkeypatch):
    monkeypatch.setenv("DGEMM_AUTOTUNE", "1")


def candidates_of(kind, m, n, k, groups=1):
    cls = shape_class(kind, m, n, k, groups, dgemm.get_num_sms(), "sm_90a")
    return classes.candidates(cls, env.autotune_top_k())


def chosen_spec(kind, m, n, k, groups=1):
    from dgemm.gemm import choose_spec
    return choose_spec(kind, m, n, k, groups, dgemm.get_num_sms(), "sm_90a", 0)


@pytest.mark.parametrize("m,n,k", [(64, 2112, 7168), (128, 4096, 7168), (4096, 7168, 2048),
                                   (1000, 576, 7168)])
def test_dense_tuning_picks_a_candidate_and_matches_the_reference(m, n, k):
    case = random_dense(m, n, k)
    d = poisoned(m, n)
    dgemm.fp8_gemm_nt(case.a, case.b, d)
    assert unwritten_count(d) == 0
    diff = dgemm.calc_diff(d, case.ref)
    counters = dgemm.jit.stats()
    spec = chosen_spec("fp8_gemm_nt", m, n, k)
    print(f"autotune {m:>6} {n:>6} {k:>6} {spec.block_m}x{spec.block_n} x"
          f"{spec.num_tma_multicast} diff {diff:.1e} timings {counters['autotune_timings']}")
    assert diff < DIFF_BAR, f"{m}x{n}x{k}: diff {diff}"
    assert counters["autotune_timings"] == 1 and counters["autotune_fallbacks"] == 0
    assert spec in candidates_of("fp8_gemm_nt", m, n, k)


def test_contiguous_tuning_matches_the_reference():
    case = random_contiguous([1000, 700, 1200, 896], 4096, 7168)
    d = poisoned(*case.ref.shape)
    dgemm.m_grouped_fp8_gemm_nt_contiguous(case.a, case.b, d, case.m_indices)
    assert calc_diff_rows(d, case.ref, case.valid) < DIFF_BAR
    assert dgemm.jit.stats()["autotune_timings"] == 1


def test_masked_tuning_matches_the_reference():
    case = random_masked([100, 30, 160, 128], 256, 4096, 7168)
    d = poisoned(4, 256, 4096)
    dgemm.m_grouped_fp8_gemm_nt_masked(case.a, case.b, d, case.masked_m, 128)
    for g, rows in enumerate(case.masked_m.tolist()):
        diff = dgemm.calc_diff(d[g, :rows], case.ref[g, :rows])
        assert diff < DIFF_BAR, f"group {g}: diff {diff}"
    assert dgemm.jit.stats()["autotune_timings"] == 1


def test_a_second_process_reuses_the_decision_with_zero_timings(fresh_dgemm_cache):
    case = random_dense(128, 4096, 7168)
    dgemm.fp8_gemm_nt(case.a, case.b)
    assert dgemm.jit.stats()["autotune_timings"] == 1
    first = chosen_spec("fp8_gemm_nt", 128, 4096, 7168)
    code = ("import json, torch, dgemm, dgemm.jit\n"
            "from bench.inputs import random_dense\n"
            "case = random_dense(128, 4096, 7168)\n"
            "d = dgemm.fp8_gemm_nt(case.a, case.b)\n"
            "from dgemm.gemm import choose_spec\n"
            "spec = choose_spec('fp8_gemm_nt', 128, 4096, 7168, 1, dgemm.get_num_sms(), "
            "'sm_90a', 0)\n"
            "print(json.dumps({'stats': dgemm.jit.stats(), 'spec': spec.to_json(),"
            " 'diff': dgemm.calc_diff(d, case.ref)}))\n")
    environment = dict(os.environ, PYTHONPATH=str(REPO), DGEMM_AUTOTUNE="1")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["stats"]["autotune_timings"] == 0
    assert report["stats"]["decision_disk_hits"] == 1
    assert report["spec"] == first.to_json() and report["diff"] < DIFF_BAR


def test_capture_times_nothing_and_replays_correctly():
    case = random_dense(256, 2112, 7168)
    d = torch.empty(256, 2112, dtype=torch.bfloat16, device="cuda")
    heuristic = heuristics.select("fp8_gemm_nt", 256, 2112, 7168, 1, dgemm.get_num_sms())
    a = (case.a[0], dgemm.get_mn_major_tma_aligned_tensor(case.a[1]))
    dgemm.jit.state.reset()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with_heuristic = loader.get_kernel(heuristic)    # loaded before capture
        assert with_heuristic is not None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            dgemm.fp8_gemm_nt(a, case.b, d)
    graph.replay()
    torch.cuda.synchronize()
    assert dgemm.jit.stats()["autotune_timings"] == 0
    assert dgemm.calc_diff(d, case.ref) < DIFF_BAR
