/** \file kept_tokens (cora/Spatial.h): a per-token keep mask as ragged lengths and the positions of
 * the kept tokens, the host side of token sparsity. */
#include "cora/Spatial.h"

#include "util/Error.h"

namespace cora {

KeptTokens kept_tokens(const uint8_t *keep_mask, int64_t batch, int64_t tokens) {
    if (batch < 0 || tokens < 0) throw_runtime_error("kept_tokens: negative size ", batch, " x ", tokens);
    if (tokens > INT32_MAX || (tokens > 0 && batch > INT64_MAX / tokens))
        throw_runtime_error("kept_tokens: ", batch, " x ", tokens, " tokens is too many");
    if (batch * tokens > 0 && keep_mask == nullptr) throw_runtime_error("kept_tokens: null mask");
    KeptTokens k;
    k.lengths.assign((size_t)batch, 0);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < tokens; t++) {
            const uint8_t v = keep_mask[b * tokens + t];
            if (v > 1)
                throw_runtime_error("kept_tokens: mask element (", b, ", ", t, ") is ", (int)v, ", expected 0 or 1");
            if (v) {
                k.lengths[(size_t)b]++;
                k.positions.push_back((int32_t)t);
            }
        }
    return k;
}

} // namespace cora
