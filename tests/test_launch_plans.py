"""The hot path's caches on CPU: launch plans and the memo of validated call signatures, checked
on what reaches the (recording, stand-in) driver: pointers, grid, TMA descriptor contents. A
call that differs from an earlier one in a pointer, stride, shape, dtype or device either gets
a correct launch or the same clear error as a first call."""
import threading

import pytest
import torch

import dgemm
from bench.stub_launch import fp8_inputs, stubbed_launch
from dgemm import gemm, native, utils
from dgemm.jit import launcher
from dgemm.kernels import hopper_fp8, plans

M, N, K = 64, 256, 512


@pytest.fixture(params=["c", "python"])
def driver(request, monkeypatch):
    """The recording stand-in driver; each test runs with the C hot path (dgemm/native) and
    with the Python one it replaces."""
    if request.param == "c":
        hot = native.hot_path()
        assert hot is not None, native.status()
    else:
        hot = gemm._cached
    monkeypatch.setattr(gemm, "_hot", hot)
    monkeypatch.setattr(gemm, "_hot_bound", True)
    with stubbed_launch() as recording:
        yield recording


def dense_params(launch):
    (d_ptr, sb_ptr, layout, sa_ptr, shape_m, in_place, sa_row, sa_k, sa_group, tma_a,
     tma_a_tail, tma_b, tma_sa, tma_d) = launch.params
    return dict(d=d_ptr, sb=sb_ptr, layout=layout, sa=sa_ptr, m=shape_m, in_place=in_place,
                sa_strides=(sa_row, sa_k, sa_group), tma_a=tma_a, tma_a_tail=tma_a_tail,
                tma_b=tma_b, tma_sa=tma_sa, tma_d=tma_d)


def check_dense_launch(launch, a, b, d, m=M, n=N, k=K, sa_ptr=None):
    p = dense_params(launch)
    assert p["d"] == d.data_ptr() and p["sb"] == b[1].data_ptr() and p["layout"] in (0, None)
    assert p["m"] == m
    assert p["tma_a"]["address"] == a[0].data_ptr() and p["tma_a"]["dims"] == (k, m)
    spec = dgemm.heuristics.select("fp8_gemm_nt", m, n, k, num_sms=132)
    assert p["tma_a_tail"]["address"] == a[0].data_ptr()
    tail = hopper_fp8.a_tail_rows(spec, m)
    assert p["tma_a_tail"]["box"][1] == (p["tma_a"]["box"][1] if tail == spec.block_m else tail)
    assert p["tma_b"]["address"] == b[0].data_ptr() and p["tma_b"]["dims"] == (k, n)
    assert p["sa"] == (sa_ptr or a[1].data_ptr())
    assert p["sa_strides"][:2] == a[1].stride() and p["sa_strides"][2] == 0
    check_scales_mode(p, a[1] if sa_ptr is None else None)
    assert launch.grid == (hopper_fp8.grid_size(spec, m), 1, 1)
    if hopper_fp8.uses_tma_store(spec):
        assert p["tma_d"]["address"] == d.data_ptr() and p["tma_d"]["dims"] == (n, m)


def check_scales_mode(p, sa):
    """The kernel's A-scale mode: TMA (its map at the scales, one K block of a tile's rows
    per box) for the MN-major TMA-aligned layout at a 16-byte aligned address, else in place."""
    if sa is None:
        return
    tma = utils.is_mn_major_tma_aligned(sa) and sa.data_ptr() % 16 == 0
    assert p["in_place"] == (0 if tma else 1)
    if tma:
        assert p["tma_sa"]["address"] == sa.data_ptr()
        assert p["tma_sa"]["dims"] == (sa.shape[-2], sa.numel() // sa.shape[-2])
        assert p["tma_sa"]["box"][1] == 1


def test_first_call_launches_the_tensors_and_geometry(driver):
    a, b, d = fp8_inputs(M, N, K)
    assert dgemm.fp8_gemm_nt(a, b, d) is d
    check_dense_launch(driver.launches[-1], a, b, d)


def test_new_tensors_of_a_seen_geometry_are_patched_into_the_plan(driver):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    built = len(plans._plans)
    a2, b2, d2 = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a2, b2, d2)
    assert len(plans._plans) == built            # the same plan, re-pointed
    assert driver.replaced >= 3                  # A, B, A-scale (and D) descriptors
    check_dense_launch(driver.launches[-1], a2, b2, d2)
    dgemm.fp8_gemm_nt(a, b, d)                   # and back
    check_dense_launch(driver.launches[-1], a, b, d)


