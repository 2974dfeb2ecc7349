/** \file Random GPU schedules of ragged ops, shared by the emulated differential test
 * (tests/correctness/gpu_schedules.cpp) and the device test (tests/gpu/gpu_run.cpp): a ragged
 * elementwise op or a projection over packed tokens, bound as a block per sentence or as fused
 * tokens (bulk-padded or guarded) in blocks of 1..64, threads over tokens and/or outputs, serial
 * or unrolled inner loops, register tiles (cache_write at the innermost thread loop, or at the
 * block loop: the block's tile, sliced per thread in CUDA), the weight in shared memory (cache_read
 * at the block loop), or the projection's reduction bound to threads (lower/ThreadReductions.cpp). */
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cora/cora.h"

namespace cora::testing {

struct RandomGpuCase {
    Pipeline pipeline;
    std::vector<Tensor> inputs;
    std::function<void(RaggedShape &, const std::vector<int32_t> &)> bind;
    std::string description;
};

inline RandomGpuCase random_gpu_case(std::mt19937 &rng, const std::string &name) {
    Dim batch("batch"), seq("seq"), tok("tok"), to("to"), ti("ti"), o("o"), k("k"), oo("oo"), oi("oi");
    Param B("B", 1, 64);
    LengthArray len("len", B, 0, 40);
    const int K = 12, O = 16;
    const bool proj = rng() % 2;
    Tensor X("X", {{batch, B}, {seq, len(batch)}, {k, K}}), W("W", {{o, O}, {k, K}});
    Tensor A("A", {{batch, B}, {seq, len(batch)}});
    Func F("F", proj ? Shape{{batch, B}, {seq, len(batch)}, {o, O}} : Shape{{batch, B}, {seq, len(batch)}});
    if (proj)
        F.compute([&](Expr b, Expr s, Expr j) { return max(sum(k, K, X(b, s, k) * W(j, k)), 0.0f); });
    else
        F.compute([&](Expr b, Expr s) { return A(b, s) * A(b, s) - 1.0f; });
    std::string desc = proj ? "proj:" : "scale:";
    static const int64_t factors[] = {1, 3, 8, 32, 64};
    std::vector<Dim> blocks, threads, inner;
    if (rng() % 3 == 0) {
        blocks.push_back(batch);
        threads.push_back(seq);
        desc += " blocks(batch) threads(seq)";
    } else {
        int64_t f = factors[rng() % 5];
        F.fuse(batch, seq, tok);
        if (rng() % 2) {
            F.pad_loop(tok, f).fuse_storage(batch, seq, tok, f);
            desc += " bulk-pad " + std::to_string(f);
        }
        F.split(tok, to, ti, f);
        blocks.push_back(to);
        (rng() % 4 ? threads : inner).push_back(ti);
        desc += " fuse, split " + std::to_string(f);
    }
    if (proj && !blocks.empty() && rng() % 4 == 0) {
        // The reduction over threads: every output of the block's tokens reduced by T threads
        // (each every T-th k), combined in shared memory, or with warp shuffles when T is 32 or 64
        // and no other thread loop (one warp: the relu epilogue runs on lane 0; two: each warp's
        // shuffles, then its value folded in shared memory).
        Dim ko("ko"), ki("ki");
        const int64_t t = std::vector<int64_t>{4, 8, 32, 64}[rng() % 4];
        F.split(k, ko, ki, t);
        std::vector<Dim> order = blocks;
        order.insert(order.end(), threads.begin(), threads.end());
        order.insert(order.end(), inner.begin(), inner.end());
        order.push_back(o);
        order.push_back(ki);
        order.push_back(ko);
        // The token threads become serial loops: a reduction over threads needs the block's threads.
        F.reorder(order).gpu_blocks(blocks[0]).gpu_threads(ki);
        desc += " reduce over " + std::to_string(t) + " threads";
        auto bind = [B, len](RaggedShape &s, const std::vector<int32_t> &l) {
            s.set(B, (int64_t)l.size()).set(len, l);
        };
        return RandomGpuCase{Pipeline({F}, name), {X, W}, bind, desc};
    }
    if (proj) {
        int64_t f = std::vector<int64_t>{1, 2, 4, 8}[rng() % 4];
        F.split(o, oo, oi, f);
        desc += " split(o, " + std::to_string(f) + ")";
        if (rng() % 2 && threads.size() < 2)
            threads.push_back(oo);
        else
            inner.insert(inner.begin(), oo);
        std::vector<Dim> order = blocks;
        order.insert(order.end(), threads.begin(), threads.end());
        order.insert(order.end(), inner.begin(), inner.end());
        order.push_back(k);
        order.push_back(oi);
        F.reorder(order);
        if (rng() % 2) F.unroll(oi);
        const bool fused = blocks[0].name() == "to"; // the loops inside the block loop have constant extents
        const unsigned tile = rng() % 3;
        if (!threads.empty() && tile == 1 && f > 1) {
            F.cache_write(order[blocks.size() + threads.size() - 1]);
            desc += " cache_write(thread)";
        } else if (!threads.empty() && tile == 2 && fused) {
            // The block's tile: in CUDA each thread keeps its slice (slice_thread_tiles).
            F.cache_write(blocks[0]);
            desc += " cache_write(block)";
        }
        if (rng() % 2) {
            // All of W, copied per block: into shared memory by the block's threads when the
            // kernel has thread loops, else a per-thread tile.
            F.cache_read(W, blocks[0]);
            desc += " cache_read(W)";
        }
    }
    F.gpu_blocks(blocks[0]);
    if (threads.size() == 1) F.gpu_threads(threads[0]);
    if (threads.size() == 2) F.gpu_threads(threads[0], threads[1]);
    desc += " threads " + std::to_string(threads.size());
    auto bind = [B, len](RaggedShape &s, const std::vector<int32_t> &l) { s.set(B, (int64_t)l.size()).set(len, l); };
    return RandomGpuCase{Pipeline({F}, name), proj ? std::vector<Tensor>{X, W} : std::vector<Tensor>{A}, bind, desc};
}

} // namespace cora::testing
