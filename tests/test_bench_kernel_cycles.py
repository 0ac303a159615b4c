"""bench.kernel_cycles: ncu's CSV read back in launch order; a clear exit without a GPU."""
import pytest

from bench import kernel_cycles

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"\n')


def _row(launch_id: int, kernel: str, metric: str, value: str) -> str:
    return (f'"{launch_id}","7","python3","host","{kernel}","1","7","(384, 1, 1)","(132, 1, 1)",'
            f'"0","9.0","Command line profiler metrics","{metric}","cycle","{value}"\n')


def test_rows_come_back_in_launch_order_with_thousands_separators_read():
    log = ("==PROF== Connected to process 7\n" + HEADER +
           _row(1, "fp8_gemm_kernel<...>", kernel_cycles.METRIC, "271,979") +
           _row(0, "sm90_fp8_gemm_1d2d_impl<...>", kernel_cycles.METRIC, "266719") +
           _row(1, "fp8_gemm_kernel<...>", "sm__cycles_active.avg", "1"))
    assert kernel_cycles._ncu_rows(log) == [
        ("sm90_fp8_gemm_1d2d_impl<...>", {kernel_cycles.METRIC: 266719.0}),
        ("fp8_gemm_kernel<...>", {kernel_cycles.METRIC: 271979.0})]


def test_extra_metrics_are_read_per_launch():
    dram = "dram__bytes_read.sum"
    log = (HEADER + _row(0, "fp8_gemm_kernel<...>", kernel_cycles.METRIC, "100") +
           _row(0, "fp8_gemm_kernel<...>", dram, "1,024") +
           _row(1, "sm90_fp8_gemm_1d2d_impl<...>", dram, "2048") +
           _row(1, "sm90_fp8_gemm_1d2d_impl<...>", kernel_cycles.METRIC, "90") +
           _row(1, "sm90_fp8_gemm_1d2d_impl<...>", "not.asked", "5"))
    assert kernel_cycles._ncu_rows(log, (kernel_cycles.METRIC, dram)) == [
        ("fp8_gemm_kernel<...>", {kernel_cycles.METRIC: 100.0, dram: 1024.0}),
        ("sm90_fp8_gemm_1d2d_impl<...>", {kernel_cycles.METRIC: 90.0, dram: 2048.0})]


def test_a_log_without_results_is_a_clear_error():
    with pytest.raises(RuntimeError, match="ncu printed no results"):
        kernel_cycles._ncu_rows("==ERROR== Failed to initialize the profiler\n")


def test_without_a_gpu_it_says_so_and_exits_2(capsys, monkeypatch):
    monkeypatch.setattr(kernel_cycles.torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv(kernel_cycles._CHILD, raising=False)
    assert kernel_cycles.main(["--shape", "128,4096,7168", "--config", "heuristic"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_a_malformed_shape_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        kernel_cycles.main(["--shape", "4096x7168", "--config", "heuristic"])
    assert exit_info.value.code == 2
    assert "expected M,N,K" in capsys.readouterr().err
