"""Warm-up benchmark: vLLM's full DeepGEMM warm-up of DeepSeek-V3's FP8 layers, cold and warm,
for dgemm and for DeepGEMM 54e2261 on the same machine (issue 13 item 5).

    python -m bench.bench_warmup [--max-m 16384 | --quick] [--only PHASE,...] [--json F]

The workload (`bench.warmup_sweep`): every M in 1..max_m through `fp8_gemm_nt` for each dense
layer of the preset, and the contiguous grouped GEMM over every multiple of 128 rows up to
max_m x top-k + experts x 127 for each MoE weight, vLLM's calls with vLLM's arguments. Each
phase runs in a fresh process with its own cache directory under --work-dir and is timed from
the first call to a `torch.cuda.synchronize()` after the last (imports and buffers not
counted; they are reported beside). Phases, in this order:

    dgemm-cold        dgemm (`python -m dgemm.compat`: `import deep_gemm` is dgemm's module)
                      on an empty cache: it compiles each kernel when a call first needs it
    prewarm           `dgemm-cache prewarm` on this machine's CPUs from the same calls as a
                      manifest (--arch, --num-sms of this GPU), into an empty cache; no GPU
    dgemm-prewarmed   dgemm on the cache prewarm filled: loads from disk, compiles nothing
    dgemm-warm        dgemm again in a new process, on dgemm-cold's cache
    deepgemm-cold     DeepGEMM on an empty DG_JIT_CACHE_DIR (`import deep_gemm` must find it:
                      `source <(bash .anchors/setup_deepgemm.sh)`)
    deepgemm-warm     DeepGEMM again in a new process, on deepgemm-cold's cache

"kernels compiled" is dgemm's own counter (`dgemm.jit.stats()["compiles"]`) and, for DeepGEMM,
the kernel directories its JIT added to its cache. With --second-pass (default) each sweep
phase sweeps a second time in the same process, every kernel loaded: the floor of the sweep
(its GEMMs and per-call costs), so warm-up cost = first pass - second pass.

Each phase has a time limit (--timeout; --budget caps the whole run): a phase that reaches it
is stopped and reported with what it finished (calls enqueued, kernels compiled). The table
goes to stdout and, with --json, everything to a file after every phase; --append adds this
run's phases to an existing --json of the same workload (e.g. DeepGEMM's phases run once it is
built). Exit status: 0 when every phase ran to the end or was skipped, 1 when one failed or
was stopped, 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from dgemm.jobs.prewarm import positive_int

from .warmup_sweep import Workload, deepgemm_kernels, dgemm_entries, kernels_in_cache

REPO = Path(__file__).resolve().parent.parent
QUICK_MAX_M = 2048
DEFAULT_TIMEOUT_S = 600.0
MIN_PHASE_S = 10.0              # with less of --budget left a phase is skipped, not started
KILL_GRACE_S = 5.0


class UsageError(Exception):
    """Arguments or files the run cannot use; main() prints it and exits 2."""


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str
    library: str                # "dgemm", "deepgemm" or "prewarm"
    cache: str                  # its cache directory, a name under --work-dir
    fresh: bool                 # emptied first (else it must hold the earlier phase's kernels)
    after: str = ""             # the phase that fills `cache` when not fresh


PHASES = (
    Phase("dgemm-cold", "dgemm", "dgemm-cold", True),
    Phase("prewarm", "prewarm", "dgemm-prewarmed", True),
    Phase("dgemm-prewarmed", "dgemm", "dgemm-prewarmed", False, "prewarm"),
    Phase("dgemm-warm", "dgemm", "dgemm-cold", False, "dgemm-cold"),
    Phase("deepgemm-cold", "deepgemm", "deepgemm", True),
    Phase("deepgemm-warm", "deepgemm", "deepgemm", False, "deepgemm-cold"),
)
PHASE_NAMES = tuple(p.name for p in PHASES)


# --- command line -------------------------------------------------------------------------------
def parse_args(argv: Optional[list] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_warmup", description=__doc__.split("\n\n")[0],
        epilog="phases: " + ", ".join(PHASE_NAMES))
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--max-m", type=positive_int, default=16384, metavar="M",
                      help="largest number of tokens, vLLM's max_num_batched_tokens "
                           "(default 16384)")
    size.add_argument("--quick", action="store_const", const=QUICK_MAX_M, dest="max_m",
                      help=f"--max-m {QUICK_MAX_M}")
    parser.add_argument("--preset", default="deepseek_v3",
                        help="shape preset whose layers are warmed up (default deepseek_v3)")
    parser.add_argument("--experts", type=positive_int, default=32,
                        help="local experts of each MoE weight (default 32: DeepSeek-V3's 256 "
                             "over 8 ranks); must divide 128")
    parser.add_argument("--topk", type=positive_int, default=8,
                        help="experts per token (default 8, DeepSeek-V3's)")
    parser.add_argument("--only", type=_phases, default=PHASE_NAMES, metavar="PHASE,...",
                        help="run these phases, in the order above (default: all)")
    parser.add_argument("--timeout", action="append", default=[], metavar="[PHASE=]SECONDS",
                        help=f"time limit of every phase, or of one (repeatable; default "
                             f"{DEFAULT_TIMEOUT_S:.0f} s each)")
    parser.add_argument("--budget", type=_positive_float, default=None, metavar="SECONDS",
                        help="wall limit of the whole run: a phase gets at most what is left "
                             "and is skipped when under 10 s is left")
    parser.add_argument("--second-pass", action=argparse.BooleanOptionalAction, default=True,
                        help="time a second sweep in each sweep phase's process (default on)")
    parser.add_argument("--num-sms", type=positive_int, default=None,
                        help="prewarm's --num-sms (default: this GPU's)")
    parser.add_argument("--arch", default="sm_90a", help="prewarm's --arch (default sm_90a)")
    parser.add_argument("--jobs", type=positive_int, default=None,
                        help="prewarm's --jobs (default: its own, every CPU)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/dgemm-warmup-bench"),
                        help="where the phases' caches and logs go (default "
                             "/tmp/dgemm-warmup-bench)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--append", action="store_true",
                        help="add to the results already in --json (same workload)")
    args = parser.parse_args(argv)
    try:
        args.timeouts = _timeouts(args.timeout)
        args.workload = Workload.from_preset(args.preset, args.max_m, args.experts, args.topk)
    except ValueError as error:      # ManifestError (unknown preset) is one too
        parser.error(str(error))
    if args.append and args.json is None:
        parser.error("--append needs --json (the file to add to)")
    return args


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds; got {text!r}")
    return value


def _phases(text: str) -> tuple:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PHASE_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown phase {', '.join(unknown) or '(none)'}; "
                                         f"expected some of {', '.join(PHASE_NAMES)}")
    return tuple(name for name in PHASE_NAMES if name in names)


def _timeouts(values: list) -> dict:
    """['300', 'deepgemm-cold=500'] -> {phase: seconds} for every phase."""
    timeouts = dict.fromkeys(PHASE_NAMES, DEFAULT_TIMEOUT_S)
    for value in values:
        name, _, seconds = value.rpartition("=")
        if name and name not in PHASE_NAMES:
            raise ValueError(f"--timeout {value}: unknown phase {name!r}; expected one of "
                             f"{', '.join(PHASE_NAMES)}")
        try:
            limit = _positive_float(seconds)
        except argparse.ArgumentTypeError as error:
            raise ValueError(f"--timeout {value}: {error}") from None
        for phase in ([name] if name else PHASE_NAMES):
            timeouts[phase] = limit
    return timeouts


# --- one child process --------------------------------------------------------------------------
@dataclasses.dataclass
class Child:
    returncode: Optional[int]
    timed_out: bool
    wall_s: float


def run_child(command: list, env: dict, timeout: float, log_path: Path,
              stdout_path: Optional[Path] = None) -> Child:
    """Run `command` in its own process group (output to `log_path`, stdout to `stdout_path`
    when given); at `timeout` seconds stop the group (SIGTERM, then SIGKILL after a grace) so
    that its compilers go too."""
    started = time.perf_counter()
    with open(log_path, "wb") as log, \
            open(stdout_path or os.devnull, "wb") as stdout:
        process = subprocess.Popen(command, env=env, cwd=REPO, stdin=subprocess.DEVNULL,
                                   stdout=stdout if stdout_path else log, stderr=log,
                                   start_new_session=True)
        try:
            returncode = process.wait(timeout=timeout)
            return Child(returncode, False, time.perf_counter() - started)
        except subprocess.TimeoutExpired:
            _stop_group(process)
            return Child(process.returncode, True, time.perf_counter() - started)
        except BaseException:           # Ctrl-C of the bench: leave no phase running
            _stop_group(process)
            raise


def _stop_group(process: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def log_tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def last_progress(path: Path) -> dict:
    """The last complete JSON line of a progress file ({} when none)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            return json.loads(line)
        except ValueError:
            continue                    # a line cut by the stop
    return {}


