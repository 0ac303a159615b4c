"""`python -m dgemm.compat COMMAND [ARGS...]`: run COMMAND so that it, and every Python process
it starts, imports dgemm's module as `deep_gemm`, without editing COMMAND.

    python -m dgemm.compat vllm serve deepseek-ai/DeepSeek-V3 ...
    python -m dgemm.compat python -m sglang.launch_server --model-path ...

It puts dgemm/compat/site first on PYTHONPATH (its sitecustomize.py installs the alias of
`dgemm.compat.alias` at interpreter start-up and then runs any sitecustomize it shadows) and
replaces itself with COMMAND (exec: same pid, signals and exit status). DGEMM_COMPAT_ROOT
names the directory this dgemm was loaded from, so every process loads this same copy. Children
inherit PYTHONPATH; a process started with `python -I` or `-E`, or with PYTHONPATH replaced, does
not get the alias. When a real DeepGEMM is installed too, dgemm's module wins.
Exit status: COMMAND's; 2 without a COMMAND; 127 when COMMAND is not found.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent     # the directory holding dgemm/


def environment(environ) -> dict:
    """`environ` with the start-up hook first on PYTHONPATH (once)."""
    env = dict(environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITE_DIR)]
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *rest])
    env["DGEMM_COMPAT_ROOT"] = str(PACKAGE_ROOT)
    return env


def main(argv: list) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    try:
        os.execvpe(argv[0], argv, environment(os.environ))
    except FileNotFoundError:
        print(f"python -m dgemm.compat: command not found: {argv[0]}", file=sys.stderr)
        return 127
    except PermissionError as error:
        print(f"python -m dgemm.compat: cannot run {argv[0]}: {error.strerror}", file=sys.stderr)
        return 126


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
