#!/usr/bin/env python3
"""Compile the kernels a workload needs ahead of time, without a GPU (same as
`dgemm-cache prewarm`). Example: python scripts/prewarm.py --preset deepseek_v3"""
import sys

from dgemm.jobs import prewarm

if __name__ == "__main__":
    sys.exit(prewarm.main())