# --- the phases ---------------------------------------------------------------------------------
def child_env(phase: Phase, cache_dir: Path) -> dict:
    """This process's environment for a phase's process: its cache directory, dgemm's remote
    tier off (the phases compare local caches), and for DeepGEMM no start-up hook of
    `python -m dgemm.compat` (its `import deep_gemm` must find the real one)."""
    env = dict(os.environ)
    env.pop("DGEMM_REMOTE_CACHE", None)
    env["PYTHONUNBUFFERED"] = "1"
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if phase.library == "deepgemm":
        site = str(REPO / "dgemm" / "compat" / "site")
        paths = [p for p in paths if os.path.abspath(p) != site]
        env["DG_JIT_CACHE_DIR"] = str(cache_dir)
    else:
        env["DGEMM_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *[p for p in paths if p != str(REPO)]])
    return env


def sweep_command(phase: Phase, workload: Workload, phase_dir: Path, second_pass: bool) -> list:
    command = [sys.executable, "-m", "bench.warmup_sweep", "--library", phase.library,
               "--workload", json.dumps(workload.to_json()),
               "--progress", str(phase_dir / "progress.jsonl"),
               "--result", str(phase_dir / "result.json")]
    if second_pass:
        command.append("--second-pass")
    if phase.library == "dgemm":
        command = [sys.executable, "-m", "dgemm.compat", *command]
    return command


def run_sweep_phase(phase: Phase, args, phase_dir: Path, cache_dir: Path,
                    timeout: float) -> dict:
    command = sweep_command(phase, args.workload, phase_dir, args.second_pass)
    child = run_child(command, child_env(phase, cache_dir), timeout, phase_dir / "log.txt")
    return sweep_record(phase, child, phase_dir, cache_dir, args.workload.calls()["total"],
                        timeout)


def sweep_record(phase: Phase, child: Child, phase_dir: Path, cache_dir: Path,
                 calls_total: int, timeout: float) -> dict:
    """What a sweep phase did, from its result file, or from its last progress line when it
    was stopped or failed."""
    record = {"library": phase.library, "timeout_s": timeout, "wall_s": round(child.wall_s, 3),
              "calls_total": calls_total}
    try:
        result = json.loads((phase_dir / "result.json").read_text())
    except (OSError, ValueError):
        result = None
    if result is not None:
        record.update(result)
        record["calls_done"] = result["calls"]
        record["status"] = "ok" if child.returncode == 0 else (
            "timeout" if child.timed_out else "failed")
        if record["status"] != "ok":     # the first pass finished; the second did not
            record["note"] = "second pass not finished"
    else:
        progress = last_progress(phase_dir / "progress.jsonl")
        record["status"] = "timeout" if child.timed_out else "failed"
        record["calls_done"] = progress.get("calls", 0)
        record["seconds"] = progress.get("seconds")
        record["kernels_compiled"] = progress.get("kernels")
        record["at"] = progress.get("at")
        record["kernels_in_cache"] = kernels_in_cache(phase.library, cache_dir)
        if phase.library == "deepgemm":
            record["kernels_by_name"] = deepgemm_kernels(cache_dir)
    if record["status"] == "failed":
        record["returncode"] = child.returncode
        record["error"] = log_tail(phase_dir / "log.txt")
    return record


def run_prewarm_phase(phase: Phase, args, phase_dir: Path, cache_dir: Path,
                      timeout: float) -> dict:
    """`dgemm-cache prewarm` of the sweep's calls (a manifest with --contiguous-spread 0)."""
    manifest = phase_dir / "manifest.json"
    manifest.write_text(json.dumps(args.workload.manifest()))
    command = [sys.executable, "-m", "dgemm.cli", "prewarm", "--manifest", str(manifest),
               "--contiguous-spread", "0", "--arch", args.arch, "--num-sms",
               str(args.num_sms), "--json", "--no-progress"]
    if args.jobs:
        command += ["--jobs", str(args.jobs)]
    child = run_child(command, child_env(phase, cache_dir), timeout, phase_dir / "log.txt",
                      stdout_path=phase_dir / "report.json")
    record = {"library": "prewarm", "timeout_s": timeout, "wall_s": round(child.wall_s, 3),
              "seconds": round(child.wall_s, 3), "arch": args.arch, "num_sms": args.num_sms,
              "kernels_in_cache": dgemm_entries(cache_dir)}
    try:
        report = json.loads((phase_dir / "report.json").read_text())
    except (OSError, ValueError):
        report = None
    if report is not None:
        record.update({name: report[name] for name in (
            "problems", "specs_total", "compiled", "already_cached", "failed", "jobs",
            "compile_seconds") if name in report})
        record["kernels_compiled"] = report.get("compiled")
        record["compile_wall_s"] = report.get("wall_seconds")   # after its planning
    if child.timed_out:
        record["status"] = "timeout"
    elif child.returncode != 0 or report is None:
        record["status"] = "failed"
        record["returncode"] = child.returncode
        record["error"] = log_tail(phase_dir / "log.txt")
    else:
        record["status"] = "ok"
    return record


def run_phases(args, clock=time.monotonic) -> dict:
    """Run the selected phases in order; returns the results (also written to --json after
    every phase)."""
    results = load_existing(args) if args.append else new_results(args)
    started = clock()
    if "prewarm" in args.only and args.num_sms is None:
        args.num_sms = results["device"].get("num_sms") or _gpu_sms()
    for phase in PHASES:
        if phase.name not in args.only:
            continue
        phase_dir = args.work_dir / "phases" / phase.name
        cache_dir = args.work_dir / "caches" / phase.cache
        left = None if args.budget is None else args.budget - (clock() - started)
        timeout = args.timeouts[phase.name] if left is None else min(
            args.timeouts[phase.name], left)
        if left is not None and left < MIN_PHASE_S:
            record = {"status": "skipped", "note": f"--budget {args.budget:g} s used up"}
        elif not phase.fresh and not kernels_in_cache(_library(phase), cache_dir):
            record = {"status": "skipped",
                      "note": f"needs {phase.after} first (same --work-dir)"}
        else:
            if phase.fresh:
                shutil.rmtree(cache_dir, ignore_errors=True)
            shutil.rmtree(phase_dir, ignore_errors=True)
            phase_dir.mkdir(parents=True)
            # The cache directory itself is left to the library: dgemm creates it 0700.
            cache_dir.parent.mkdir(parents=True, exist_ok=True)
            run = run_prewarm_phase if phase.library == "prewarm" else run_sweep_phase
            record = run(phase, args, phase_dir, cache_dir, timeout)
        results["phases"][phase.name] = record
        if record.get("gpu"):
            results["device"].update(gpu=record["gpu"], num_sms=record["num_sms"])
        print(phase_line(phase.name, record, results["calls"]["total"]), flush=True)
        if args.json:
            write_json(args.json, results)
    return results


def _library(phase: Phase) -> str:
    return "dgemm" if phase.library == "prewarm" else phase.library


def _gpu_sms() -> int:
    import torch
    if not torch.cuda.is_available():
        raise UsageError("the prewarm phase needs --num-sms (no CUDA GPU here to ask)")
    return torch.cuda.get_device_properties(0).multi_processor_count


# --- results ------------------------------------------------------------------------------------
def new_results(args) -> dict:
    return {"bench": "warmup", "workload": args.workload.to_json(),
            "calls": args.workload.calls(), "device": {}, "phases": {}}


def load_existing(args) -> dict:
    """--append: the results in --json, which must be of the same workload."""
    if not args.json.exists():
        return new_results(args)
    try:
        results = json.loads(args.json.read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read {args.json} to append to: {error}") from None
    if not isinstance(results, dict) or results.get("workload") != args.workload.to_json():
        raise UsageError(f"{args.json} holds another workload; use the same --preset, "
                         f"--max-m, --experts and --topk as the run that wrote it, or another "
                         f"--json")
    return results


def write_json(path: Path, results: dict) -> None:
    temp = Path(f"{path}.tmp")
    temp.write_text(json.dumps(results, indent=1))
    os.replace(temp, path)


def phase_line(name: str, record: dict, calls_total: int) -> str:
    """One line per phase as it ends (also the table's rows)."""
    def num(value, fmt):
        width = int(fmt.split(".")[0].rstrip("dfs") or 0)
        return f"{'-':>{width}}" if value is None else format(value, fmt)

    if record["status"] == "skipped":
        return f"{name:<16} skipped  {record.get('note', '')}"
    calls = "-" if record.get("library") == "prewarm" else \
        f"{record.get('calls_done', 0)}/{calls_total}"
    note = record.get("note", "")
    if record.get("library") == "prewarm" and record.get("specs_total") is not None:
        note = (f"{record['specs_total']} specs, {record.get('problems')} calls planned, "
                f"{record.get('jobs')} jobs")
    elif record["status"] == "timeout" and record.get("at"):
        note = f"stopped at {record['at']}"
    elif record["status"] == "failed":
        note = ((record.get("error") or "").splitlines() or [""])[-1][:80]
    return (f"{name:<16} {record['status']:<8} {num(record.get('seconds'), '9.1f')} "
            f"{calls:>13} {num(record.get('kernels_compiled'), '9d')} "
            f"{num(record.get('kernels_in_cache'), '9d')} "
            f"{num(record.get('second_pass_seconds'), '9.1f')}  {note}")


def table(results: dict) -> str:
    w = results["workload"]
    calls = results["calls"]
    device = results["device"]
    lines = [f"vLLM-style full warm-up: preset {w['preset']}, {len(w['dense'])} dense layers x "
             f"M 1..{w['max_m']} + {len(w['grouped'])} MoE weights ({w['experts']} experts, "
             f"top-{w['topk']}) x every 128 rows: {calls['total']} calls "
             f"({calls['dense']} dense, {calls['contiguous']} contiguous)",
             f"GPU: {device.get('gpu', '?')}, {device.get('num_sms', '?')} SMs",
             f"{'phase':<16} {'status':<8} {'warm-up s':>9} {'calls':>13} {'compiled':>9} "
             f"{'in cache':>9} {'2nd pass':>9}  note"]
    for name in PHASE_NAMES:
        if name in results["phases"]:
            lines.append(phase_line(name, results["phases"][name], calls["total"]))
    return "\n".join(lines)


def main(argv: Optional[list] = None) -> int:
    args = parse_args(argv)
    try:
        args.work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"bench_warmup: cannot create --work-dir {args.work_dir}: "
              f"{error.strerror or error}", file=sys.stderr)
        return 2
    try:
        results = run_phases(args)
    except UsageError as error:
        print(f"bench_warmup: {error}", file=sys.stderr)
        return 2
    print()
    print(table(results))
    statuses = [results["phases"][name]["status"] for name in args.only]
    return 0 if all(status in ("ok", "skipped") for status in statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
