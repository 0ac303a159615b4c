#!/usr/bin/env python3
"""dgemm-prewarm: `dgemm-cache prewarm` once per SM count of the cluster's GPUs.

    dgemm-prewarm --preset deepseek_v3 --arch sm_90a --no-progress

The SM count is compiled into every kernel, so a cluster of H100 SXM (132 SMs) and H100 PCIe
(114 SMs) nodes needs both sets. The counts come from, in order:

1. DGEMM_PREWARM_NUM_SMS, a comma-separated list ("132,114"): what the cluster runs, the only
   source on a prewarm host without a GPU (also the way to plan for fewer SMs than the GPU has,
   as `dgemm.set_num_sms` does for communication kernels);
2. the GPUs this container sees (torch), each distinct (arch, SM count) once; their arch is
   passed as --arch unless the arguments give one.

With neither, it stops with exit status 2 and says what to set. Every other argument goes to
`dgemm-cache prewarm` unchanged (except --num-sms, which is this script's job). Exit status:
that of the first prewarm that did not succeed (a later SM count still runs after a kernel
failed to compile, status 1; any other status stops at once), else 0. SIGTERM (docker stop,
Kubernetes) and SIGINT are passed on to the running prewarm, which stops and reports, and no
further SM count is started.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

VARIABLE = "DGEMM_PREWARM_NUM_SMS"
EXIT_USAGE, EXIT_KERNEL_FAILED = 2, 1


class UsageError(Exception):
    pass


def sm_counts_from_env(text: str) -> list:
    """'132,114' -> [132, 114]; duplicates dropped, order kept."""
    counts = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) <= 0:
            raise UsageError(f"{VARIABLE}={text!r}: expected a comma-separated list of positive "
                             f"SM counts, e.g. {VARIABLE}=132,114")
        if int(item) not in counts:
            counts.append(int(item))
    return counts


def visible_gpus() -> list:
    """(arch, SM count) of each distinct GPU type this process sees; [] without a GPU."""
    import torch
    if not torch.cuda.is_available():
        return []
    targets = []
    for index in range(torch.cuda.device_count()):
        properties = torch.cuda.get_device_properties(index)
        # sm_90a (wgmma, TMA multicast) is the arch dgemm's Hopper kernels are built for.
        arch = "sm_90a" if (properties.major, properties.minor) == (9, 0) \
            else f"sm_{properties.major}{properties.minor}"
        if (arch, properties.multi_processor_count) not in targets:
            targets.append((arch, properties.multi_processor_count))
    return targets


def prewarm_runs(arguments: list, environ) -> list:
    """One argument list for `dgemm-cache prewarm` per target; UsageError when there is none."""
    if any(a == "--num-sms" or a.startswith("--num-sms=") for a in arguments):
        raise UsageError(f"do not pass --num-sms to dgemm-prewarm: set {VARIABLE} (e.g. 132,114) "
                         f"or let it read the SM count from the GPUs it sees")
    if environ.get(VARIABLE, "").strip():
        return [[*arguments, "--num-sms", str(n)] for n in sm_counts_from_env(environ[VARIABLE])]
    gpus = visible_gpus()
    if not gpus:
        raise UsageError(f"no GPU visible and {VARIABLE} is unset: set it to the SM counts of "
                         f"the cluster's GPUs, e.g. {VARIABLE}=132 (H100 SXM, H200) or "
                         f"{VARIABLE}=132,114 (with H100 PCIe nodes)")
    has_arch = any(a == "--arch" or a.startswith("--arch=") for a in arguments)
    return [[*arguments, *([] if has_arch else ["--arch", arch]), "--num-sms", str(sms)]
            for arch, sms in gpus]


def main(arguments: list) -> int:
    try:
        runs = prewarm_runs(arguments, os.environ)
    except UsageError as exc:
        print(f"dgemm-prewarm: {exc}", file=sys.stderr)
        return EXIT_USAGE
    first_failure = 0
    for run in runs:
        print(f"dgemm-prewarm: dgemm-cache prewarm {' '.join(run)}", file=sys.stderr, flush=True)
        # This interpreter's dgemm, the one `dgemm-cache` would run.
        status, signalled = run_passing_on_signals([sys.executable, "-m", "dgemm.cli",
                                                    "prewarm", *run])
        first_failure = first_failure or status
        if signalled or status not in (0, EXIT_KERNEL_FAILED):
            break
    return first_failure


def run_passing_on_signals(command: list) -> tuple:
    """(exit status, whether SIGTERM or SIGINT arrived). The child gets a session of its own, so
    a Ctrl-C in a terminal reaches it once, from here, like a `docker stop`. (As a container's
    PID 1 this process would otherwise ignore SIGTERM: PID 1 has no default signal actions.)"""
    child = subprocess.Popen(command, start_new_session=True)
    received = []

    def pass_on(signum, _frame):
        received.append(signum)
        child.send_signal(signum)

    previous = {signum: signal.signal(signum, pass_on)
                for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return (128 - status if status < 0 else status), bool(received)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
