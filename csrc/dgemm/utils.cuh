#pragma once
// Small shared definitions for every dgemm kernel. No system headers: NVRTC compiles these
// without a CUDA include path, which keeps cold compiles fast.

namespace dgemm {

using int32_t = int;
using uint32_t = unsigned int;
using int64_t = long long;
using uint64_t = unsigned long long;
using uint16_t = unsigned short;
using uint8_t = unsigned char;

// The three GEMM variants share one kernel body per architecture; they differ only in how
// tiles are enumerated and which rows are valid (see scheduler.cuh).
enum class GemmType : uint32_t { Normal = 0, GroupedContiguous = 1, GroupedMasked = 2 };

template <typename T>
__host__ __device__ constexpr T gcd(T a, T b) { return b == 0 ? a : gcd(b, a % b); }

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }

// A compile-time unsigned value passed as an argument (generic lambdas read `decltype(c)::value`).
template <uint32_t kValue>
struct Constant {
    static constexpr uint32_t value = kValue;
};

// A run-time value read like a Constant (`c.value`), so one generic lambda serves both.
struct RuntimeValue {
    uint32_t value;
};

// Calls f(Constant<v>{}) for the v in {kFirst, kFirst + kStep, ...} (below kEnd) that equals
// `value`, and f(Constant<last>{}) when none does: a run-time value from a small known set
// becomes a template constant, at the cost of one copy of f per value.
template <uint32_t kFirst, uint32_t kStep, uint32_t kEnd, typename F>
__device__ __forceinline__ void dispatch_constant(uint32_t value, F&& f) {
    if constexpr (kFirst + kStep >= kEnd) {
        f(Constant<kFirst>{});
    } else {
        if (value == kFirst)
            f(Constant<kFirst>{});
        else
            dispatch_constant<kFirst + kStep, kStep, kEnd>(value, f);
    }
}

}  // namespace dgemm
