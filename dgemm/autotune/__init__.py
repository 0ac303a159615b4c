"""Cluster-shared autotuning (DGEMM_AUTOTUNE=1, `dgemm-cache tune`): the first time a shape
class is seen, time the cost model's best few kernels, keep the fastest and share that decision
through the cache tiers, so every process and node runs the same kernel without timing again.

    classes   shape classes (M buckets), their representative problems and decision keys
    tuner     the launch path's hook and `tune_class`
    timing    the GPU timer (L2 flushed between launches, the profiler's kernel times or
              CUDA events, trimmed means)

GPU-free to import: `timing` (torch.cuda work) is imported only to time.
"""
from .classes import ShapeClass, m_bucket, shape_class
from .tuner import Tuned, spec_for_call, tune_class

__all__ = ["ShapeClass", "m_bucket", "shape_class", "Tuned", "spec_for_call", "tune_class"]
