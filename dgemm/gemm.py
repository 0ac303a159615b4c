"""Public FP8 GEMMs: validate every input, pick the kernel for the device, launch.

Checks run in a fixed order so each error is precise: argument structure and dtypes
(TypeError), then shapes, scale shapes, strides and alignment (ValueError), then devices
(RuntimeError). The device-side index tensors (m_indices, masked_m) are never read on the host:
that would synchronise the stream on the hot path.

Every GEMM is also a custom operator (`dgemm.ops`, namespace `dgemm`) whose implementation is
here (the `*_op` functions, which validate again). A public function validates its inputs in Python, then either runs the
implementation directly or calls the operator: directly when nothing could observe the
operator (plain eager mode: not inside torch.compile's tracing, no dispatch or torch-function
mode, no functorch transform, only plain tensors), because the dispatcher costs more per call
than dgemm's whole launch path (~20 us of Python per custom-operator call on a CPU host);
through the operator otherwise, so torch.compile records one node, FakeTensorMode computes
shapes without a device, and modes see the call.

A plain eager call like one validated before (argument containers; every tensor's type,
shape, strides, dtype and device, compared by one tensor guard, `dgemm.guards`; the selection
settings; the thread) takes the hot path: only the data pointers' alignment is checked again,
and the launch plan recorded for it (`dgemm.kernels.plans`) is re-pointed and launched
(`_FastCall`). No host-device sync; the only allocations are `d` when it is None and, for the
portable kernel only, the MN-major copy of row-major A scales (the Hopper kernel reads them in
place).

Kernels are loaded on first use; during CUDA graph capture a kernel that is not loaded yet
raises `KernelNotWarmError` (naming the shape and the `dgemm.warmup(...)` to run first) instead
of compiling or loading inside the capture. `dgemm.warmup` loads a range ahead of time.
"""
from __future__ import annotations

import threading
from typing import Optional, Tuple

import torch

from . import guards, heuristics, kernels, native, ops, utils
from .jit import env, launcher, state
from .jit.errors import KernelNotWarmError
from .kernels import hopper_fp8, loader, plans, portable_fp8

FP8 = torch.float8_e4m3fn
_BLOCK = 128                   # K block of one scale; rows of B per scale
_MK_ALIGNMENT = hopper_fp8.CONTIGUOUS_ALIGNMENT   # groups of the contiguous layout are padded to it
_PTR_ALIGNMENT = 16            # bytes: cp.async / TMA need 16-byte aligned bases
_DEVICE_TYPE = "cuda"          # the device the GEMMs run on (bench/stub_launch.py: "cpu")


def get_mk_alignment_for_contiguous_layout() -> int:
    """Rows of each group in `m_grouped_fp8_gemm_nt_contiguous` must be padded to this (128)."""
    return _MK_ALIGNMENT


# --- validation helpers -------------------------------------------------------------------------
def _shape(t: torch.Tensor) -> tuple:
    return tuple(t.shape)


def _describe_length(value) -> str:
    return f" of length {len(value)}" if isinstance(value, (tuple, list)) else ""


