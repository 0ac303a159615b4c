"""The adversarial cache probe of issue 15 (tools/cache_probe.py) in its quick mode: every fault
family once, with real ranks, real `dgemm-cache` commands, real redis-servers and real files.

It asserts the probe's failure columns: no kernel served other than the true one, no process
past its time bound, no GEMM or command failing, no traceback, no compile beyond one per kernel
where one is promised, no file that is not dgemm's deleted or replaced. The probe's table (with
every finding) is the assertion message.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAILURE_COLUMNS = ("corrupt", "hangs", "crashes", "tracebacks", "extra_compiles", "damage",
                   "probe_errors")


def run_quick_probe(report: Path) -> subprocess.CompletedProcess:
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("DGEMM_")}
    environment["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), environment.get("PYTHONPATH")) if p)
    # The probe bounds each of its processes (30 s in quick mode); this bound only keeps a
    # broken probe from hanging the suite.
    return subprocess.run([sys.executable, str(REPO / "tools" / "cache_probe.py"), "--quick",
                           "--json", str(report)], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=600)


def test_the_quick_cache_probe_finds_no_corrupt_kernel_hang_crash_or_traceback(tmp_path):
    report_path = tmp_path / "probe.json"
    result = run_quick_probe(report_path)
    assert report_path.exists(), (f"the probe did not report (exit {result.returncode}):\n"
                                  f"{result.stdout}\n{result.stderr[-4000:]}")
    report = json.loads(report_path.read_text())
    assert all(family["trials"] > family["skipped"] for family in report["families"].values()), \
        result.stdout
    totals = report["totals"]
    failures = {column: totals[column] for column in FAILURE_COLUMNS}
    assert failures == dict.fromkeys(FAILURE_COLUMNS, 0), result.stdout
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
