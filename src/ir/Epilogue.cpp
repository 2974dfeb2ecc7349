#include "ir/Epilogue.h"

#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** The Reduce nodes of `e` that are not inside another Reduce, in pre-order. */
void outermost_reduces(const Expr &e, std::vector<Expr> &out) {
    if (!e.defined()) return;
    if (e.as<Reduce>()) {
        // The same node read twice (an epilogue such as x * erf(x)) is one reduction.
        for (const Expr &seen : out)
            if (seen.same_as(e)) return;
        out.push_back(e);
        return;
    }
    for_each_child(e, [&](const Expr &x) { outermost_reduces(x, out); });
}

} // namespace

const Reduce *scheduled_reduce(const Expr &value) {
    std::vector<Expr> found;
    outermost_reduces(value, found);
    return found.size() == 1 ? found[0].as<Reduce>() : nullptr;
}

Expr epilogue_of(const Expr &value, const Expr &acc) {
    std::vector<Expr> found;
    outermost_reduces(value, found);
    CORA_CHECK(found.size() == 1, "epilogue_of: no single reduction in the definition");
    if (value.same_as(found[0])) return Expr();
    return replace_node(value, found[0], acc);
}

} // namespace cora::ir
