/** \file Brute-force check of a prover's claim over the scope used by the prover fuzz tests:
 * b < B, i < len(b), j < min(i + 1, len(b)), for every B in [1, max_batch] and every lengths
 * vector in [0, max_len]^B. */
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "analysis/Interpreter.h"
#include "cora/cora.h"
#include "ir/IRPrinter.h"

namespace cora::testing {

/** Operator sets of the random index expressions the prover fuzz tests draw. */
enum class FuzzOps {
    Linear,   ///< +, -, *const, ceil_mult, /positive, min, max
    Branching ///< +, -, *const, /any non-zero (negative too), %positive, min, max, select
};

/** A random integer expression over the fuzz scope's variables i, j, len(b) and B. */
inline Expr random_fuzz_expr(std::mt19937 &rng, int depth, FuzzOps ops, const Expr &i, const Expr &j, const Expr &len_b,
                             const Expr &B) {
    if (depth == 0) {
        switch (rng() % 5) {
        case 0: return i;
        case 1: return j;
        case 2: return len_b;
        case 3: return B;
        default: return Expr((int64_t)(rng() % 9) - 4);
        }
    }
    Expr x = random_fuzz_expr(rng, depth - 1, ops, i, j, len_b, B);
    Expr y = random_fuzz_expr(rng, depth - 1, ops, i, j, len_b, B);
    if (ops == FuzzOps::Linear) {
        switch (rng() % 7) {
        case 0: return x + y;
        case 1: return x - y;
        case 2: return x * Expr((int64_t)(rng() % 5) - 2);
        case 3: return ceil_mult(x, (int64_t)(rng() % 4) + 1);
        case 4: return x / Expr((int64_t)(rng() % 4) + 1);
        case 5: return min(x, y);
        default: return max(x, y);
        }
    }
    switch (rng() % 8) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * Expr((int64_t)(rng() % 5) - 2);
    case 3: {
        int64_t d = (int64_t)(rng() % 7) - 3; // negative divisors too; never zero
        return x / Expr(d == 0 ? 2 : d);
    }
    case 4: return x % Expr((int64_t)(rng() % 4) + 1);
    case 5: return min(x, y);
    case 6: return max(x, y);
    default: return select(x < y, x, y + 1);
    }
}

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
