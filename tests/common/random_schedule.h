/** \file Random schedules for differential tests: an operation split of a random dim (at a
 * floor multiple or a clamped constant; the tail gets a random schedule of its own and is
 * sometimes horizontally fused with the head), a fuse of the two outermost loops (illegal
 * when their extents do not allow it), loop padding with matching storage padding, splits
 * (sometimes nested), reorders (which may be illegal), parallel, vectorize and unroll on loops
 * whose extent is a constant; optionally the reduction dim as a loop, cache_write at a loop
 * that has every reduction loop and only constant loops over the Func's dims inside, and
 * cache_read of the tensors it reads. */
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cora/cora.h"

namespace cora::testing {

struct ScheduledLoop {
    Dim dim;
    bool constant;
    bool reduction = false;
};

/** The extra choices of a random schedule: the dim that reductions run over (scheduled as a
 * loop when the Func's definition is one reduction over it) and tensors that may be cached. */
struct ScheduleChoices {
    const Dim *reduction = nullptr;
    std::vector<Tensor> cacheable;
    bool specialize = false; ///< sometimes specialize_interior at a random loop of the final nest
};

/** Apply a random schedule to `f`; returns a description for failure messages. `*grouped` is
 * set when `f` was put in a horizontal fusion group (with its op-split tail). */
inline std::string random_schedule(Func &f, std::mt19937 &rng, bool *grouped = nullptr, bool allow_op_split = true,
                                   const ScheduleChoices &choices = {}) {
    std::vector<ScheduledLoop> loops;
    for (const DimExtent &d : f.domain())
        loops.push_back({d.dim, false});
    std::string desc = f.name() + ":";
    static const int64_t factors[] = {1, 2, 3, 4, 8, 16};
    size_t split_at = loops.size(); // the op-split dim, which the head may not pad
    std::string tail_desc;
    if (allow_op_split && rng() % 3 == 0) {
        std::vector<DimExtent> dom = f.domain();
        split_at = rng() % dom.size();
        Expr e = dom[split_at].extent;
        int64_t m = factors[1 + rng() % 4];
        bool at_multiple = rng() % 3 != 0;
        Func tail = f.split_op(dom[split_at].dim, at_multiple ? floor_mult(e, m) : min(e, Expr((int)m)));
        desc += " split_op(" + dom[split_at].dim.name() + (at_multiple ? ", floor_mult " : ", min ") +
                std::to_string(m) + ")";
        tail_desc = "  " + random_schedule(tail, rng, nullptr, false, choices);
        if (rng() % 2) {
            f.hfuse({tail});
            tail_desc += " hfuse(head, tail)";
            if (grouped) *grouped = true;
        }
    }
    bool outer_padded = false;
    if (size_t at = rng() % loops.size(); rng() % 4 == 0 && at != split_at) {
        // Pad one loop and the storage with it (same or larger multiple); padded iterations
        // read unpadded inputs, so they keep a guard unless the prover shows them safe.
        // (Not the op-split dim: padded head rows would write the tail.)
        int64_t m = factors[1 + rng() % 5];
        try {
            f.pad_storage(loops[at].dim, m * (1 + (int64_t)(rng() % 2)));
            f.pad_loop(loops[at].dim, m);
            desc += " pad(" + loops[at].dim.name() + ", " + std::to_string(m) + ")";
            outer_padded = at == 0;
        } catch (const CompileError &) {
            // A dim other extents depend on has no padded storage; leave it unpadded.
        }
    }
    if (!outer_padded && rng() % 4 == 0) {
        // Longest-first over the outermost loop, by the extent of the next dim (or 1).
        Dim rank(loops[0].dim.name() + "r");
        std::vector<DimExtent> dom = f.domain();
        Expr cost = dom.size() >= 2 ? dom[1].extent : Expr(1);
        f.remap_longest_first(loops[0].dim, rank, cost);
        desc += " remap_longest_first(" + loops[0].dim.name() + ")";
        loops[0] = {rank, false};
    }
    if (loops.size() >= 2 && !outer_padded && rng() % 3 == 0) {
        Dim fused(loops[0].dim.name() + loops[1].dim.name());
        f.fuse(loops[0].dim, loops[1].dim, fused);
        desc += " fuse(" + loops[0].dim.name() + ", " + loops[1].dim.name() + ")";
        loops.erase(loops.begin());
        loops[0] = {fused, false};
    }
    if (choices.reduction && rng() % 2) {
        // Schedule the reduction as a loop (innermost until reordered); naming it claims it.
        try {
            f.reorder({*choices.reduction});
            f.reorder({}); // keep the claim, drop the (trivial) order
            loops.push_back({*choices.reduction, false, true});
            desc += " reduction_loop(" + choices.reduction->name() + ")";
        } catch (const CompileError &) {
            // The definition is not one reduction over it.
        }
    }
    int splits = (int)(rng() % 3);
    for (int s = 0; s < splits; s++) {
        size_t at = rng() % loops.size();
        int64_t factor = factors[rng() % 6];
        Dim parent = loops[at].dim;
        Dim outer(parent.name() + "o"), inner(parent.name() + "i");
        f.split(parent, outer, inner, factor);
        desc += " split(" + parent.name() + ", " + std::to_string(factor) + ")";
        bool reduction = loops[at].reduction;
        loops[at] = {inner, true, reduction};
        loops.insert(loops.begin() + (long)at, ScheduledLoop{outer, false, reduction});
    }
    if (rng() % 2) {
        std::shuffle(loops.begin(), loops.end(), rng);
        std::vector<Dim> order;
        desc += " reorder(";
        for (auto &l : loops) {
            order.push_back(l.dim);
            desc += l.dim.name() + " ";
        }
        desc += ")";
        f.reorder(order);
    }
    std::vector<size_t> free(loops.size());
    for (size_t i = 0; i < free.size(); i++)
        free[i] = i;
    std::shuffle(free.begin(), free.end(), rng);
    if (rng() % 2 && !free.empty() && !loops[free.back()].reduction) {
        f.parallel(loops[free.back()].dim);
        desc += " parallel(" + loops[free.back()].dim.name() + ")";
        free.pop_back();
    }
    for (size_t i : free) {
        if (!loops[i].constant) continue;
        int r = (int)(rng() % 3);
        if (r == 0 && !loops[i].reduction) {
            f.vectorize(loops[i].dim);
            desc += " vectorize(" + loops[i].dim.name() + ")";
        } else if (r == 1) {
            f.unroll(loops[i].dim);
            desc += " unroll(" + loops[i].dim.name() + ")";
        }
    }
    // cache_write at a loop whose inner loops over the Func's dims all have constant extents
    // and that has every reduction loop inside it.
    std::vector<size_t> tile_at;
    for (size_t c = 0; c < loops.size(); c++) {
        bool ok = true;
        for (size_t k = 0; k < loops.size(); k++)
            ok = ok && (k > c ? loops[k].constant || loops[k].reduction : !loops[k].reduction);
        if (ok) tile_at.push_back(c);
    }
    if (!tile_at.empty() && rng() % 3 == 0) {
        size_t c = tile_at[rng() % tile_at.size()];
        f.cache_write(loops[c].dim);
        desc += " cache_write(" + loops[c].dim.name() + ")";
    }
    if (choices.specialize && rng() % 3 == 0) {
        const Dim &at = loops[rng() % loops.size()].dim;
        f.specialize_interior(at);
        desc += " specialize_interior(" + at.name() + ")";
    }
    // cache_read of a tensor it reads, at a loop with only constant loops inside.
    for (const Tensor &t : choices.cacheable) {
        if (rng() % 4 != 0) continue;
        size_t c = loops.size() - 1;
        while (c > 0 && loops[c].constant)
            c--;
        try {
            f.cache_read(t, loops[c].dim);
            desc += " cache_read(" + t.name() + ", " + loops[c].dim.name() + ")";
        } catch (const CompileError &) {
            // It does not read t.
        }
    }
    return desc + tail_desc;
}

} // namespace cora::testing
