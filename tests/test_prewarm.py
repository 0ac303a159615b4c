"""The prewarm job: manifest -> deduped specs -> compiled once into the local cache.

Compiles use conftest's `test_kernels` (the trivial stand-ins from tests/data/csrc, same
template parameters as the real kernels) so each takes a fraction of a second.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dgemm.jobs import manifest, prewarm
from redis_server import redis_server  # noqa: F401  (fixture: a real redis-server)

# 8 problems. N is compile-time, so the two N give at least two specs (the shard test needs
# two) whatever tiles the heuristics pick; the four small M share tiles, so fewer than 8 specs.
SMALL_MANIFEST = {"dense": {"m": [1, 32, 65, 128], "nk": [[256, 512], [512, 512]]}}


@pytest.fixture
def cache(fresh_dgemm_cache, test_kernels, monkeypatch) -> Path:
    """conftest's empty cache dir, compiling the trivial test kernels, no torchrun shard."""
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    return fresh_dgemm_cache


@pytest.fixture
def small_manifest(tmp_path) -> Path:
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(SMALL_MANIFEST))
    return path


def run_prewarm(capsys, *argv: str) -> tuple[int, dict]:
    code = prewarm.main([*argv, "--json", "--no-progress"])
    return code, json.loads(capsys.readouterr().out)


def unique_specs(manifest_dict: dict) -> dict:
    return manifest.specs_for(manifest.problems(manifest_dict), num_sms=132, arch="sm_90a")


# --- enumerating specs (no compiles) ------------------------------------------------------------
def test_dense_problems_that_share_a_spec_are_deduped():
    specs = unique_specs(SMALL_MANIFEST)
    assert sum(len(served) for served in specs.values()) == 8
    assert 2 <= len(specs) < 8


def test_m_range_adds_every_listed_m_to_the_dense_shapes():
    problems = manifest.problems(SMALL_MANIFEST, manifest.parse_m_range("2-4,1000-3000:1000"))
    every_m = [1, 2, 3, 4, 32, 65, 128, 1000, 2000, 3000]
    assert sorted(p.m for p in problems) == sorted(every_m * 2)     # once per (n, k)


def test_grouped_entries_become_problems_with_their_group_count():
    problems = manifest.problems({
        "grouped_contiguous": [{"groups": 4, "m_per_group": 256, "n": 4096, "k": 7168}],
        "grouped_masked": [{"groups": 2, "expected_m": 512, "max_m": 4096, "n": 7168,
                            "k": 2048}]})
    assert problems == [
        manifest.Problem("m_grouped_fp8_gemm_nt_contiguous", 1024, 4096, 7168, 4),
        manifest.Problem("m_grouped_fp8_gemm_nt_masked", 512, 7168, 2048, 2)]


def test_contiguous_spread_adds_every_reachable_total_m():
    # 2 groups of 140..260 rows, each padded to 256 or 384: totals 512..768 in steps of 128,
    # plus the nominal 2 * 200.
    assert manifest.contiguous_total_ms(2, 200, 0.3) == [400, 512, 640, 768]
    assert manifest.contiguous_total_ms(2, 200, 0.0) == [400, 512]


def test_the_deepseek_v3_preset_covers_every_kind_forward_and_weight_gradient():
    problems = manifest.problems(manifest.load_preset("deepseek_v3"))
    assert {p.kind for p in problems} == {
        "fp8_gemm_nt", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked",
        "fp8_gemm_nt_wgrad", "k_grouped_fp8_gemm_nt_contiguous"}


def test_a_malformed_manifest_is_rejected_with_exit_code_2(tmp_path, capsys, cache):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dense": {"m": [64], "nk": [[2112]]}}))
    assert prewarm.main(["--manifest", str(bad), "--no-progress"]) == 2
    assert "dense.nk[0] must be [n, k]" in capsys.readouterr().err


def test_shard_defaults_to_torchrun_rank_and_world_size():
    assert prewarm.shard_from_env({"RANK": "3", "WORLD_SIZE": "8"}) == (3, 8)
    assert prewarm.shard_from_env({}) == (0, 1)


def test_default_jobs_share_the_cpus_among_the_ranks_of_a_node():
    alone = prewarm.default_jobs({})
    assert prewarm.default_jobs({"LOCAL_WORLD_SIZE": str(alone * 4)}) == 1
    assert prewarm.default_jobs({"LOCAL_WORLD_SIZE": "1"}) == alone >= 1


# --- compiling ------------------------------------------------------------------------------------
def test_prewarm_compiles_each_unique_spec_once(capsys, cache, small_manifest):
    code, report = run_prewarm(capsys, "--manifest", str(small_manifest), "--jobs", "2")
    expected = len(unique_specs(SMALL_MANIFEST))
    assert code == 0
    assert (report["specs_total"], report["compiled"], report["failed"]) == (expected, expected, 0)
    assert len({k["key"] for k in report["kernels"]}) == expected
    assert len(list(cache.rglob("*.kbin"))) == expected


def test_a_second_prewarm_run_compiles_nothing(capsys, cache, small_manifest):
    run_prewarm(capsys, "--manifest", str(small_manifest), "--jobs", "1")
    code, report = run_prewarm(capsys, "--manifest", str(small_manifest), "--jobs", "1")
    assert code == 0
    assert report["compiled"] == 0
    assert report["already_cached"] == report["specs_total"] > 0


def test_shards_compile_disjoint_specs_that_together_cover_all(capsys, cache, small_manifest):
    keys = []
    for shard in ("0/2", "1/2"):
        code, report = run_prewarm(capsys, "--manifest", str(small_manifest), "--shard", shard,
                                   "--jobs", "1")
        assert code == 0 and report["already_cached"] == 0
        keys.append({k["key"] for k in report["kernels"]})
    assert keys[0] and keys[1] and not keys[0] & keys[1]
    assert len(keys[0] | keys[1]) == len(unique_specs(SMALL_MANIFEST))


def test_prewarm_exits_1_and_reports_the_compiler_log_when_a_kernel_fails(
        tmp_path, capsys, cache, small_manifest, test_kernels, monkeypatch):
    broken = tmp_path / "csrc"
    shutil.copytree(test_kernels, broken)
    header = broken / "dgemm" / "fp8_gemm.cuh"
    header.write_text(header.read_text() + "\nthis_is_not_cuda;\n")
    monkeypatch.setenv("DGEMM_CSRC_DIR", str(broken))
    code, report = run_prewarm(capsys, "--manifest", str(small_manifest), "--jobs", "1")
    assert code == 1
    assert report["failed"] == report["specs_total"] and report["compiled"] == 0
    assert all("this_is_not_cuda" in k["error"] for k in report["kernels"])


# --- with the remote tier -------------------------------------------------------------------------
def test_a_second_node_downloads_what_the_first_node_prewarmed_into_redis(
        capsys, cache, small_manifest, redis_server, monkeypatch, tmp_path):
    monkeypatch.setenv("DGEMM_REMOTE_CACHE", redis_server.url)
    code, first = run_prewarm(capsys, "--manifest", str(small_manifest), "--jobs", "2")
    assert code == 0 and first["compiled"] == first["specs_total"] > 0
    monkeypatch.setenv("DGEMM_CACHE_DIR", str(tmp_path / "other-node"))
    code, second = run_prewarm(capsys, "--manifest", str(small_manifest), "--jobs", "2")
    assert code == 0
    assert (second["compiled"], second["downloaded"]) == (0, second["specs_total"])
