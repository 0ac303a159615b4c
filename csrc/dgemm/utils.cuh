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

}  // namespace dgemm