def test_a_new_shape_gets_its_own_plan(driver):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    a2, b2, d2 = fp8_inputs(200, N, K)
    dgemm.fp8_gemm_nt(a2, b2, d2)
    check_dense_launch(driver.launches[-1], a2, b2, d2, m=200)
    a3, b3, d3 = fp8_inputs(M, 384, 1024)
    dgemm.fp8_gemm_nt(a3, b3, d3)
    check_dense_launch(driver.launches[-1], a3, b3, d3, n=384, k=1024)


def test_d_none_allocates_and_launches_into_the_new_tensor(driver):
    a, b, _ = fp8_inputs(M, N, K)
    outs = [dgemm.fp8_gemm_nt(a, b) for _ in range(3)]
    for out, launch in zip(outs, driver.launches[-3:]):
        assert out.shape == (M, N) and out.dtype == torch.bfloat16
        assert dense_params(launch)["d"] == out.data_ptr()


def test_row_major_scales_are_read_in_place_on_every_call(driver):
    """The Hopper kernel reads A's scales through their strides: the row-major ones
    `per_token_cast_to_fp8` returns reach it uncopied, first call and memoised calls alike."""
    a, b, d = fp8_inputs(M, N, K, row_major_scales=True)
    assert a[1].stride() == (K // 128, 1)
    for _ in range(3):
        dgemm.fp8_gemm_nt(a, b, d)
        p = dense_params(driver.launches[-1])
        assert p["sa"] == a[1].data_ptr() and p["in_place"] == 1
        assert p["sa_strides"] == (K // 128, 1, 0)


def test_mn_major_scales_go_through_tma_and_an_unaligned_view_of_them_in_place(driver):
    """Pre-transformed scales take the TMA path; the same geometry at an address TMA cannot
    map (a 4-byte offset) falls back to the in-place loader, memoised or not, and back."""
    a, b, d = fp8_inputs(M, N, K)
    aligned_m = utils.get_tma_aligned_size(M, 4)
    storage = torch.ones(aligned_m * (K // 128) + 4)
    views = {True: storage.as_strided((M, K // 128), (1, aligned_m)),
             False: storage[1:].as_strided((M, K // 128), (1, aligned_m))}
    for aligned in (True, False, True, False):
        sa = views[aligned]
        assert utils.is_mn_major_tma_aligned(sa)
        for _ in range(2):
            dgemm.fp8_gemm_nt((a[0], sa), b, d)
            p = dense_params(driver.launches[-1])
            assert p["sa"] == sa.data_ptr() and p["in_place"] == (0 if aligned else 1)
            check_scales_mode(p, sa)


def test_scales_of_any_strides_and_any_4_byte_offset_reach_the_kernel_as_they_are(driver):
    a, b, d = fp8_inputs(M, N, K)
    storage = torch.ones(3 * M * (K // 128) + 1)
    for sa in (storage[1:].as_strided((M, K // 128), (1, M)),            # MN-major, 4 B off
               storage.as_strided((M, K // 128), (3 * (K // 128), 1))):    # every third row
        dgemm.fp8_gemm_nt((a[0], sa), b, d)
        p = dense_params(driver.launches[-1])
        assert p["sa"] == sa.data_ptr() and p["sa_strides"] == sa.stride() + (0,)
        assert p["in_place"] == 1


def test_masked_scales_pass_their_group_stride(driver):
    groups, max_m = 3, 32
    a0 = torch.zeros((groups, max_m, K), dtype=torch.float8_e4m3fn)
    sa = torch.ones((groups, max_m, K // 128))
    b = (torch.zeros((groups, N, K), dtype=torch.float8_e4m3fn),
         torch.ones((groups, N // 128, K // 128)))
    d = torch.empty((groups, max_m, N), dtype=torch.bfloat16)
    masked_m = torch.full((groups,), max_m, dtype=torch.int32)
    dgemm.m_grouped_fp8_gemm_nt_masked((a0, sa), b, d, masked_m, max_m)
    p = dense_params(driver.launches[-1])
    assert p["sa"] == sa.data_ptr() and p["m"] == max_m
    assert p["sa_strides"] == (K // 128, 1, max_m * (K // 128))
    assert p["in_place"] == 1
    # Pre-transformed (MN-major, TMA-aligned per group): one TMA map over every group's K
    # blocks, the groups one after another along its outer dimension.
    mn_major = utils.get_mn_major_tma_aligned_tensor(sa)
    dgemm.m_grouped_fp8_gemm_nt_masked((a0, mn_major), b, d, masked_m, max_m)
    p = dense_params(driver.launches[-1])
    assert p["sa"] == mn_major.data_ptr() and p["in_place"] == 0
    assert p["tma_sa"]["dims"] == (max_m, groups * (K // 128))
    check_scales_mode(p, mn_major)


def test_the_portable_kernel_still_gets_the_mn_major_copy(driver, monkeypatch):
    monkeypatch.setenv("DGEMM_FORCE_PORTABLE", "1")
    a, b, d = fp8_inputs(M, N, K, row_major_scales=True)
    for _ in range(2):
        dgemm.fp8_gemm_nt(a, b, d)
        sa_ptr = driver.launches[-1].params[1]          # portable: (a, scales_a, ...)
        assert sa_ptr != a[1].data_ptr()


def test_a_changed_dtype_after_the_first_call_is_validated_again(driver):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    with pytest.raises(TypeError, match=r"a\[0\] must be float8_e4m3fn; got torch.bfloat16"):
        dgemm.fp8_gemm_nt((a[0].to(torch.bfloat16), a[1]), b, d)
    with pytest.raises(TypeError, match=r"d must be bfloat16"):
        dgemm.fp8_gemm_nt(a, b, d.float())


def test_a_changed_stride_after_the_first_call_is_validated_again(driver):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    wide = torch.empty((M, 2 * N), dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"d must be contiguous"):
        dgemm.fp8_gemm_nt(a, b, wide[:, :N])
    b_t = torch.zeros((K, N), dtype=torch.float8_e4m3fn).t()
    with pytest.raises(ValueError, match=r"b\[0\] must be contiguous"):
        dgemm.fp8_gemm_nt(a, (b_t, b[1]), d)


def test_an_unaligned_pointer_after_the_first_call_raises_the_alignment_error(driver):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    launches = len(driver.launches)
    storage = torch.zeros(M * K + 8, dtype=torch.float8_e4m3fn)
    shifted = storage[8:].view(M, K)             # same shape, dtype, strides; 8 bytes off
    with pytest.raises(ValueError, match=r"a\[0\] must start at a 16-byte aligned address"):
        dgemm.fp8_gemm_nt((shifted, a[1]), b, d)
    out = torch.zeros(M * N + 4, dtype=torch.bfloat16)[4:].view(M, N)
    with pytest.raises(ValueError, match=r"d must start at a 16-byte aligned address"):
        dgemm.fp8_gemm_nt(a, b, out)
    assert len(driver.launches) == launches       # nothing launched with a bad pointer


def test_a_changed_device_after_the_first_call_is_validated_again(driver):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    with pytest.raises(RuntimeError, match=r"every tensor must be on cpu; d is on meta"):
        dgemm.fp8_gemm_nt(a, b, torch.empty((M, N), dtype=torch.bfloat16, device="meta"))


def test_changed_settings_change_the_launch(driver):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    first = driver.launches[-1]
    dgemm.set_num_sms(8)
    try:
        dgemm.fp8_gemm_nt(a, b, d)
    finally:
        gemm.utils._num_sms.set(None)
    spec = dgemm.heuristics.select("fp8_gemm_nt", M, N, K, num_sms=8)
    assert driver.launches[-1].grid == (hopper_fp8.grid_size(spec, M), 1, 1)
    assert driver.launches[-1].function != first.function       # another spec, kernel
    with dgemm.heuristics.forced_tile(128, 128, 2, multicast_on_a=False):
        dgemm.fp8_gemm_nt(a, b, d)
    assert driver.launches[-1].cluster == 2 and driver.launches[-1].block[0] == 384
    dgemm.fp8_gemm_nt(a, b, d)
    assert driver.launches[-1].function == first.function


def test_aliased_tensors_launch_correctly_without_a_plan(driver):
    a, _, _ = fp8_inputs(N, N, K)
    b = (a[0], torch.ones((N // 128, K // 128)))
    d = torch.empty((N, N), dtype=torch.bfloat16)
    dgemm.fp8_gemm_nt(a, b, d)                    # a[0] is b[0]: the A and B maps alias
    p = dense_params(driver.launches[-1])
    assert p["tma_a"]["address"] == p["tma_b"]["address"] == a[0].data_ptr()
    a2, b2, d2 = fp8_inputs(N, N, K)              # same geometry, distinct tensors
    dgemm.fp8_gemm_nt(a2, b2, d2)
    check_dense_launch(driver.launches[-1], a2, b2, d2, m=N)
    dgemm.fp8_gemm_nt(a, b, d)                    # the alias again, now through the plan
    p = dense_params(driver.launches[-1])
    assert p["tma_a"]["address"] == p["tma_b"]["address"] == a[0].data_ptr()


def test_each_thread_launches_its_own_pointers(driver):
    results = {}

    def call(name):
        a, b, d = fp8_inputs(M, N, K)
        for _ in range(50):
            dgemm.fp8_gemm_nt(a, b, d)
        results[name] = (a, b, d)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_d = {dense_params(launch)["d"]: launch for launch in driver.launches}
    for a, b, d in results.values():
        check_dense_launch(by_d[d.data_ptr()], a, b, d)
    # Every launch is consistent: its A map belongs to the same call as its D pointer.
    pairs = {r[2].data_ptr(): r[0][0].data_ptr() for r in results.values()}
    for launch in driver.launches:
        p = dense_params(launch)
        assert pairs[p["d"]] == p["tma_a"]["address"]


def test_contiguous_layout_pointer_follows_the_call(driver):
    a, _, _ = fp8_inputs(256, N, K)
    b = (torch.zeros((2, N, K), dtype=torch.float8_e4m3fn), torch.ones((2, N // 128, K // 128)))
    for _ in range(2):
        d = torch.empty((256, N), dtype=torch.bfloat16)
        layout = torch.zeros(256, dtype=torch.int32)
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
        d_ptr, sb_ptr, layout_ptr, sa_ptr, shape_m = driver.launches[-1].params[:5]
        assert (d_ptr, sb_ptr, layout_ptr, sa_ptr, shape_m) == (
            d.data_ptr(), b[1].data_ptr(), layout.data_ptr(), a[1].data_ptr(), 256)


def test_masked_expected_m_is_part_of_the_signature(driver):
    g = 4
    a = (torch.zeros((g, M, K), dtype=torch.float8_e4m3fn), torch.ones((g, M, K // 128)))
    b = (torch.zeros((g, N, K), dtype=torch.float8_e4m3fn), torch.ones((g, N // 128, K // 128)))
    d = torch.empty((g, M, N), dtype=torch.bfloat16)
    masked_m = torch.full((g,), M, dtype=torch.int32)
    dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 64)
    assert driver.launches[-1].params[2] == masked_m.data_ptr()
    p = dense_params(driver.launches[-1])
    assert p["sa"] == a[1].data_ptr() and p["sa_strides"] == a[1].stride()[1:] + (a[1].stride(0),)
    with pytest.raises(ValueError, match=r"expected_m must be a positive int"):
        dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, 0)
    with pytest.raises(ValueError, match=r"expected_m must be a positive int"):
        dgemm.m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, [64])


def test_portable_family_plans_patch_every_pointer(driver, monkeypatch):
    monkeypatch.setenv("DGEMM_FORCE_PORTABLE", "1")
    for _ in range(2):
        a, b, d = fp8_inputs(M, N, K)
        dgemm.fp8_gemm_nt(a, b, d)
        params = driver.launches[-1].params
        assert params[:5] == [a[0].data_ptr(), a[1].data_ptr(), b[0].data_ptr(),
                              b[1].data_ptr(), d.data_ptr()]
        assert params[6] == M and driver.launches[-1].grid == (1, N // 64, 1)


def test_a_failed_patch_leaves_no_trusted_plan(driver):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    plan = next(iter(plans._plans.values()))
    bad = (plan.pointers[0] + 8,) + plan.pointers[1:]
    with pytest.raises(RuntimeError, match=r"cuTensorMapReplaceAddress failed"):
        plan.run(bad, 0)
    assert plan.pointers is None
    dgemm.fp8_gemm_nt(a, b, d)                    # re-patched in full
    check_dense_launch(driver.launches[-1], a, b, d)


def test_launch_config_matches_cuda_h_layout():
    import ctypes
    assert ctypes.sizeof(launcher.LaunchAttribute) == 72          # 8 + 64-byte union
    assert launcher.LaunchConfig.stream.offset == 32
    assert launcher.LaunchConfig.attrs.offset == 40
    assert launcher.LaunchConfig.num_attrs.offset == 48


def test_unplanned_cluster_calls_launch_through_the_packed_path(driver):
    a, _, _ = fp8_inputs(512, 512, K)
    b = (a[0], torch.ones((4, K // 128)))         # aliased: no plan, packed arguments
    d = torch.empty((512, 512), dtype=torch.bfloat16)
    with dgemm.heuristics.forced_tile(128, 128, 2, multicast_on_a=False):
        dgemm.fp8_gemm_nt(a, b, d)
    launch = driver.launches[-1]
    assert launch.cluster == 2 and launch.grid[0] % 2 == 0
    p = dense_params(launch)
    assert p["d"] == d.data_ptr() and p["tma_a"]["address"] == a[0].data_ptr()


def test_loaded_kernel_launches_packed_arguments_through_the_ctypes_driver(driver):
    import ctypes
    from dgemm.jit import runtime
    plain = runtime.LoadedKernel(None, 0x1234, "add_one", 128, 0, 1, 0)
    clustered = runtime.LoadedKernel(None, 0x5678, "rank", 32, 1024, 2, 0)
    args = runtime.ArgLayout(ctypes.c_void_p).pack(0x100)
    plain.launch((3, 1, 1), args, stream=7)
    clustered.launch((4, 1, 1), args, stream=9)
    first, second = driver.launches[-2:]
    assert (first.function, first.grid, first.block, first.stream, first.cluster) == (
        0x1234, (3, 1, 1), (128, 1, 1), 7, 1)
    assert (second.function, second.grid, second.smem_bytes, second.stream, second.cluster) == (
        0x5678, (4, 1, 1), 1024, 9, 2)


def test_a_packed_cluster_launch_keeps_its_grid_and_stream_when_another_launch_interleaves():
    # The loaded kernel's cluster config is shared by every thread, and the real foreign call
    # releases the GIL: a second launch of the same kernel (another thread) may run while the
    # driver still reads the first one's config. The stand-in runs that second launch from
    # inside the first, before reading what the first was given.
    template = launcher.cluster_config(256, 4096, 2)
    seen = []

    class Interleaving:
        def cuLaunchKernelEx(self, config_address, function, params, extra):
            if not seen:
                seen.append(None)
                launcher.launch_packed(function, (8, 1, 1), 256, 4096, template, 0, 22, "other")
            c = launcher.LaunchConfig.from_address(config_address)
            seen.append(((c.grid_x, c.grid_y, c.grid_z), c.stream, c.attrs.contents.cluster_x))
            return 0

    saved = launcher._driver
    launcher.set_driver(Interleaving())
    try:
        launcher.launch_packed(0x10, (4, 1, 1), 256, 4096, template, 0, 11, "first")
    finally:
        launcher.set_driver(saved)
    assert seen[1:] == [((8, 1, 1), 22, 2), ((4, 1, 1), 11, 2)]


def test_launch_structs_and_the_cluster_attribute_id_match_the_installed_cuda_h(tmp_path):
    # Compiled against cuda.h where a toolkit and a C compiler are present: offsets, sizes and
    # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION as libcuda reads them (the test above pins them).
    import ctypes
    import glob
    import shutil
    import subprocess
    headers = sorted(glob.glob("/usr/local/cuda*/include/cuda.h"))
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not headers or compiler is None:
        pytest.skip("needs cuda.h and a C compiler")
    probe = tmp_path / "probe.c"
    probe.write_text(
        "#include <cuda.h>\n#include <stdio.h>\n#include <stddef.h>\nint main(void) {\n"
        "  printf(\"%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %d %zu\\n\",\n"
        "    sizeof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value),\n"
        "    offsetof(CUlaunchAttribute, value.clusterDim.y),\n"
        "    offsetof(CUlaunchAttribute, value.clusterDim.z),\n"
        "    sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, blockDimX),\n"
        "    offsetof(CUlaunchConfig, sharedMemBytes), offsetof(CUlaunchConfig, hStream),\n"
        "    offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs),\n"
        "    sizeof(CUtensorMap), (int)CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,\n"
        "    offsetof(CUlaunchAttribute, id));\n  return 0;\n}\n")
    binary = tmp_path / "probe"
    include = headers[-1].rsplit("/", 1)[0]
    subprocess.run([compiler, f"-I{include}", str(probe), "-o", str(binary)], check=True,
                   timeout=60)
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True,
                         timeout=60).stdout.split()
    got = [int(x) for x in out]
    A, C = launcher.LaunchAttribute, launcher.LaunchConfig
    assert got == [ctypes.sizeof(A), A.cluster_x.offset, A.cluster_y.offset, A.cluster_z.offset,
                   ctypes.sizeof(C), C.block_x.offset, C.shared_mem_bytes.offset,
                   C.stream.offset, C.attrs.offset, C.num_attrs.offset,
                   ctypes.sizeof(launcher.TmaDescriptor), launcher._CLUSTER_DIMENSION,
                   A.id.offset]


# --- the memo of validated calls: keys and tensor guards (dgemm.guards) --------------------------
@pytest.fixture(params=["native", "python"])
def guard(request, monkeypatch):
    """Each test below runs with torch's C++ tensor guard and with the Python fallback."""
    from dgemm import guards
    if request.param == "python":
        monkeypatch.setattr(guards, "tensor_guard", guards.PythonGuard)
    elif not guards.NATIVE:
        pytest.skip("this torch has no usable TensorGuards")
    return request.param


@pytest.fixture
def full_path(monkeypatch):
    """The kinds of the calls that took the validated path (`gemm._launch`), in order."""
    kinds = []
    launch = gemm._launch

    def counting(kind, *args):
        kinds.append(kind)
        return launch(kind, *args)

    monkeypatch.setattr(gemm, "_launch", counting)
    return kinds


def test_a_repeated_call_takes_the_memo_and_a_moved_view_is_launched_at_its_address(
        driver, guard, full_path):
    a, b, d = fp8_inputs(M, N, K)
    for _ in range(3):
        dgemm.fp8_gemm_nt(a, b, d)
    assert len(full_path) == 1
    storage = torch.zeros(M * K + 32, dtype=torch.float8_e4m3fn)
    for offset in (16, 32):                      # same metadata, another 16-byte aligned offset
        moved = storage[offset:offset + M * K].view(M, K)
        dgemm.fp8_gemm_nt((moved, a[1]), b, d)
        check_dense_launch(driver.launches[-1], (moved, a[1]), b, d)
    assert len(full_path) == 1


def test_only_the_tensors_that_moved_are_re_pointed(driver, guard):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    plan = next(iter(plans._plans.values()))
    d_maps = sum(1 for index, kind, _ in plan.patches if index == 4 and kind == launcher.DESCRIPTOR)
    replaced = driver.replaced
    d2 = torch.empty_like(d)
    dgemm.fp8_gemm_nt(a, b, d2)
    assert driver.replaced - replaced == d_maps
    check_dense_launch(driver.launches[-1], a, b, d2)


def test_another_scale_layout_of_a_seen_shape_is_validated_and_both_stay_memoised(
        driver, guard, full_path):
    a, b, d = fp8_inputs(M, N, K)
    rows = a[1].contiguous()                     # row-major: same shape, other strides
    assert rows.shape == a[1].shape and rows.stride() != a[1].stride()
    for scales in (a[1], rows, a[1], rows, a[1]):
        dgemm.fp8_gemm_nt((a[0], scales), b, d)
        p = dense_params(driver.launches[-1])
        assert p["sa"] == scales.data_ptr() and p["sa_strides"][:2] == scales.stride()
        check_scales_mode(p, scales)
    assert len(full_path) == 2                   # one validated call per layout


def test_more_layouts_of_one_shape_than_the_memo_keeps_per_key_all_launch_right(
        driver, guard, full_path):
    a, b, d = fp8_inputs(M, N, K)
    storage = torch.ones(8 * M * (K // 128))
    layouts = [storage.as_strided((M, K // 128), (row, 1)) for row in range(K // 128, 7 * K // 128,
                                                                             K // 128)]
    for _ in range(2):
        for sa in layouts:
            dgemm.fp8_gemm_nt((a[0], sa), b, d)
            assert dense_params(driver.launches[-1])["sa_strides"][:2] == sa.stride()
    key, _ = gemm._cached("fp8_gemm_nt", (a[0], layouts[0]), b, d, None, None)
    assert len(gemm._fast_calls[key]) == gemm._MAX_PER_KEY
    assert len(full_path) == 2 * len(layouts)    # round robin over 6 > 4: each one evicted


CHANGES = {
    "a[1] dtype": (lambda a, b, d: ((a[0], a[1].double()), b, d),
                   TypeError, r"a\[1\] \(scales\) must be float32"),
    "b[1] dtype": (lambda a, b, d: (a, (b[0], b[1].half()), d),
                   TypeError, r"b\[1\] \(scales\) must be float32"),
    "d dtype": (lambda a, b, d: (a, b, d.float()), TypeError, r"d must be bfloat16"),
    "b[0] shape, same numel": (lambda a, b, d: (a, (b[0].view(N // 2, 2 * K), b[1]), d),
                               ValueError, r"K differs"),
    "b[1] strides": (lambda a, b, d: (a, (b[0], b[1].t().contiguous().t()), d),
                     ValueError, r"b\[1\] \(scales\) must be contiguous"),
    "a[0] strides": (lambda a, b, d: ((torch.zeros((K, M), dtype=a[0].dtype).t(), a[1]), b, d),
                     ValueError, r"a\[0\] must be contiguous"),
    "b[0] device": (lambda a, b, d: (a, (b[0].to("meta"), b[1]), d),
                    RuntimeError, r"every tensor must be on cpu; b\[0\] is on meta"),
    "d device": (lambda a, b, d: (a, b, d.to("meta")), RuntimeError, r"d is on meta"),
    "a[1] no tensor": (lambda a, b, d: ((a[0], a[1].tolist()), b, d),
                       TypeError, r"a\[1\] must be a torch.Tensor"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_changed_tensor_after_a_memoised_call_gets_the_first_calls_error(driver, guard, change):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    dgemm.fp8_gemm_nt(a, b, d)
    make, error, message = CHANGES[change]
    launches = len(driver.launches)
    with pytest.raises(error, match=message):
        dgemm.fp8_gemm_nt(*make(a, b, d))
    assert len(driver.launches) == launches
    dgemm.fp8_gemm_nt(a, b, d)                   # the memoised call is still served
    check_dense_launch(driver.launches[-1], a, b, d)


def test_a_changed_tensor_type_after_a_memoised_call_is_validated_again(driver, guard, full_path):
    a, b, d = fp8_inputs(M, N, K)
    dgemm.fp8_gemm_nt(a, b, d)
    weight = torch.nn.Parameter(b[0], requires_grad=False)
    dgemm.fp8_gemm_nt(a, (weight, b[1]), d)      # a plain subclass: validated, then memoised
    dgemm.fp8_gemm_nt(a, (weight, b[1]), d)
    assert full_path == ["fp8_gemm_nt"] * 2
    check_dense_launch(driver.launches[-1], a, (weight, b[1]), d)


@pytest.mark.parametrize("m,n", [(M, N), (1, N), (M, 1), (1, 1)])
def test_d_none_gets_a_fresh_contiguous_output_on_every_memoised_call(driver, guard, m, n):
    a, b, _ = fp8_inputs(m, n, K)
    outs = [dgemm.fp8_gemm_nt(a, b) for _ in range(4)]      # all alive: no reuse possible
    expected = torch.empty((m, n), dtype=torch.bfloat16)
    assert len({out.data_ptr() for out in outs}) == len(outs)
    for out, launch in zip(outs, driver.launches[-4:]):
        assert (out.shape, out.stride(), out.dtype, out.device) == (
            expected.shape, expected.stride(), expected.dtype, expected.device)
        assert out.is_contiguous() and not out.requires_grad
        assert dense_params(launch)["d"] == out.data_ptr()


def test_memoised_calls_keep_no_argument_alive(driver, guard):
    import gc
    import weakref
    a, b, d = fp8_inputs(M, N, K)
    for _ in range(2):
        dgemm.fp8_gemm_nt(a, b, d)
        out = dgemm.fp8_gemm_nt(a, b)
    refs = [weakref.ref(t) for t in (*a, *b, d, out)]
    del a, b, d, out
    gc.collect()
    assert all(ref() is None for ref in refs)


def test_a_call_passing_one_tensor_twice_is_memoised_too(driver, guard, full_path):
    a, _, _ = fp8_inputs(N, N, K)
    b = (a[0], torch.ones((N // 128, K // 128)))  # b[0] is a[0]: A @ A^T
    d = torch.empty((N, N), dtype=torch.bfloat16)
    a2, b2, d2 = fp8_inputs(N, N, K)
    dgemm.fp8_gemm_nt(a2, b2, d2)                # the geometry's plan
    for _ in range(3):
        dgemm.fp8_gemm_nt(a, b, d)
        p = dense_params(driver.launches[-1])
        assert p["tma_a"]["address"] == p["tma_b"]["address"] == a[0].data_ptr()
    dgemm.fp8_gemm_nt(a2, b2, d2)
    check_dense_launch(driver.launches[-1], a2, b2, d2, m=N)
    # The Python guard takes the aliased call for the first one (same metadata); the native
    # one refuses a tensor passed twice, so that call is validated once, then memoised.
    assert len(full_path) == (2 if guard == "native" else 1)


def test_grouped_calls_after_a_memoised_one_are_validated_when_a_tensor_changed(driver, guard,
                                                                                full_path):
    a, _, _ = fp8_inputs(256, N, K)
    b = (torch.zeros((2, N, K), dtype=torch.float8_e4m3fn), torch.ones((2, N // 128, K // 128)))
    d = torch.empty((256, N), dtype=torch.bfloat16)
    layout = torch.zeros(256, dtype=torch.int32)
    for _ in range(2):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout)
    with pytest.raises(TypeError, match=r"m_indices must be int32"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, layout.long())
    with pytest.raises(ValueError, match=r"m_indices must be contiguous"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, d, torch.zeros(512, dtype=torch.int32)[::2])
    with pytest.raises(ValueError, match=r"d must be contiguous"):
        dgemm.m_grouped_fp8_gemm_nt_contiguous(a, b, torch.empty((N, 256),
                                                                 dtype=torch.bfloat16).t(), layout)

    g = 2
    ma = (torch.zeros((g, M, K), dtype=torch.float8_e4m3fn), torch.ones((g, M, K // 128)))
    md = torch.empty((g, M, N), dtype=torch.bfloat16)
    masked_m = torch.full((g,), M, dtype=torch.int32)
    for _ in range(2):
        dgemm.m_grouped_fp8_gemm_nt_masked(ma, b, md, masked_m, M)
    with pytest.raises(ValueError, match=r"masked_m must have shape"):
        dgemm.m_grouped_fp8_gemm_nt_masked(ma, b, md, torch.full((g + 1,), M, dtype=torch.int32),
                                           M)
    with pytest.raises(TypeError, match=r"masked_m must be int32"):
        dgemm.m_grouped_fp8_gemm_nt_masked(ma, b, md, masked_m.long(), M)
    assert full_path == ["m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked"]
    dgemm.m_grouped_fp8_gemm_nt_masked(ma, b, md, masked_m, M)
    assert driver.launches[-1].params[2] == masked_m.data_ptr()
    assert len(full_path) == 2


def test_a_memoised_call_keeps_few_objects_the_garbage_collector_tracks(driver):
    # bench/NOTES.md w2: a warm-up memoises a call per new M, and CPython's full collections
    # visit every tracked object it keeps; ctypes launch plans and descriptors kept ~76.
    import gc
    (a, sa), b, d = fp8_inputs(512, N, K, row_major_scales=True)

    def call(m):
        dgemm.fp8_gemm_nt((a.narrow(0, 0, m), sa.narrow(0, 0, m)), b, d.narrow(0, 0, m))

    for m in range(1, 11):
        call(m)
    gc.collect()
    before = len(gc.get_objects())
    for m in range(11, 211):
        call(m)
    gc.collect()
    assert (len(gc.get_objects()) - before) / 200 < 12
