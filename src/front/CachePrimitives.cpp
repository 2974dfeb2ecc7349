/** \file cache_write (a per-tile accumulator) and cache_read (a per-tile copy of an input's
 * region) of a Func. */
#include <algorithm>

#include "cora/Tensor.h"

#include "front/Primitives.h"
#include "front/Schedule.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora {

using namespace front;

Func &Func::cache_write(const Dim &at) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("cache_write at '", at.name(), "' in Func '", name(), "': ", msg...);
    };
    if (!is_known_dim(*node_, at.node().get()))
        fail("not a loop of this Func: ", why_not_a_loop(*node_, at.node().get()));
    if (mutable_schedule(*node_).cache_write_at) fail("it already has a cache_write");
    mutable_schedule(*node_).cache_write_at = at.node();
    return *this;
}

Func &Func::cache_read(const Tensor &t, const Dim &at) { return cache_read(t, at, {}); }

Func &Func::cache_read(const Tensor &t, const Dim &at, const std::vector<Dim> &tile_order) {
    auto fail = [&](auto &&...msg) {
        throw_compile_error("cache_read of '", t.name(), "' at '", at.name(), "' in Func '", name(), "': ", msg...);
    };
    if (!is_known_dim(*node_, at.node().get()))
        fail("not a loop of this Func: ", why_not_a_loop(*node_, at.node().get()));
    if (t.node() == node_) fail("a Func cannot cache its own storage; use cache_write");
    bool read = false;
    ir::visit_exprs(node_->value, [&](const Expr &e) {
        if (const ir::Access *a = e.as<ir::Access>()) read = read || a->tensor == t.node();
    });
    if (!read) fail("the definition does not read '", t.name(), "'");
    for (auto &c : mutable_schedule(*node_).cache_reads)
        if (c.tensor == t.node()) fail("'", t.name(), "' is already cached");
    std::vector<size_t> order;
    if (!tile_order.empty()) {
        const std::vector<ir::LayoutDim> &domain = t.node()->domain;
        std::string dims;
        for (const ir::LayoutDim &d : domain)
            dims += (dims.empty() ? "'" : ", '") + d.dim->name + "'";
        for (const Dim &d : tile_order) {
            auto it =
                std::find_if(domain.begin(), domain.end(), [&](const ir::LayoutDim &l) { return l.dim == d.node(); });
            if (it == domain.end())
                fail("the tile order names '", d.name(), "', which is not a dim of '", t.name(), "' (", dims, ")");
            const size_t pos = (size_t)(it - domain.begin());
            if (std::find(order.begin(), order.end(), pos) != order.end())
                fail("the tile order names '", d.name(), "' twice");
            order.push_back(pos);
        }
        if (order.size() != domain.size())
            fail("the tile order names ", order.size(), " of the ", domain.size(), " dims of '", t.name(), "' (", dims,
                 "); name each once");
    }
    mutable_schedule(*node_).cache_reads.push_back({t.node(), at.node(), order});
    return *this;
}

} // namespace cora
