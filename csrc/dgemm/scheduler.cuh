#pragma once
// Persistent tile scheduler shared by the three GEMM variants. Tiles are handed out
// round-robin (tile = blockIdx.x + i * gridDim.x) and walk bands of kNumMBlocksPerBand
// m-blocks, m-fastest, so that the CTAs of one wave share A and B tiles in L2. Only clusters
// sharing A walk bands of kNumNBlocksPerBand n-blocks, n-fastest (their unit is n-blocks wide).
//
// A cluster of kNumKSplit CTAs that split K takes one tile per unit: every CTA of it walks
// the same tiles.
// With a cluster of kNumMulticast CTAs sharing one operand (TMA multicast), the unit handed out
// is a cluster tile. Sharing A: one m-block and kNumMulticast adjacent n-blocks, CTA rank r
// taking n-block kNumMulticast * q + r (same m-block, group and skip decisions in both CTAs,
// which the shared pipeline needs; an n-block past N is computed but never stored). Sharing B
// (plain GEMM and contiguous layout): one n-block and kNumMulticast adjacent m-blocks, rank r
// taking m-block kNumMulticast * q + r; an m-block past M reads zeros and is never stored.
// On the contiguous layout the two m-blocks may belong to different groups: the pair then
// loads B each for itself (`shares_operand` false) and keeps the shared pipeline's lockstep.
#include "sync_utils.cuh"

namespace dgemm {

template <GemmType kGemmType, uint32_t SHAPE_N, uint32_t BLOCK_M, uint32_t BLOCK_N,
          uint32_t kNumGroups, uint32_t kNumMulticast, bool kMulticastOnA,
          uint32_t kNumKSplit = 1, uint32_t kNumNBlocksPerBand = 16,
          uint32_t kNumMBlocksPerBand = 16>
struct Scheduler {
    // kNumKSplit CTAs of a cluster take the same tile (each a share of its K blocks).
    static_assert(kNumKSplit == 1 or kNumMulticast == 1,
                  "a cluster either shares an operand or splits K, not both");
    static constexpr uint32_t kCtasPerUnit = kNumMulticast * kNumKSplit;
    static_assert(kNumMulticast == 1 or kMulticastOnA or kGemmType != GemmType::GroupedMasked,
                  "masked clusters share A: a cluster sharing B would need its m-blocks in one "
                  "group");
    static constexpr uint32_t kNumNBlocks = ceil_div(SHAPE_N, BLOCK_N);
    // Blocks per cluster tile along N and along M.
    static constexpr uint32_t kUnitN = kMulticastOnA ? kNumMulticast : 1;
    static constexpr uint32_t kUnitM = kMulticastOnA ? 1 : kNumMulticast;
    // Columns of the scheduling grid: n-blocks, or clusters of kUnitN n-blocks.
    static constexpr uint32_t kNumNUnits = ceil_div(kNumNBlocks, kUnitN);
    static constexpr uint32_t kBandUnits = ceil_div(kNumNBlocksPerBand, kUnitN);
    static constexpr uint32_t kBandMUnits = kNumMBlocksPerBand / kNumMulticast;

    // Normal and contiguous: the M of the whole problem. Masked: max_m (rows per group).
    uint32_t shape_m;
    uint32_t rank = 0;               // CTA rank in the cluster (the n-block within the unit)
    // Whether the current tile's shared operand is loaded once for the cluster (multicast).
    // False only for a contiguous pair sharing B whose m-blocks are in different groups.
    bool shares_operand = true;
    const int32_t* grouped_layout;   // contiguous: m_indices; masked: masked_m; else unused
    int32_t iter = -1;

    // Masked layout: groups are walked in order; these track the group of the current tile.
    uint32_t group_idx = 0;
    uint32_t group_first_tile = 0;   // index of the group's first tile in the global order
    uint32_t group_num_m_blocks = 0;

    __device__ __forceinline__ Scheduler(uint32_t shape_m, const int32_t* grouped_layout)
        : shape_m(shape_m), grouped_layout(grouped_layout) {
        if constexpr (kNumMulticast > 1)
            rank = cluster_cta_rank();
        if constexpr (kGemmType == GemmType::GroupedMasked)
            group_num_m_blocks = masked_m_blocks(0);
    }

    // Valid rows of a masked group, clamped to max_m so a bad masked_m cannot write past it.
    __device__ __forceinline__ uint32_t masked_rows(uint32_t group) const {
        const int32_t rows = __ldg(grouped_layout + group);
        return rows > 0 ? min(static_cast<uint32_t>(rows), shape_m) : 0;
    }

    __device__ __forceinline__ uint32_t masked_m_blocks(uint32_t group) const {
        return ceil_div(masked_rows(group), BLOCK_M);
    }

