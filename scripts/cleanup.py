#!/usr/bin/env python3
"""Clean one node's dgemm disk cache: dead temp and lock files, corrupt and stale entries, LRU
eviction to a size budget (same as `dgemm-cache gc`). Example: python scripts/cleanup.py --dry-run"""
import sys

from dgemm.jobs import cleanup

if __name__ == "__main__":
    sys.exit(cleanup.main())
