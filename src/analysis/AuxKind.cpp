/** \file The kinds of aux arrays (AuxKind.h): one immutable object per AuxSpec::Kind. */
#include "analysis/AuxKind.h"

#include "util/Error.h"

namespace cora::ir {

// Defined in the kind's own file.
const AuxKind &prefix_sum_kind();
const AuxKind &fusion_map_kind(bool outer);
const AuxKind &longest_first_kind();

const AuxKind &aux_kind(const AuxSpec &spec) {
    switch (spec.kind) {
    case AuxSpec::Kind::PrefixSum: return prefix_sum_kind();
    case AuxSpec::Kind::FusedOuter: return fusion_map_kind(true);
    case AuxSpec::Kind::FusedInner: return fusion_map_kind(false);
    case AuxSpec::Kind::LongestFirst: return longest_first_kind();
    }
    internal_failure("aux array '", spec.key, "' has no kind");
}

} // namespace cora::ir
