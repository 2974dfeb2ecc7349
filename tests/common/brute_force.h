/** \file Brute-force check of a prover's claim over the scope used by the prover fuzz tests:
 * b < B, i < len(b), j < min(i + 1, len(b)), for every B in [1, max_batch] and every lengths
 * vector in [0, max_len]^B. */
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "analysis/Interpreter.h"
#include "ir/IRPrinter.h"

namespace cora::testing {

/** REQUIREs e >= 0 at every point of the triangular ragged scope, for all small inputs. */
inline void require_nonneg_everywhere(const Expr &e, const ir::VarNode *batch_param, const ir::VarNode *vb,
                                      const ir::VarNode *vi, const ir::VarNode *vj, int64_t max_batch,
                                      int64_t max_len) {
    for (int64_t nb = 1; nb <= max_batch; nb++) {
        std::vector<int64_t> lens(nb, 0);
        while (true) {
            ir::Interpreter in;
            in.ints[batch_param] = nb;
            in.length_value = [&](const ir::UFNode *, int64_t k) { return lens[k]; };
            for (int64_t b = 0; b < nb; b++)
                for (int64_t i = 0; i < lens[b]; i++)
                    for (int64_t j = 0; j < std::min(i + 1, lens[b]); j++) {
                        in.ints[vb] = b;
                        in.ints[vi] = i;
                        in.ints[vj] = j;
                        INFO(ir::print(e) << " at b=" << b << " i=" << i << " j=" << j);
                        REQUIRE(in.eval_int(e) >= 0);
                    }
            size_t k = 0; // next lengths vector (odometer)
            while (k < lens.size() && ++lens[k] > max_len)
                lens[k++] = 0;
            if (k == lens.size()) break;
        }
    }
}

} // namespace cora::testing
