#include "analysis/AuxTable.h"

namespace cora::ir {

std::shared_ptr<const UFNode> AuxTable::intern(const std::string &key,
                                               const std::function<std::shared_ptr<UFNode>()> &make) {
    auto it = table_.find(key);
    if (it != table_.end()) return it->second;
    std::shared_ptr<UFNode> u = make();
    u->id = next_id_++;
    u->kind = UFKind::Aux;
    table_.emplace(key, u);
    return u;
}

} // namespace cora::ir
