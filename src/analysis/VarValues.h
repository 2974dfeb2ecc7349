/** \file The values of integer variables while the Interpreter runs (Interpreter::ints): params,
 * loop and reduction variables, lets. A flat list searched from its end, where the innermost
 * bindings are (the ones expressions read most), instead of a std::map: the map's lookups were a
 * tenth of the reference evaluator's time, and most of the sanitizer stage's time is that
 * evaluator. A handful of variables are bound at once, so a linear search is the fast one. */
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <utility>

#include "ir/Tensor.h"

namespace cora::ir {

class VarValues {
public:
    using key_type = const VarNode *;
    using mapped_type = int64_t;
    using value_type = std::pair<const VarNode *, int64_t>;
    using iterator = std::deque<value_type>::iterator;
    using const_iterator = std::deque<value_type>::const_iterator;

    VarValues() = default;
    explicit VarValues(const std::map<const VarNode *, int64_t> &values) { *this = values; }
    VarValues &operator=(const std::map<const VarNode *, int64_t> &values) {
        entries_.assign(values.begin(), values.end());
        return *this;
    }

    iterator find(const VarNode *v) {
        if (!v) return entries_.end(); // (unbound entries hold null)
        for (auto it = entries_.end(); it != entries_.begin();)
            if ((--it)->first == v) return it;
        return entries_.end();
    }
    const_iterator find(const VarNode *v) const {
        if (!v) return entries_.end();
        for (auto it = entries_.end(); it != entries_.begin();)
            if ((--it)->first == v) return it;
        return entries_.end();
    }
    iterator end() { return entries_.end(); }
    const_iterator end() const { return entries_.end(); }
    size_t count(const VarNode *v) const { return find(v) != end() ? 1 : 0; }

    /** The value of `v`, bound to 0 first when unbound. The reference stays valid while other
     * variables are bound or erased (a loop holds its variable's while its body binds others). */
    int64_t &operator[](const VarNode *v) {
        if (auto it = find(v); it != end()) return it->second;
        return entries_.emplace_back(v, 0).second;
    }
    /** Unbinds `v`. The entry is removed only from the end (with any unbound ones before it), so no
     * other entry moves; one in the middle is left unbound, found by no search. */
    size_t erase(const VarNode *v) {
        auto it = find(v);
        if (it == end()) return 0;
        it->first = nullptr;
        while (!entries_.empty() && entries_.back().first == nullptr)
            entries_.pop_back();
        return 1;
    }

private:
    std::deque<value_type> entries_;
};

} // namespace cora::ir
