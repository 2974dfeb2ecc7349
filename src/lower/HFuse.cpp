/** \file Step: horizontal fusion (Func::hfuse).
 *
 * The outermost loops of a group of independent ops become one loop over the sum of their
 * extents, with an if-chain over the cumulative extents, placed where the last member's nest was.
 * Checked: the members do not read each other, no op computed between them reads one, the
 * outermost statements are loops of one kind.
 * Tests: tests/correctness/fusion_padding.cpp, tests/error/schedule_errors.cpp. */
#include <algorithm>
#include <optional>

#include "analysis/Simplify.h"
#include "lower/Scheduling.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Horizontal fusion of the nests of `group` (leader first) into one loop, placed where the
 * last member's nest was; the others' places become empty. `ops` lists the ops in order. */
void hfuse_group(const std::vector<TensorPtr> &group, const std::vector<TensorPtr> &ops, std::vector<Stmt> &nests,
                 const LoweringContext &ctx) {
    const std::string &leader = group[0]->name;
    auto fail = [&](auto &&...msg) { throw_compile_error("hfuse of Func '", leader, "': ", msg...); };
    std::vector<size_t> pos;
    for (const TensorPtr &m : group) {
        auto it = std::find(ops.begin(), ops.end(), m);
        if (it == ops.end()) fail("'", m->name, "' is not computed by this pipeline");
        pos.push_back((size_t)(it - ops.begin()));
    }
    size_t first = *std::min_element(pos.begin(), pos.end()), last = *std::max_element(pos.begin(), pos.end());
    for (const TensorPtr &a : group)
        for (const TensorPtr &b : group)
            if (a != b && reads(a, b, ctx))
                fail("'", a->name, "' reads '", b->name, "'; fused ops must be independent");
    for (size_t k = first + 1; k < last; k++) {
        bool member = std::find(pos.begin(), pos.end(), k) != pos.end();
        for (const TensorPtr &m : group)
            if (!member && reads(ops[k], m, ctx))
                fail("'", ops[k]->name, "', computed between the fused ops, reads '", m->name, "'");
    }
    VarPtr x = make_var("hfused_" + leader, VarRole::Index);
    Expr offset = IntImm::make(0);
    std::vector<std::pair<Expr, Stmt>> cases; // (end of range, body)
    std::optional<ForKind> kind;
    for (size_t i = 0; i < group.size(); i++) {
        const For *loop = nests[pos[i]].as<For>();
        if (!loop) fail("the outermost statement of '", group[i]->name, "' is not a loop (a guard sits outside it)");
        if (kind && *kind != loop->for_kind)
            fail("the outermost loops differ in kind (parallel, serial, vectorized, unrolled)");
        kind = loop->for_kind;
        Expr end = simplify(Add::make(offset, loop->extent));
        cases.emplace_back(end, LetStmt::make(loop->var, simplify(Sub::make(var_expr(x), offset)), loop->body));
        offset = end;
    }
    Stmt body = cases.back().second;
    for (int i = (int)cases.size() - 2; i >= 0; i--)
        body = IfThenElse::make(LT::make(var_expr(x), cases[(size_t)i].first), cases[(size_t)i].second, body);
    for (size_t p : pos)
        nests[p] = Block::make({});
    nests[last] = For::make(x, IntImm::make(0), offset, *kind, body);
}

} // namespace

Stmt apply_hfuse(const std::vector<TensorPtr> &ops, std::vector<Stmt> nests, const LoweringContext &ctx) {
    for (const TensorPtr &op : ops) {
        if (front::schedule_of(*op).hfuse.empty()) continue;
        std::vector<TensorPtr> group{op};
        std::vector<TensorPtr> members = front::hfuse_members(*op);
        group.insert(group.end(), members.begin(), members.end());
        hfuse_group(group, ops, nests, ctx);
    }
    return Block::make(nests);
}

} // namespace cora::ir
