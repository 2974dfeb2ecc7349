/** \file The aux arrays of one compilation (or of one ragged shape): one symbol per structural key.
 *
 * Equal raggedness must be one symbol within a compilation: the simplifier cancels P(fo(f)) +
 * fi(f) = f only when the fusion maps' prefix sum is the very array of the tensor's storage, and
 * the kernel takes each array once. Across compilations nothing is shared but the key: a
 * RaggedShape builds and caches arrays by AuxSpec::key, so kernels compiled separately still share
 * them. The table lives in the LoweringContext (or a RaggedShape, or a single query) and dies
 * with it; names and ids depend only on what this table was asked for, in order, so the same
 * pipeline gives the same generated source whatever the process compiled before. */
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "ir/IR.h"

namespace cora::ir {

class AuxTable {
public:
    /** The symbol for `key`, made by `make` (kind, layout, spec, name) the first time it is asked
     * for in this table; the table sets its id. */
    std::shared_ptr<const UFNode> intern(const std::string &key, const std::function<std::shared_ptr<UFNode>()> &make);
    size_t size() const { return table_.size(); }

private:
    std::map<std::string, std::shared_ptr<const UFNode>> table_;
    uint64_t next_id_ = uint64_t(1) << 30; ///< apart from the ids of user symbols, for debug prints
};

} // namespace cora::ir
