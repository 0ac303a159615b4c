"""What prewarm prints: the report of a run and of a `--dry-run` (a dict, printed as JSON or as
text), and with -v one line per kernel step as it happens.

Kernel lines name the M values a kernel serves as ranges in `--m-range`'s syntax
(`M 1-64, 129-256`), never as the list itself. Under torchrun every line a rank prints starts
with `[rank I/N] `, so the merged output of the ranks can be read (and grepped) per rank.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from typing import Callable, Optional

from dgemm.jobs import manifest as manifests


def build(plan, outcomes: list, remote_status: Optional[dict], interrupted: Optional[str],
          jobs: int, wall_seconds: float) -> dict:
    """The report of a run: counts, the remote cache's state, and one entry per kernel."""
    kernels = []
    for outcome in sorted(outcomes, key=lambda o: o["spec"].to_json()):
        served = plan.served[outcome["spec"]]
        kernels.append(dict(outcome, spec=json.loads(outcome["spec"].to_json()),
                            m_values=manifests.format_m_values(p.m for p in served),
                            problems=[dataclasses.asdict(p) for p in served]))
    count = lambda status: sum(1 for o in outcomes if o["status"] == status)  # noqa: E731
    return {
        "source": plan.source, "arch": plan.arch, "num_sms": plan.num_sms,
        "shard": list(plan.shard), "problems": len(plan.problems),
        "specs_total": len(plan.served), "specs_in_shard": len(plan.mine),
        "compiled": count("compiled"),
        "already_cached": count("cached") + count("downloaded"),
        "downloaded": count("downloaded"),
        "failed": count("failed"),
        "unfinished": len(plan.mine) - len(outcomes),
        "interrupted": interrupted,
        "wall_seconds": round(wall_seconds, 3),
        "compile_seconds": round(sum(o["compile_seconds"] for o in outcomes), 3),
        "jobs": jobs, "cache_dir": str(plan.settings.cache_dir),
        "remote": remote_for_display(plan.settings), "remote_status": remote_status,
        "kernels": kernels,
    }


def build_dry_run(plan, kernels: list, remote_error: Optional[str]) -> dict:
    """The report of `--dry-run`: `kernels` are dicts with spec, key, m_values, local, remote."""
    return {"dry_run": True, "source": plan.source, "arch": plan.arch,
            "num_sms": plan.num_sms, "shard": list(plan.shard),
            "problems": len(plan.problems), "specs_total": len(plan.served),
            "specs_in_shard": len(kernels), "compiler": plan.compiler.identity,
            "cache_dir": str(plan.settings.cache_dir),
            "remote": remote_for_display(plan.settings), "remote_error": remote_error,
            "local": sum(k["local"] for k in kernels),
            "in_remote": sum(bool(k["remote"]) for k in kernels),
            "to_compile": sum(not k["local"] and not k["remote"] for k in kernels),
            "kernels": kernels}


def output(report: dict, as_json: bool, prefix: str) -> None:
    """Print a report (a run's or a dry run's) on stdout."""
    if as_json:
        print(json.dumps(report, indent=2))
        return
    text = format_dry_run(report) if report.get("dry_run") else format_run(report)
    print("\n".join(prefix + line for line in text.splitlines()))


def format_run(report: dict) -> str:
    index, count = report["shard"]
    lines = [
        f"dgemm prewarm: {report['source']}, {report['arch']}, {report['num_sms']} SMs, "
        f"shard {index}/{count}",
        f"  problems          {report['problems']:>6}  (shapes x M values)",
        f"  specs total       {report['specs_total']:>6}  (this shard: {report['specs_in_shard']})",
        f"  compiled          {report['compiled']:>6}",
        f"  already cached    {report['already_cached']:>6}  "
        f"({report['downloaded']} downloaded from the remote tier)",
        f"  failed            {report['failed']:>6}",
    ]
    if report["interrupted"]:
        lines.append(f"  interrupted       {report['interrupted']}: {report['unfinished']} "
                     f"kernels not finished (a rerun resumes)")
    lines += [
        f"  wall time         {report['wall_seconds']:>8.1f} s with {report['jobs']} jobs",
        f"  compile time      {report['compile_seconds']:>8.1f} s summed over kernels",
        f"  local cache       {report['cache_dir']}",
        f"  remote cache      {_remote_line(report)}",
    ]
    if report["kernels"]:
        lines += ["", f"  {'status':<10} {'compile s':>9}  {'key':<12}  spec"]
        for kernel in sorted(report["kernels"], key=lambda k: -k["compile_seconds"]):
            lines.append(f"  {kernel['status']:<10} {kernel['compile_seconds']:>9.2f}  "
                         f"{(kernel['key'] or '-')[:12]:<12}  {_describe(kernel)}")
    for kernel in (k for k in report["kernels"] if k["error"]):
        error_lines = kernel["error"].splitlines()
        lines += ["", f"  FAILED {_describe(kernel)}:"]
        lines += ["    " + line for line in error_lines[:30]]
        if len(error_lines) > 30:
            lines.append(f"    ... {len(error_lines) - 30} more lines (see --json)")
    return "\n".join(lines)


