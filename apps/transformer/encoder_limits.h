/** \file Sizes the encoder's kernels are generated for, shared by their definitions (encoder_def.h)
 * and the program that calls them (encoder.cpp), which does not include cora. */
#pragma once

#include <cstdint>

namespace cora::apps {

constexpr int64_t kHeadDim = 64; ///< features per attention head (1 / sqrt(64) = 1 / 8 scales the scores)
/// Bulk padding of the packed token dim in storage: a multiple of every token GEMM's register
/// tile rows (4 with AVX-512, 6 with AVX2), so each target's GEMM can pad its loop to whole tiles.
/// The layout does not depend on it (tokens are packed either way), only the buffers' sizes.
constexpr int64_t kTokenPad = 48;
constexpr int64_t kWeightPanel = 16;  ///< columns per stored panel of a token GEMM's weight
constexpr int64_t kKeyTile = 16;      ///< keys per vector tile of the attention scores
constexpr int64_t kScoreRows = 6;     ///< query rows per register tile of the attention scores
constexpr int64_t kValueRows = 4;     ///< query rows per register tile of AttnV (AVX2: 4 x 2 vectors)
constexpr int64_t kValueRowsWide = 6; ///< the same with 32 vector registers (AVX-512: 6 x 4 vectors)
constexpr int32_t kMaxLen = 512;      ///< the longest sequence (the length arrays' declared range)
constexpr float kLayerNormEps = 1e-5f;

} // namespace cora::apps
