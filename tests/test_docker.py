"""docker/: what the images promise, checked without Docker (CI has no daemon, so the image is
never built here): the Dockerfile and the compose file are parsed, and the prewarm entrypoint
(docker/prewarm_entrypoint.py, `dgemm-prewarm` in the image) is run for real on the CPU.

- not root: the final stage ends with a numeric, non-root USER that owns the cache directory,
  and no compose service switches back to root;
- no source tree: a builder stage builds the wheel; the final stage takes only that wheel from it
  and copies nothing of the repository but the entrypoint;
- CUDA once: the final base image is a CUDA `base` image (no toolkit libraries), torch's wheels
  bring CUDA;
- SM counts: the compose prewarm job gets them from DGEMM_PREWARM_NUM_SMS (it has no GPU), and
  the entrypoint prewarms each one.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "docker" / "Dockerfile"
COMPOSE = REPO / "docker" / "docker-compose.yml"
ENTRYPOINT = REPO / "docker" / "prewarm_entrypoint.py"
ENTRYPOINT_IN_IMAGE = "/usr/local/bin/dgemm-prewarm"


# --- the Dockerfile, as stages of (instruction, arguments) ---------------------------------------
def dockerfile_stages(text: str) -> list:
    """[{'from': image, 'name': alias, 'steps': [(INSTRUCTION, arguments)]}], with continuation
    lines joined, comments dropped and ${ARG} replaced by the ARG's default."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines()
                                             if not line.lstrip().startswith("#")))
    defaults, stages = {}, []
    for line in filter(None, (line.strip() for line in joined.splitlines())):
        instruction, _, arguments = line.partition(" ")
        instruction = instruction.upper()
        arguments = _substitute(arguments.strip(), defaults)
        if instruction == "ARG":
            name, _, default = arguments.partition("=")
            defaults.setdefault(name, default)
        elif instruction == "FROM":
            image, _, alias = arguments.partition(" AS ")
            stages.append({"from": image.strip(), "name": alias.strip() or None, "steps": []})
        elif stages:
            stages[-1]["steps"].append((instruction, arguments))
    return stages


def _substitute(text: str, defaults: dict) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), text)