def _unpack_pair(fn: str, name: str, pair, quantize_hint: str) -> Tuple[torch.Tensor,
                                                                        torch.Tensor]:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise TypeError(f"{fn}: {name} must be a tuple (fp8 tensor, fp32 scales); got "
                        f"{type(pair).__name__}{_describe_length(pair)}. "
                        f"Build it with {quantize_hint}.")
    data, scales = pair
    for part, value in ((f"{name}[0]", data), (f"{name}[1]", scales)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{fn}: {part} must be a torch.Tensor; got {type(value).__name__}")
    if data.dtype != FP8:
        raise TypeError(f"{fn}: {name}[0] must be float8_e4m3fn; got {data.dtype} "
                        f"{_shape(data)}. Quantize it with {quantize_hint}.")
    if scales.dtype != torch.float32:
        raise TypeError(f"{fn}: {name}[1] (scales) must be float32; got {scales.dtype} "
                        f"{_shape(scales)}")
    return data, scales


def _check_tensor_dtype(fn: str, name: str, t, dtype: torch.dtype, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor ({what}); got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{fn}: {name} must be {str(dtype).replace('torch.', '')} ({what}); "
                        f"got {t.dtype} {_shape(t)}")


def _check_shape(fn: str, name: str, t: torch.Tensor, expected: tuple, meaning: str) -> None:
    if _shape(t) != expected:
        raise ValueError(f"{fn}: {name} must have shape {meaning} = {expected}; got {_shape(t)}")


def _dense_mnk(fn: str, a_data: torch.Tensor, b_data: torch.Tensor,
               k_name: str = "K") -> tuple:
    """(m, n, k) of a dense GEMM's operands a[0] (m, k) and b[0] (n, k); ValueError unless
    both are 2-D with the same K (`k_name`: how the message calls K)."""
    if a_data.dim() != 2 or b_data.dim() != 2:
        raise ValueError(f"{fn}: a[0] must be 2-D (m, k) and b[0] 2-D (n, k); got "
                         f"{_shape(a_data)} and {_shape(b_data)}")
    m, k = a_data.shape
    n, b_k = b_data.shape
    if b_k != k:
        raise ValueError(f"{fn}: a[0] is (m, k) = {_shape(a_data)} but b[0] is (n, k) = "
                         f"{_shape(b_data)}: {k_name} differs")
    return m, n, k


def _check_k(fn: str, k: int) -> None:
    if k <= 0 or k % _BLOCK != 0:
        raise ValueError(f"{fn}: K must be a positive multiple of {_BLOCK}; got K={k}. Pad A and "
                         f"B with zero columns to the next multiple of {_BLOCK}.")


def _check_contiguous(fn: str, name: str, t: torch.Tensor, real: bool = True) -> None:
    """`real`: `t` is a plain tensor outside tracing, whose address may be read. Fake tensors
    have none: for them the offset into their storage is checked (the allocator aligns every
    storage to far more than 16 bytes). While torch.compile traces, neither can be read; the
    operator's implementation checks the address when the compiled code runs."""
    if not t.is_contiguous():
        raise ValueError(f"{fn}: {name} must be contiguous (row-major); got shape {_shape(t)} "
                         f"with strides {t.stride()}. Call .contiguous() first.")
    if not real:
        if _is_compiling():
            return
        offset = t.storage_offset() * t.element_size()
        if t.numel() and offset % _PTR_ALIGNMENT != 0:
            raise ValueError(f"{fn}: {name} must start at a {_PTR_ALIGNMENT}-byte aligned "
                             f"address; got an offset of {offset} bytes into its storage (a "
                             f"view with an unaligned offset?). Clone it.")
    elif t.numel() and t.data_ptr() % _PTR_ALIGNMENT != 0:
        raise ValueError(f"{fn}: {name} must start at a {_PTR_ALIGNMENT}-byte aligned address; "
                         f"got {t.data_ptr():#x} (a view with an unaligned offset?). Clone it.")


def _check_devices(fn: str, named: Tuple[Tuple[str, torch.Tensor], ...]) -> torch.device:
    device = named[0][1].device
    if device.type != _DEVICE_TYPE:
        raise RuntimeError(f"{fn}: tensors must be on a CUDA device; {named[0][0]} is on "
                           f"{device}")
    for name, t in named[1:]:
        if t.device != device:
            raise RuntimeError(f"{fn}: every tensor must be on {device}; {name} is on "
                               f"{t.device}")
    return device


# --- eager call or operator call ----------------------------------------------------------------
_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__   # what Tensor and Parameter inherit
_is_compiling = torch.compiler.is_compiling          # torch.compile's tracer reads it as True
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_mode = torch._C._is_torch_function_mode_enabled
_functorch = torch._C._are_functorch_transforms_active


def _direct(a, sa, b, sb, d, layout=None) -> bool:
    """True when a call may run its implementation without the dispatcher (module docstring):
    not tracing, no dispatch or torch-function mode, no functorch transform, and no tensor of a
    subclass that handles dispatch itself (FakeTensor, DTensor, ...; Parameter and its plain
    subclasses are fine). The tracer never looks past `_is_compiling()`, so it always records
    the operator. Fixed arity, no loop: this runs on every eager call."""
    if _is_compiling() or _dispatch_modes() or _function_mode() or _functorch():
        return False
    plain = _PLAIN_DISPATCH
    return (type(a).__torch_dispatch__ is plain and type(sa).__torch_dispatch__ is plain
            and type(b).__torch_dispatch__ is plain and type(sb).__torch_dispatch__ is plain
            and (d is None or type(d).__torch_dispatch__ is plain)
            and (layout is None or type(layout).__torch_dispatch__ is plain))


# --- kernel choice ------------------------------------------------------------------------------
_device_archs = state.table("gemm.device_archs")    # device index -> arch of its native kernel


def _device_arch(device_index: int) -> str:
    arch = _device_archs.get(device_index)
    if arch is None:
        major, minor = torch.cuda.get_device_capability(device_index)
        if (major, minor) < (8, 0):
            name = torch.cuda.get_device_name(device_index)
            raise RuntimeError(f"dgemm needs an sm_80 or newer GPU (FP8 via mma.sync bf16); "
                               f"device {device_index} ({name}) is sm_{major}{minor}")
        arch = _device_archs[device_index] = utils.arch_for_capability(major, minor)
    return arch


def _forced_family() -> Optional[str]:
    """The portable kernel as an oracle on Hopper, if DGEMM_FORCE_PORTABLE asks for it; else
    None (the device's own family)."""
    if env.launch_value("DGEMM_FORCE_PORTABLE") is not None and env.get_bool(
            "DGEMM_FORCE_PORTABLE"):
        return portable_fp8.NAME
    return None


def selection_for(device_index: int) -> dict:
    """The hardware arguments of `heuristics.select` for calls on device `device_index`
    (`num_sms`, `arch`, `family`): what `dgemm.warmup` plans with, so it loads exactly the
    specs the calls will ask for."""
    return {"num_sms": utils.get_num_sms_for(device_index), "arch": _device_arch(device_index),
            "family": _forced_family()}


def _launch(kind: str, m: int, n: int, k: int, num_groups: int, device: torch.device,
            a, sa, b, sb, d, layout):
    """Select, load and launch; returns the launch plan used (None if the call had none) and
    whether A's scales had to be copied into the kernel's layout (`_scales_for_kernel`)."""
    index = device.index
    spec = choose_spec(kind, m, n, k, num_groups, utils.get_num_sms_for(index),
                       _device_arch(index), index)
    fingerprint = env.build_fingerprint()
    family = kernels.family(spec.kernel)
    copies = not getattr(family, "READS_STRIDED_SCALES_A", False)
    if copies:
        sa = _scales_for_kernel(sa)
    with launcher.on_device(index):
        kernel = loader.loaded(spec, index, fingerprint)
        if kernel is None:
            kernel = load_kernel(spec, index, (kind, m, n, k, num_groups), fingerprint)
        plan = plans.launch(family, spec, kernel, a, sa, b, sb, d, layout,
                            loader.current_stream(index))
    return plan, copies


def choose_spec(kind: str, m: int, n: int, k: int, num_groups: int, num_sms: int, arch: str,
                device_index=None) -> "kernels.KernelSpec":
    """The kernel one call runs: the heuristic's (`heuristics.select`; the portable family
    with DGEMM_FORCE_PORTABLE), or with DGEMM_AUTOTUNE on, its shape class's shared decision
    (`dgemm.autotune`). Pure Python unless a class must be timed."""
    spec = heuristics.select(kind, m, n, k, num_groups, num_sms=num_sms, arch=arch,
                             family=_forced_family())
    if env.autotune_on_launch():
        from . import autotune
        spec = autotune.spec_for_call(kind, m, n, k, num_groups, num_sms, arch, spec,
                                      device_index)
    return spec


def load_kernel(spec, device_index: int, problem: tuple, fingerprint: Optional[tuple] = None):
    """The loaded kernel for `spec` on a device, loaded (compiled if no tier holds it) now
    unless the current stream is capturing a CUDA graph: then KernelNotWarmError, which names
    `problem` (kind, m, n, k, num_groups) and the warm-up that avoids it."""
    fingerprint = fingerprint or env.build_fingerprint()
    if torch.cuda.is_current_stream_capturing():
        raise KernelNotWarmError(not_warm_message(problem, device_index))
    return loader.get_kernel(spec, device_index, fingerprint)


def not_warm_message(problem: tuple, device_index: int) -> str:
    kind, m, n, k, num_groups = problem
    what = {"fp8_gemm_nt": f"m={m}", "m_grouped_fp8_gemm_nt_contiguous": f"m_sum={m}",
            "m_grouped_fp8_gemm_nt_masked": f"expected_m={m}"}.get(kind)
    if what is None:        # the weight-gradient GEMMs: one kernel serves every K
        call, warm_call = {
            "fp8_gemm_nt_wgrad": ("fp8_gemm_nt(recipe=(1, 1, 128))",
                                  f"dgemm.warmup('fp8_gemm_nt', m={m}, n={n}, "
                                  f"recipe=(1, 1, 128))"),
            "k_grouped_fp8_gemm_nt_contiguous": (
                kind, f"dgemm.warmup('k_grouped_fp8_gemm_nt_contiguous', m={m}, n={n}, "
                      f"num_groups={num_groups})"),
        }[kind]
        from .warm import K_GROUPED_WARM_GROUPS
        serves = ("every K of an m x n weight gradient" if kind == "fp8_gemm_nt_wgrad" else
                  f"every K of an m x n weight gradient with this many groups; without "
                  f"num_groups, warmup loads the kernels of every group count up to "
                  f"{K_GROUPED_WARM_GROUPS}")
        return (f"{call}: m={m}, n={n} on cuda:{device_index} needs a kernel that is not "
                f"loaded yet, and the current stream is capturing a CUDA graph, where dgemm "
                f"may not compile or load one. Before capturing, run {warm_call} (one kernel "
                f"serves {serves}), dgemm.warmup(manifest=...) with a manifest whose "
                f"\"wgrad\" or \"k_grouped\" section names it, or make this call once outside "
                f"the capture.")
    groups = f", num_groups={num_groups}" if kind != "fp8_gemm_nt" else ""
    return (f"{kind}: {what}, n={n}, k={k}{groups} on cuda:{device_index} needs a kernel "
            f"that is not loaded yet, and the current stream is capturing a CUDA graph, where "
            f"dgemm may not compile or load one (it would break the capture). Before "
            f"capturing, run dgemm.warmup({kind!r}, m=[...], n={n}, k={k}{groups}) with every "
            f"{what.split('=')[0]} the graph will see (a list, or a range such as "
            f"m=range(1, 4097)), or make this call once outside the capture.")


# --- the hot path: calls like one already validated ---------------------------------------------
# A call is like an earlier, validated one when its key (`_cached`: the kind, the host-side
# ints, A's and B's shapes, which optional tensors it has, the settings selection reads, the
# thread) is the same and its tensors pass that call's tensor guard (`dgemm.guards`: each
# tensor's exact Python type, dtype, device, shape and strides). Everything the checks above
# decide except the data pointers' alignment is a function of the two, and so are the kernel
# choice and the launch plan. The first direct call runs the full path and records a
# `_FastCall` under its key (a few per key, e.g. row-major and MN-major scales of one shape);
# later calls check only the pointers' alignment (a failure takes the full path, which raises
# the precise error) and launch.
_fast_calls = state.table("gemm.fast_calls")      # key -> (_FastCall, ...), newest first
_MAX_FAST_CALLS = 4096
_MAX_PER_KEY = 4
_get_ident = threading.get_ident
_num_sms_setting = utils._num_sms                 # set_num_sms
_forced_tile_setting = heuristics._forced         # heuristics.forced_tile
_launch_settings = env.launch_settings
_empty_strided = torch.empty_strided
_empty_like = torch.empty_like
_BF16 = torch.bfloat16
_F32 = torch.float32
_PAIR_TYPES = (tuple, list)


def _cached(kind: str, a, b, t1, t2, extra) -> tuple:
    """(key, out) for a call: `t1`, `t2` are its other tensors (d, the layout; None where
    absent), `extra` its host-side ints. `key` is its memo key, or None where it may not be
    memoised (the containers are not pairs, an argument is no tensor, or a mode is active: see
    `_direct`; callers skip it while torch.compile traces, so that the tracer never meets the
    C `_hot` that replaces it). `out` is what the call returns (`t1`, or the new d when `t1` is
    None) when its key was seen and its tensors pass one of the key's guards, and then it has
    been launched; else None: nothing launched, the full path decides. One function, flat:
    this is most of a cached call's host time."""
    if (type(a) not in _PAIR_TYPES or type(b) not in _PAIR_TYPES or _dispatch_modes()
            or _function_mode() or _functorch()):
        return None, None
    # Not a pair, no tensor, an unhashable expected_m: the full path raises the precise error.
    try:
        a0, a1 = a
        b0, b1 = b
        key = (kind, extra, a0.shape, b0.shape, t1 is None, t2 is None, _num_sms_setting.get(),
               _forced_tile_setting.get(), _launch_settings(), _get_ident())
        found = _fast_calls.get(key)
    except (ValueError, AttributeError, TypeError):
        return None, None
    if found is not None:
        # _guarded(...), inlined
        if t1 is None:
            tensors = (a0, a1, b0, b1) if t2 is None else (a0, a1, b0, b1, t2)
        else:
            tensors = (a0, a1, b0, b1, t1) if t2 is None else (a0, a1, b0, b1, t1, t2)
        for fast in found:
            if fast.matches(*tensors):
                out = _empty_like(fast.d_like) if t1 is None else t1
                return key, (out if fast.run(a0, a1, b0, b1, out, t2) else None)
    return key, None


_hot = _cached          # the C `cached_call` once a call was memoised and it loads (`_bind_hot`)
_hot_bound = False


def _bind_hot() -> None:
    """Route cached calls through the C hot path (dgemm/native) when it builds and loads; the
    first memoised call tries, once per process."""
    global _hot, _hot_bound
    _hot_bound = True
    _hot = native.hot_path() or _cached


def _stored_key(key: tuple) -> tuple:
    """`_cached`'s key as `_fast_calls` keeps it: A's and B's shapes (its items 2 and 3) as
    plain tuples, equal to and hashed like the torch.Size a lookup brings, because a
    torch.Size stays tracked by the garbage collector (bench/NOTES.md, "w2")."""
    return key[:2] + (tuple(key[2]), tuple(key[3])) + key[4:]


def _guarded(a0, a1, b0, b1, t1, t2) -> tuple:
    """The tensors a call's guard covers: the optional ones only where given (a key holds
    which are, so every guard under one key takes as many)."""
    if t1 is None:
        return (a0, a1, b0, b1) if t2 is None else (a0, a1, b0, b1, t2)
    return (a0, a1, b0, b1, t1) if t2 is None else (a0, a1, b0, b1, t1, t2)


class _FastCall:
    """What a validated call launches: the plan, the device, the guard its tensors passed
    (`matches`), for d=None a template of d (`d_like`) and, for a family that needs it, the
    MN-major layout A's scales are copied to (None: the kernel reads them as they come, or
    they already have it)."""
    __slots__ = ("plan", "device", "index", "d_like", "sa_layout", "sa_mask", "matches", "native")

    def __init__(self, plan, device, d_shape, a_scales, tensors):
        self.plan = plan
        self.device = device
        self.index = device.index
        self.matches = guards.tensor_guard(*tensors).check
        self.d_like = None if d_shape is None else _d_like(device, d_shape)
        # A's scales need 16-byte alignment where the plan maps them with TMA (a call at
        # another address takes the full path, which picks the kernel's in-place loader).
        self.sa_mask = _PTR_ALIGNMENT - 1 if any(
            index == 1 and kind is not launcher.POINTER for index, kind, _ in plan.patches) else 0
        self.sa_layout = None
        if a_scales is not None and not utils.is_mn_major_tma_aligned(a_scales):
            self.sa_layout = utils.mn_major_tma_aligned_layout(a_scales)
        # What the C hot path runs `run` from; None: it calls `run` (the scales' copy).
        self.native = (None if self.sa_layout is not None else
                       (self.matches, self.index, self.d_like, self.sa_mask, plan))

    def run(self, a, sa, b, sb, d, layout) -> bool:
        """Launch; False (nothing launched) when a pointer the kernel loads through TMA is
        not 16-byte aligned (A's scales only where the plan maps them) or torch's current
        device is not the tensors' (the thread's context is then another device's: the
        full path launches under `launcher.on_device`)."""
        if self.index is not None and _current_device() != self.index:
            return False
        layout_ptr = 0 if layout is None else layout.data_ptr()
        if self.sa_layout is not None:
            shape, strides = self.sa_layout
            sa = _empty_strided(shape, strides, dtype=_F32, device=self.device).copy_(sa)
        pa, psa, pb, psb, pd = (a.data_ptr(), sa.data_ptr(), b.data_ptr(), sb.data_ptr(),
                                d.data_ptr())
        # A null pointer (a tensor without storage): the full path decides.
        if (pa | pb | psb | pd | layout_ptr | (psa & self.sa_mask)) % _PTR_ALIGNMENT or not (
                pa and psa and pb and psb and pd):
            return False
        self.plan.run((pa, psa, pb, psb, pd, layout_ptr), _current_stream(self.index))
        return True


_current_stream = loader.current_stream
_current_device = getattr(torch._C, "_cuda_getDevice", lambda: None)   # absent on CPU builds
_d_seeds = state.table("gemm.d_seeds")           # device -> a 1 x 1 BF16 tensor on it


def _d_like(device, d_shape) -> torch.Tensor:
    """What a d=None call's d is `torch.empty_like` of: the device's 1 x 1 BF16 seed expanded
    to d's shape. Zero strides are not dense, so empty_like lays d out contiguously, as
    torch.empty does (a 1 x 1 d keeps the seed's own contiguous strides), with no shape,
    stride, dtype or device argument to parse per call (~0.07 us under a bound
    `new_empty_strided(shape, strides)` on a CPU host, ~0.5 us under `torch.empty(shape,
    dtype=..., device=...)`). One seed per device: the views share its storage."""
    seed = _d_seeds.get(device)
    if seed is None:
        seed = _d_seeds[device] = torch.empty((1, 1), dtype=_BF16, device=device)
    return seed.expand(d_shape)


def _remember(key, launched, device, d_shape, tensors: tuple) -> None:
    """Memoise a validated call: `launched` is `_launch`'s (plan, whether A's scales were
    copied); `d_shape` the shape of the d a d=None call allocates (else None); `tensors` are
    `_guarded(...)` of the call's arguments (d as given)."""
    plan, copies = launched if launched is not None else (None, False)
    # With autotuning on, a call's kernel may change once its class is decided: every call
    # then takes the full path (its plan is still cached per kernel).
    if key is None or plan is None or env.autotune_on_launch():
        return
    # Pre-transformed scales at an address TMA cannot map ran in place: that plan must not
    # stand for the key, whose aligned calls take the faster TMA plan.
    a_scales = tensors[1]
    if not copies and a_scales.data_ptr() % _PTR_ALIGNMENT and utils.is_mn_major_tma_aligned(
            a_scales):
        return
    known = _fast_calls.get(key, ())
    if any(fast.matches(*tensors) for fast in known):
        return                      # it ran the full path for another reason (its device)
    if len(_fast_calls) >= _MAX_FAST_CALLS:
        _fast_calls.clear()
    fast = _FastCall(plan, device, d_shape, a_scales if copies else None, tensors)
    _fast_calls[_stored_key(key)] = (fast,) + known[:_MAX_PER_KEY - 1]
    if not _hot_bound:
        _bind_hot()


# --- public GEMMs -------------------------------------------------------------------------------
def fp8_gemm_nt(a: Tuple[torch.Tensor, torch.Tensor], b: Tuple[torch.Tensor, torch.Tensor],
                d: Optional[torch.Tensor] = None, c: Optional[torch.Tensor] = None,
                recipe=None) -> torch.Tensor:
    """D = A @ B^T with FP8 inputs and fine-grained scales, BF16 output.

    `recipe` None or (1, 128, 128): the forward GEMM below (no `c`). `recipe=(1, 1, 128)`: the
    weight-gradient GEMM (`dgemm.wgrad`): `a` = (fp8 [m, k], fp32 [m, k / 128]), `b` = (fp8
    [n, k], fp32 [n, k / 128]) (one scale per row and 128 K on both), `d` fp32 [m, n] and
    `c` fp32 [m, n] required, d = c + a . b^T, `d` may be `c`; K (the tokens) a multiple of
    128, 0 allowed.

    Requirements:
        K is a multiple of 128; any M >= 0 and N >= 1. A and B are K-major and contiguous, as
        is D. A's scales may have any layout: the Hopper kernel loads the MN-major,
        TMA-aligned one (`get_mn_major_tma_aligned_tensor`) with TMA and reads others, such as
        row-major, in place; the portable kernel gets an MN-major copy.
        All tensors live on the same CUDA device (sm_80 or newer).

    Arguments:
        a: `(lhs, lhs_scales)`: float8_e4m3fn `[m, k]` and float32 `[m, k / 128]`, one scale per
            row and 128 columns (`per_token_cast_to_fp8`).
        b: `(rhs, rhs_scales)`: float8_e4m3fn `[n, k]` and float32
            `[ceil(n / 128), k / 128]`, one scale per 128x128 block (`per_block_cast_to_fp8`).
        d: bfloat16 `[m, n]` output, or None to allocate it.

    Returns:
        `d`. (The operators: `torch.ops.dgemm.fp8_gemm_nt`, `fp8_gemm_nt_alloc` for d=None;
        with recipe (1, 1, 128): `fp8_wgrad`, `fp8_wgrad_accumulate` for d is c.)
    """
    if recipe is not None or c is not None:
        return _with_recipe(a, b, d, c, recipe)
    key, out = (None, None) if _is_compiling() else _hot("fp8_gemm_nt", a, b, d, None, None)
    if out is not None:
        return out
    a_data, a_scales, b_data, b_scales, device, direct = _checked_dense(a, b, d)
    if not direct:
        if d is None:
            return ops.FP8_GEMM_NT_ALLOC(a_data, a_scales, b_data, b_scales)
        ops.FP8_GEMM_NT(a_data, a_scales, b_data, b_scales, d)
        return d
    m, k = a_data.shape
    n = b_data.shape[0]
    guarded = _guarded(a_data, a_scales, b_data, b_scales, d, None)   # d as given
    new_d_shape = None if d is not None else (m, n)
    if d is None:
        d = torch.empty((m, n), dtype=torch.bfloat16, device=device)
    if m:
        plan = _launch("fp8_gemm_nt", m, n, k, 1, device, a_data, a_scales,
                       b_data, b_scales, d, None)
        _remember(key, plan, device, new_d_shape, guarded)
    return d


def _scales_for_kernel(a_scales: torch.Tensor) -> torch.Tensor:
    """A's scales in the MN-major, TMA-aligned layout a family without
    `READS_STRIDED_SCALES_A` (the portable kernel) takes: a copy unless they are."""
    a_scales = utils.get_mn_major_tma_aligned_tensor(a_scales)
    if a_scales.data_ptr() % _PTR_ALIGNMENT:
        raise ValueError(f"a[1] (scales) must start at a {_PTR_ALIGNMENT}-byte aligned address; "
                         f"got {a_scales.data_ptr():#x} (a view with an unaligned offset?). "
                         f"Clone it, or pass them row-major.")
    return a_scales


def _with_recipe(a, b, d, c, recipe) -> torch.Tensor:
    """fp8_gemm_nt with a recipe or a `c`: the weight-gradient GEMM, or the forward one."""
    from . import wgrad
    if wgrad.check_recipe("fp8_gemm_nt", recipe) == wgrad.WGRAD_RECIPE:
        return wgrad.wgrad_gemm_nt(a, b, d, c)
    if c is not None:
        raise ValueError(f"fp8_gemm_nt: c (accumulation) needs recipe={wgrad.WGRAD_RECIPE} "
                         f"(fp32 d = c + a . b^T); the forward recipe {wgrad.FPROP_RECIPE} "
                         f"writes bf16 d and takes no c")
    return fp8_gemm_nt(a, b, d)


def _checked_dense(a, b, d, real: Optional[bool] = None) -> tuple:
    """fp8_gemm_nt's checks; returns (a_data, a_scales, b_data, b_scales, device, real), where
    `real` (when not given) says whether the call may skip the dispatcher (`_direct`)."""
    fn = "fp8_gemm_nt"
    a_data, a_scales = _unpack_pair(fn, "a", a, "dgemm.per_token_cast_to_fp8")
    b_data, b_scales = _unpack_pair(fn, "b", b, "dgemm.per_block_cast_to_fp8")
    if d is not None:
        _check_tensor_dtype(fn, "d", d, torch.bfloat16, "the output")
    if real is None:
        real = _direct(a_data, a_scales, b_data, b_scales, d)
    m, n, k = _dense_mnk(fn, a_data, b_data)
    _check_k(fn, k)
    if n == 0:
        raise ValueError(f"{fn}: N must be at least 1; got b[0] of shape {_shape(b_data)}")
    _check_shape(fn, "a[1] (scales)", a_scales, (m, k // _BLOCK), "(m, k / 128)")
    _check_shape(fn, "b[1] (scales)", b_scales, (utils.ceil_div(n, _BLOCK), k // _BLOCK),
                 "(ceil(n / 128), k / 128)")
    if d is not None:
        _check_shape(fn, "d", d, (m, n), "(m, n)")
        _check_contiguous(fn, "d", d, real)
    _check_contiguous(fn, "a[0]", a_data, real)
    _check_contiguous(fn, "b[0]", b_data, real)
    _check_contiguous(fn, "b[1] (scales)", b_scales, real)
    named = (("a[0]", a_data), ("a[1]", a_scales), ("b[0]", b_data), ("b[1]", b_scales))
    device = _check_devices(fn, named + ((("d", d),) if d is not None else ()))
    return a_data, a_scales, b_data, b_scales, device, real


def _run_dense(a_data, a_scales, b_data, b_scales, d, device) -> None:
    m, k = a_data.shape
    if m == 0:
        return
    _launch("fp8_gemm_nt", m, b_data.shape[0], k, 1, device, a_data,
            a_scales, b_data, b_scales, d, None)


def fp8_gemm_nt_op(a, sa, b, sb, d) -> None:
    """The implementation of the operator dgemm::fp8_gemm_nt."""
    a, sa, b, sb, device, _ = _checked_dense((a, sa), (b, sb), d, real=True)
    _run_dense(a, sa, b, sb, d, device)


def fp8_gemm_nt_alloc_op(a, sa, b, sb) -> torch.Tensor:
    """The implementation of the operator dgemm::fp8_gemm_nt_alloc."""
    a, sa, b, sb, device, _ = _checked_dense((a, sa), (b, sb), None, real=True)
    d = torch.empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16, device=device)
    _run_dense(a, sa, b, sb, d, device)
    return d


def _check_grouped_b(fn: str, b_data: torch.Tensor, b_scales: torch.Tensor, k: int) -> Tuple[int,
                                                                                             int]:
    if b_data.dim() != 3:
        raise ValueError(f"{fn}: b[0] must be 3-D (groups, n, k); got {_shape(b_data)}")
    num_groups, n, b_k = b_data.shape
    if b_k != k:
        raise ValueError(f"{fn}: a[0] has K={k} but b[0] is (groups, n, k) = {_shape(b_data)}: "
                         f"K differs")
    _check_k(fn, k)
    if num_groups == 0 or n == 0:
        raise ValueError(f"{fn}: b[0] needs at least one group and one row; got "
                         f"{_shape(b_data)}")
    _check_shape(fn, "b[1] (scales)", b_scales,
                 (num_groups, utils.ceil_div(n, _BLOCK), k // _BLOCK),
                 "(groups, ceil(n / 128), k / 128)")
    return num_groups, n


def m_grouped_fp8_gemm_nt_contiguous(a: Tuple[torch.Tensor, torch.Tensor],
                                     b: Tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                                     m_indices: torch.Tensor) -> torch.Tensor:
    """Grouped GEMM over rows stacked by group: D[i] = A[i] @ B[m_indices[i]]^T.

    Requirements:
        Rows are grouped contiguously and each group's rows are padded to
        `get_mk_alignment_for_contiguous_layout()` (128), so the total M is a multiple of 128.
        Padding rows carry m_indices == -1: they are neither used nor written (their rows of
        D keep their previous contents). K is a multiple of 128. m_indices is read on the GPU
        only; its values are not checked on the host. A, B, D and m_indices are contiguous and
        on one CUDA device.

    Arguments:
        a: `(lhs, lhs_scales)`: float8_e4m3fn `[m_sum, k]` and float32 `[m_sum, k / 128]`.
        b: `(rhs, rhs_scales)`: float8_e4m3fn `[groups, n, k]` and float32
            `[groups, ceil(n / 128), k / 128]`.
        d: bfloat16 `[m_sum, n]` output.
        m_indices: int32 `[m_sum]`, the group of each row of A, or -1 for padding.

    Returns:
        `d`. (The operator: `torch.ops.dgemm.m_grouped_fp8_gemm_nt_contiguous`.)
    """
    key, out = (None, None) if _is_compiling() else _hot(
        "m_grouped_fp8_gemm_nt_contiguous", a, b, d, m_indices, None)
    if out is not None:
        return d
    a_data, a_scales, b_data, b_scales, num_groups, direct = _checked_contiguous_layout(
        a, b, d, m_indices)
    if direct:
        plan = _run_contiguous_layout(a_data, a_scales, b_data, b_scales, d, m_indices,
                                      num_groups)
        _remember(key, plan, d.device, None,
                  _guarded(a_data, a_scales, b_data, b_scales, d, m_indices))
    else:
        ops.M_GROUPED_CONTIGUOUS(a_data, a_scales, b_data, b_scales, d, m_indices)
    return d


def _checked_contiguous_layout(a, b, d, m_indices, real: Optional[bool] = None) -> tuple:
    fn = "m_grouped_fp8_gemm_nt_contiguous"
    a_data, a_scales = _unpack_pair(fn, "a", a, "dgemm.per_token_cast_to_fp8")
    b_data, b_scales = _unpack_pair(fn, "b", b, "dgemm.per_block_cast_to_fp8 per group")
    _check_tensor_dtype(fn, "d", d, torch.bfloat16, "the output")
    _check_tensor_dtype(fn, "m_indices", m_indices, torch.int32, "each row's group, -1 = padding")
    if real is None:
        real = _direct(a_data, a_scales, b_data, b_scales, d, m_indices)
    if a_data.dim() != 2:
        raise ValueError(f"{fn}: a[0] must be 2-D (m_sum, k); got {_shape(a_data)}")
    m, k = a_data.shape
    num_groups, n = _check_grouped_b(fn, b_data, b_scales, k)
    _check_shape(fn, "a[1] (scales)", a_scales, (m, k // _BLOCK), "(m_sum, k / 128)")
    _check_shape(fn, "d", d, (m, n), "(m_sum, n)")
    _check_shape(fn, "m_indices", m_indices, (m,), "(m_sum,)")
    if m % _MK_ALIGNMENT != 0:
        raise ValueError(f"{fn}: the total rows m_sum={m} must be a multiple of "
                         f"{_MK_ALIGNMENT}: pad each group's rows to "
                         f"dgemm.get_mk_alignment_for_contiguous_layout() with m_indices = -1")
    for name, t in (("a[0]", a_data), ("b[0]", b_data), ("b[1] (scales)", b_scales), ("d", d),
                    ("m_indices", m_indices)):
        _check_contiguous(fn, name, t, real)
    _check_devices(fn, (("a[0]", a_data), ("a[1]", a_scales), ("b[0]", b_data),
                        ("b[1]", b_scales), ("d", d), ("m_indices", m_indices)))
    return a_data, a_scales, b_data, b_scales, num_groups, real


def _run_contiguous_layout(a_data, a_scales, b_data, b_scales, d, m_indices,
                           num_groups: int):
    m, k = a_data.shape
    if m == 0:
        return None
    return _launch("m_grouped_fp8_gemm_nt_contiguous", m, b_data.shape[1], k, num_groups,
                   d.device, a_data, a_scales, b_data, b_scales, d,
                   m_indices)


def m_grouped_fp8_gemm_nt_contiguous_op(a, sa, b, sb, d, m_indices) -> None:
    """The implementation of the operator dgemm::m_grouped_fp8_gemm_nt_contiguous."""
    a, sa, b, sb, num_groups, _ = _checked_contiguous_layout((a, sa), (b, sb), d, m_indices,
                                                             real=True)
    _run_contiguous_layout(a, sa, b, sb, d, m_indices, num_groups)


def m_grouped_fp8_gemm_nt_masked(a: Tuple[torch.Tensor, torch.Tensor],
                                 b: Tuple[torch.Tensor, torch.Tensor], d: torch.Tensor,
                                 masked_m: torch.Tensor, expected_m: int) -> torch.Tensor:
    """Batched GEMM where only the first masked_m[g] rows of group g are real:
    D[g, :masked_m[g]] = A[g, :masked_m[g]] @ B[g]^T.

    Requirements:
        masked_m lives on the GPU and is read only by the kernel, so one captured CUDA graph
        serves any masked_m. Its values are not checked on the host (that would synchronise):
        values above max_m are treated as max_m and negative ones as 0. Rows at or past
        masked_m[g] of D are not written. K is a multiple of 128. A, B, D and masked_m are
        contiguous and on one CUDA device.

    Arguments:
        a: `(lhs, lhs_scales)`: float8_e4m3fn `[groups, max_m, k]` and float32
            `[groups, max_m, k / 128]`.
        b: `(rhs, rhs_scales)`: float8_e4m3fn `[groups, n, k]` and float32
            `[groups, ceil(n / 128), k / 128]`.
        d: bfloat16 `[groups, max_m, n]` output.
        masked_m: int32 `[groups]`, the real rows of each group.
        expected_m: a host-side hint of the typical masked_m (positive int) for the kernel
            choice; it never changes which rows are computed.

    Returns:
        `d`. (The operator: `torch.ops.dgemm.m_grouped_fp8_gemm_nt_masked`.)
    """
    key, out = (None, None) if _is_compiling() else _hot(
        "m_grouped_fp8_gemm_nt_masked", a, b, d, masked_m, (type(expected_m), expected_m))
    if out is not None:
        return d
    a_data, a_scales, b_data, b_scales, num_groups, direct = _checked_masked(
        a, b, d, masked_m, expected_m)
    if direct:
        plan = _run_masked(a_data, a_scales, b_data, b_scales, d, masked_m, expected_m,
                           num_groups)
        _remember(key, plan, d.device, None,
                  _guarded(a_data, a_scales, b_data, b_scales, d, masked_m))
    else:
        ops.M_GROUPED_MASKED(a_data, a_scales, b_data, b_scales, d, masked_m, expected_m)
    return d


def _checked_masked(a, b, d, masked_m, expected_m, real: Optional[bool] = None) -> tuple:
    fn = "m_grouped_fp8_gemm_nt_masked"
    a_data, a_scales = _unpack_pair(fn, "a", a, "dgemm.per_token_cast_to_fp8 per group")
    b_data, b_scales = _unpack_pair(fn, "b", b, "dgemm.per_block_cast_to_fp8 per group")
    _check_tensor_dtype(fn, "d", d, torch.bfloat16, "the output")
    _check_tensor_dtype(fn, "masked_m", masked_m, torch.int32, "real rows per group")
    if not isinstance(expected_m, int) or isinstance(expected_m, bool) or expected_m <= 0:
        raise ValueError(f"{fn}: expected_m must be a positive int (a hint for the kernel "
                         f"choice); got {expected_m!r}")
    if real is None:
        real = _direct(a_data, a_scales, b_data, b_scales, d, masked_m)
    if a_data.dim() != 3:
        raise ValueError(f"{fn}: a[0] must be 3-D (groups, max_m, k); got {_shape(a_data)}")
    num_groups, max_m, k = a_data.shape
    b_groups, n = _check_grouped_b(fn, b_data, b_scales, k)
    if b_groups != num_groups:
        raise ValueError(f"{fn}: a[0] has {num_groups} groups but b[0] has {b_groups}; got "
                         f"{_shape(a_data)} and {_shape(b_data)}")
    _check_shape(fn, "a[1] (scales)", a_scales, (num_groups, max_m, k // _BLOCK),
                 "(groups, max_m, k / 128)")
    _check_shape(fn, "d", d, (num_groups, max_m, n), "(groups, max_m, n)")
    _check_shape(fn, "masked_m", masked_m, (num_groups,), "(groups,)")
    for name, t in (("a[0]", a_data), ("b[0]", b_data), ("b[1] (scales)", b_scales), ("d", d),
                    ("masked_m", masked_m)):
        _check_contiguous(fn, name, t, real)
    _check_devices(fn, (("a[0]", a_data), ("a[1]", a_scales), ("b[0]", b_data),
                        ("b[1]", b_scales), ("d", d), ("masked_m", masked_m)))
    return a_data, a_scales, b_data, b_scales, num_groups, real


def _run_masked(a_data, a_scales, b_data, b_scales, d, masked_m, expected_m: int,
                num_groups: int):
    if a_data.shape[1] == 0:
        return None
    return _launch("m_grouped_fp8_gemm_nt_masked", expected_m, b_data.shape[1],
                   a_data.shape[2], num_groups, d.device, a_data, a_scales,
                   b_data, b_scales, d, masked_m)


def m_grouped_fp8_gemm_nt_masked_op(a, sa, b, sb, d, masked_m, expected_m) -> None:
    """The implementation of the operator dgemm::m_grouped_fp8_gemm_nt_masked."""
    a, sa, b, sb, num_groups, _ = _checked_masked((a, sa), (b, sb), d, masked_m, expected_m,
                                                  real=True)
    _run_masked(a, sa, b, sb, d, masked_m, expected_m, num_groups)
