"""Generated CUDA headers are what their generator writes today (no hand edits, no stale copy)."""
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_regenerating_wgmma_ops_reproduces_the_committed_header():
    generator = _load_tool("gen_wgmma_ops")
    committed = (REPO / "csrc" / "dgemm" / "wgmma_ops.cuh").read_text()
    assert generator.OUTPUT == REPO / "csrc" / "dgemm" / "wgmma_ops.cuh"
    assert generator.render() == committed, (
        "csrc/dgemm/wgmma_ops.cuh differs from what tools/gen_wgmma_ops.py generates: run "
        "`python tools/gen_wgmma_ops.py` and commit the result")