def _remote_line(report: dict) -> str:
    url, status = report["remote"], report["remote_status"]
    if url is None:
        return "off (DGEMM_REMOTE_CACHE unset)"
    if status is None:
        return f"{url}: not checked (interrupted)"
    line = (f"{url}: {status['present'] + status['uploaded']} of {status['kernels']} kernels "
            f"there ({status['uploaded']} uploaded at the end)")
    if status["missing"] or status["error"]:
        line += f"; {status['missing']} MISSING: {status['error']}"
    return line


def format_dry_run(report: dict) -> str:
    index, count = report["shard"]
    remote = report["remote"]
    if remote is None:
        where_remote = "no remote cache (DGEMM_REMOTE_CACHE unset)"
    elif report["remote_error"]:
        where_remote = f"remote {remote} unavailable: {report['remote_error']}"
    else:
        where_remote = f"{report['in_remote']} in {remote}"
    lines = [f"dgemm prewarm --dry-run: {report['source']}, {report['arch']}, "
             f"{report['num_sms']} SMs, shard {index}/{count}, {report['compiler']}",
             f"  {report['specs_in_shard']} kernels ({report['specs_total']} in all shards) "
             f"for {report['problems']} problems: {report['local']} on local disk "
             f"({report['cache_dir']}), {where_remote}; {report['to_compile']} to compile",
             "", f"  {'local':<5} {'remote':<6}  {'key':<12}  kernel"]
    for kernel in report["kernels"]:
        in_remote = {True: "yes", False: "no", None: "-"}[kernel["remote"]]
        lines.append(f"  {'yes' if kernel['local'] else 'no':<5} {in_remote:<6}  "
                     f"{kernel['key'][:12]:<12}  {_describe(kernel)}")
    return "\n".join(lines)


def _describe(kernel: dict) -> str:
    spec = kernel["spec"]
    k_split = spec.get("k_split", 1)                  # absent from specs of older manifests
    return (f"{spec['kernel']} {spec['gemm_type']} n={spec['n']} k={spec['k']} "
            f"groups={spec['num_groups']} tile {spec['block_m']}x{spec['block_n']}x"
            f"{spec['block_k']} stages={spec['num_stages']} "
            f"multicast={spec['num_tma_multicast']}"
            f"{f' k_split={k_split}' if k_split > 1 else ''} "
            f"(M {kernel['m_values']})")


def remote_for_display(settings) -> Optional[str]:
    """The remote URL without its password, which must not end up in logs. (Without a remote,
    nothing is imported: a GPU host without redis-py can still run a dry run.)"""
    if settings.remote is None:
        return None
    from cache_service.client import redact
    return redact(settings.remote.url)


# --- -v: a line per kernel step, on stderr as it happens ---------------------------------------
def printer(prefix: str) -> Callable[[str], None]:
    def note(line: str) -> None:
        print(f"{prefix}{line}", file=sys.stderr, flush=True)
    return note


_TIER_STEP = {"compiled": "compiled in {compile_seconds:.2f} s and stored on local disk",
              "memory": "cached (memory)", "disk": "cached on local disk",
              "remote": "downloaded from the remote cache"}
_REMOTE_STEP = {"present": "already in the remote cache",
                "uploaded": "uploaded to the remote cache", "missing": "NOT in the remote cache"}


def kernel_steps(note: Callable[[str], None], plan) -> tuple:
    """(on_outcome, on_remote): -v's per-kernel lines, for the compile phase (which tier
    answered, or the compile time, or the first line of the failure) and for the remote
    cache check at the end."""
    done = [0]

    def describe(outcome: dict) -> str:
        served = plan.served[outcome["spec"]]
        return _describe({"spec": json.loads(outcome["spec"].to_json()),
                          "m_values": manifests.format_m_values(p.m for p in served)})

    def on_outcome(outcome: dict) -> None:
        done[0] += 1
        if outcome["status"] == "failed":
            step = "FAILED: " + ((outcome["error"] or "").splitlines() or [""])[0][:200]
        else:
            step = _TIER_STEP[outcome["tier"]].format(**outcome)
        note(f"prewarm: [{done[0]}/{len(plan.mine)}] {(outcome['key'] or '-')[:12]} {step}; "
             f"{describe(outcome)}")

    def on_remote(outcome: dict) -> None:
        note(f"prewarm: {outcome['key'][:12]} {_REMOTE_STEP[outcome['remote']]}; "
             f"{describe(outcome)}")
    return on_outcome, on_remote
