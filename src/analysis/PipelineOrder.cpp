#include "analysis/PipelineOrder.h"

#include <functional>
#include <set>

#include "ir/IRVisitor.h"
#include "util/Error.h"

namespace cora::ir {

std::vector<TensorPtr> pipeline_order(const std::vector<TensorPtr> &outputs, std::vector<TensorPtr> *inputs) {
    std::vector<TensorPtr> funcs;
    std::set<const TensorNode *> done, active;
    std::function<void(const TensorPtr &)> visit = [&](const TensorPtr &t) {
        if (done.count(t.get())) return;
        if (TensorPtr head = split_head(*t))
            throw_compile_error("'", t->name, "' is the tail of an op split of '", head->name,
                                "', not a tensor; read or output '", head->name, "' instead");
        if (t->is_input) {
            done.insert(t.get());
            if (inputs) inputs->push_back(t);
            return;
        }
        if (!t->value.defined())
            throw_compile_error("Func '", t->name, "' is used but has no definition (call compute())");
        CORA_CHECK(!active.count(t.get()), "cycle through Func '", t->name, "'");
        active.insert(t.get());
        std::vector<TensorPtr> reads;
        visit_exprs(t->value, [&](const Expr &e) {
            if (const Access *a = e.as<Access>()) reads.push_back(a->tensor);
        });
        for (auto &r : reads)
            visit(r);
        active.erase(t.get());
        done.insert(t.get());
        funcs.push_back(t);
    };
    for (auto &o : outputs)
        visit(o);
    return funcs;
}

} // namespace cora::ir