@pytest.fixture(scope="module")
def stages() -> list:
    return dockerfile_stages(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def final(stages) -> dict:
    return stages[-1]


def steps(stage: dict, instruction: str) -> list:
    return [arguments for name, arguments in stage["steps"] if name == instruction]


def image_user(stage: dict) -> str:
    users = steps(stage, "USER")
    assert users, "the final stage sets no USER: the image would run as root"
    return users[-1]


def test_the_image_runs_as_a_fixed_numeric_non_root_user(final):
    uid, _, gid = image_user(final).partition(":")
    # Numeric, so Kubernetes' runAsNonRoot can check it without the image's /etc/passwd.
    assert uid.isdigit() and int(uid) != 0, f"USER {image_user(final)!r}"
    assert not gid or (gid.isdigit() and int(gid) != 0)
    creates_user = " ".join(steps(final, "RUN"))
    assert f"useradd --uid {uid}" in creates_user


def test_the_cache_dir_belongs_to_the_image_user_and_is_private(final):
    uid = image_user(final).partition(":")[0]
    (cache_dir,) = [value for arguments in steps(final, "ENV")
                    for name, value in re.findall(r"(\w+)=(\S+)", arguments)
                    if name == "DGEMM_CACHE_DIR"]
    creating = [run for run in steps(final, "RUN") if cache_dir in run]
    assert creating, f"no RUN creates {cache_dir}"
    assert any(f"-o {uid}" in run and "-m 0700" in run for run in creating), creating


def test_a_builder_stage_builds_the_wheel_from_the_source_tree(stages):
    assert len(stages) >= 2
    builder = stages[0]
    assert builder["name"] and builder is not stages[-1]
    assert any("pip wheel" in run for run in steps(builder, "RUN"))


def test_the_final_stage_installs_only_the_builders_wheel(stages, final):
    builder = stages[0]["name"]
    assert not steps(final, "ADD")
    from_builder = [a for a in steps(final, "RUN") + steps(final, "COPY")
                    if f"from={builder}" in a]
    assert from_builder, "the final stage takes nothing from the builder"
    assert all("/dist" in a for a in from_builder), from_builder
    installs = [run for run in steps(final, "RUN") if "pip install" in run and "dgemm" in run]
    assert installs and all(".whl" in run and " -e " not in run for run in installs), installs


def test_the_final_stage_copies_nothing_of_the_repository_but_the_entrypoint(final):
    for arguments in steps(final, "COPY"):
        words = [w for w in shlex.split(arguments) if not w.startswith("--")]
        sources, destination = words[:-1], words[-1]
        assert sources == ["docker/prewarm_entrypoint.py"], arguments
        assert destination == ENTRYPOINT_IN_IMAGE


def test_cuda_comes_once_from_torchs_wheels_not_also_from_a_runtime_base_image(stages):
    for stage in stages:
        # nvidia/cuda:<version>-base-<os> carries no toolkit libraries; -runtime/-devel would
        # add a second CUDA next to the one torch's wheels install.
        assert re.fullmatch(r"nvidia/cuda:[\d.]+-base-ubuntu[\d.]+", stage["from"]), stage["from"]


# --- the compose file -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def dgemm_services(compose: dict) -> dict:
    return {name: service for name, service in compose["services"].items()
            if "build" in service or str(service.get("image", "")).startswith("dgemm")}


def test_no_compose_service_runs_dgemm_as_root(compose):
    services = dgemm_services(compose)
    assert {"prewarm", "trainer", "gc"} <= set(services)
    for name, service in services.items():
        user = str(service.get("user", "")).partition(":")[0]
        assert user not in ("0", "root"), f"service {name} runs as root"


def test_compose_mounts_the_cache_volumes_where_the_image_keeps_its_cache(compose, final):
    (cache_dir,) = [value for arguments in steps(final, "ENV")
                    for name, value in re.findall(r"(\w+)=(\S+)", arguments)
                    if name == "DGEMM_CACHE_DIR"]
    for name, service in dgemm_services(compose).items():
        assert service["environment"]["DGEMM_CACHE_DIR"] == cache_dir, name
        assert any(volume.endswith(":" + cache_dir) for volume in service["volumes"]), name


def test_the_compose_prewarm_job_takes_its_sm_counts_from_the_environment(compose):
    prewarm = compose["services"]["prewarm"]
    command = prewarm["command"]
    assert command[0] == Path(ENTRYPOINT_IN_IMAGE).name
    assert "--num-sms" not in command
    assert re.fullmatch(r"\$\{DGEMM_PREWARM_NUM_SMS:-[\d,]+\}",
                        prewarm["environment"]["DGEMM_PREWARM_NUM_SMS"])
    assert "deploy" not in prewarm, "the prewarm job needs no GPU"


# --- the entrypoint, run for real on the CPU ---------------------------------------------------
MANIFEST = {"dense": {"m": [128], "nk": [[512, 7168], [1024, 7168]]}}


def run_entrypoint(*arguments: str, env: dict, timeout: float = 120):
    environment = dict(os.environ, PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, str(ENTRYPOINT), *arguments], cwd=REPO,
                          env=environment, capture_output=True, text=True, timeout=timeout)


def test_the_entrypoint_prewarms_every_sm_count_of_the_list(fresh_dgemm_cache, test_kernels,
                                                            tmp_path):
    from dgemm.jobs import manifest
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(MANIFEST))
    result = run_entrypoint("--manifest", str(shapes), "--no-progress", "--jobs", "1",
                            env={"DGEMM_PREWARM_NUM_SMS": "132, 114,132"})
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("dgemm-prewarm: dgemm-cache prewarm") == 2   # 132 once
    problems = manifest.problems(MANIFEST)
    expected = (set(manifest.specs_for(problems, 132, "sm_90a"))
                | set(manifest.specs_for(problems, 114, "sm_90a")))
    assert len(list(fresh_dgemm_cache.rglob("*.kbin"))) == len(expected) == 4


@pytest.mark.parametrize("variable, arguments, message", [
    ("132,abc", (), "DGEMM_PREWARM_NUM_SMS='132,abc': expected a comma-separated list"),
    ("0", (), "DGEMM_PREWARM_NUM_SMS='0': expected a comma-separated list"),
    ("132", ("--num-sms", "132"), "do not pass --num-sms to dgemm-prewarm"),
])
def test_the_entrypoint_refuses_bad_sm_counts_with_exit_2(variable, arguments, message):
    result = run_entrypoint("--preset", "deepseek_v3", *arguments,
                            env={"DGEMM_PREWARM_NUM_SMS": variable}, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_the_entrypoint_without_a_gpu_or_a_list_says_what_to_set():
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the entrypoint takes the SM count from it")
    result = run_entrypoint("--preset", "deepseek_v3", env={}, timeout=60)
    assert result.returncode == 2
    assert "no GPU visible and DGEMM_PREWARM_NUM_SMS is unset: set it" in result.stderr