    // Rasterise a unit index inside an (num_m_units x kNumNUnits) grid.
    __device__ __forceinline__ void tile_coords(uint32_t unit, uint32_t num_m_units,
                                                uint32_t& m_block, uint32_t& n_block) const {
        if constexpr (kUnitN == 1) {
            // Single CTAs, K-split pairs and clusters sharing B: bands of m-units, m-fastest,
            // so that the CTAs reading one B tile are adjacent (DeepGEMM's grouping). NOTES:
            // clusters sharing B +0.4..2.6% against DeepGEMM in the same rounds (q10); single
            // CTAs on the one-wave medium-M rows +3..8% (384x4096x16384 at 128x96, 0.915 ->
            // 0.994: n-fastest had cost 13% per K block against DeepGEMM's identical tile;
            // bench/NOTES.md f2).
            const uint32_t units_per_band = kBandMUnits * kNumNUnits;
            const uint32_t band = unit / units_per_band;
            const uint32_t first_m = band * kBandMUnits;
            const uint32_t m_in_band = min(kBandMUnits, num_m_units - first_m);
            const uint32_t in_band = unit - band * units_per_band;
            m_block = (first_m + in_band % m_in_band) * kUnitM + rank;
            n_block = in_band / m_in_band;
            return;
        }
        const uint32_t units_per_band = num_m_units * kBandUnits;
        const uint32_t band = unit / units_per_band;
        const uint32_t first_n = band * kBandUnits;
        const uint32_t n_in_band = min(kBandUnits, kNumNUnits - first_n);
        const uint32_t in_band = unit - band * units_per_band;
        m_block = in_band / n_in_band;
        n_block = (first_n + in_band % n_in_band) * kUnitN + rank;
    }

    // Next tile of this CTA: returns false when there is none. `group` is the B/scale group.
    __device__ __forceinline__ bool next(uint32_t& m_block, uint32_t& n_block, uint32_t& group) {
        while (true) {
            const uint32_t tile = blockIdx.x / kCtasPerUnit +
                                  static_cast<uint32_t>(++iter) * (gridDim.x / kCtasPerUnit);
            if constexpr (kGemmType == GemmType::GroupedMasked) {
                // Walk forward to the group that holds `tile` (tiles only ever increase).
                while (tile >= group_first_tile + group_num_m_blocks * kNumNUnits) {
                    group_first_tile += group_num_m_blocks * kNumNUnits;
                    if (++group_idx >= kNumGroups)
                        return false;
                    group_num_m_blocks = masked_m_blocks(group_idx);
                }
                tile_coords(tile - group_first_tile, group_num_m_blocks, m_block, n_block);
                group = group_idx;
                return true;
            } else {
                const uint32_t num_m_units = ceil_div(ceil_div(shape_m, BLOCK_M), kUnitM);
                if (tile >= num_m_units * kNumNUnits)
                    return false;
                tile_coords(tile, num_m_units, m_block, n_block);
                if constexpr (kGemmType == GemmType::GroupedContiguous) {
                    // Groups are padded to the M alignment, so a block that starts with a
                    // padding row (-1) holds no valid row: skip it without any work.
                    int32_t g = contiguous_group(m_block);
                    if constexpr (kUnitM > 1) {
                        // Both CTAs of a pair make the same choices from the same two groups:
                        // skip only when neither block has a row; a padding block computes
                        // with its partner's group (its rows are never stored), so the pair
                        // shares B whenever one group remains.
                        const int32_t peer = contiguous_group(m_block ^ 1u);
                        if (g < 0 and peer < 0)
                            continue;
                        g = g < 0 ? peer : g;
                        shares_operand = peer < 0 or peer == g;
                    } else if (g < 0) {
                        continue;
                    }
                    group = static_cast<uint32_t>(g);
                } else {
                    group = 0;
                }
                return true;
            }
        }
    }

    // Contiguous layout: the group of m-block `m_block` (read from its first row), or -1 for
    // a block of padding rows, past M or with an out-of-range group index.
    __device__ __forceinline__ int32_t contiguous_group(uint32_t m_block) const {
        if (m_block >= ceil_div(shape_m, BLOCK_M))
            return -1;
        const int32_t g = __ldg(grouped_layout + m_block * BLOCK_M);
        return g >= 0 and g < static_cast<int32_t>(kNumGroups) ? g : -1;
    }

    // Row of A / D (in the 2-D [rows, K] / [rows, N] views) where this tile starts.
    __device__ __forceinline__ uint32_t global_row(uint32_t m_block, uint32_t group) const {
        if constexpr (kGemmType == GemmType::GroupedMasked)
            return group * shape_m + m_block * BLOCK_M;
        return m_block * BLOCK_M;
    }

    // Is row `row_in_tile` of this tile a real output row?
    __device__ __forceinline__ bool row_valid(uint32_t m_block, uint32_t group,
                                              uint32_t row_in_tile) const {
        const uint32_t m = m_block * BLOCK_M + row_in_tile;
        if constexpr (kGemmType == GemmType::GroupedMasked) {
            return m < masked_rows(group);
        } else if constexpr (kGemmType == GemmType::GroupedContiguous) {
            return m < shape_m && __ldg(grouped_layout + m) == static_cast<int32_t>(group);
        } else {
            return m < shape_m;
        }
    }
};

}  // namespace dgemm
