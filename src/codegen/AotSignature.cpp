/** \file The self-description an AOT library exports as `<fn>_signature()` (AotLibrary.h): its
 * arguments as JSON, so that a foreign caller (cora's Python loader, python/cora/aot.py) can call
 * the generic entry `<fn>_argv` and the size query `<fn>_buffer_sizes_argv` without the header. */
#include <sstream>

#include "codegen/AotLibrary.h"
#include "codegen/EntryFunction.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if ((unsigned char)c < 0x20) {
            static const char *hex = "0123456789abcdef";
            out += "\\u00";
            out += hex[(c >> 4) & 0xf];
            out += hex[c & 0xf];
        } else {
            out += c;
        }
    }
    return out + "\"";
}

} // namespace

std::string aot_signature(const Module &m, const std::string &fn, bool cuda) {
    const LoweredFunc *size_query = m.function(FunctionKind::SizeQuery);
    CORA_CHECK(size_query != nullptr, "aot_signature: the module has no size query");
    std::vector<const ModuleArg *> abi = arg_list(m.entry()), shape = arg_list(*size_query),
                                   counted = tensor_args(m.entry());
    for (const ModuleArg *a : abi) // the size query's order, as the header's enum: tensors, then length arrays
        if (a->kind == ModuleArg::Kind::LengthArray) counted.push_back(a);
    auto index_in = [](const std::vector<const ModuleArg *> &list, const ModuleArg *a) { // functions own their args
        for (size_t i = 0; i < list.size(); i++)
            if (list[i]->kind == a->kind && list[i]->name == a->name) return (int64_t)i;
        return (int64_t)-1;
    };
    static const char *kinds[] = {"param", "length_array", "aux_array", "input", "output"};
    std::ostringstream j;
    j << "{\"format\": 1, \"function\": " << json_string(fn) << ", \"device\": " << (cuda ? "\"cuda\"" : "\"cpu\"")
      << ", \"arguments\": [";
    for (size_t i = 0; i < abi.size(); i++) {
        const ModuleArg *a = abi[i];
        j << (i ? ", " : "") << "{\"name\": " << json_string(a->name) << ", \"kind\": \"" << kinds[(int)a->kind]
          << "\", \"type\": \"" << (a->kind == ModuleArg::Kind::Param ? std::string("int64") : a->var->type.str())
          << "\"";
        if (a->kind == ModuleArg::Kind::Param)
            j << ", \"min\": " << a->var->min_value << ", \"max\": " << a->var->max_value;
        else if (a->kind == ModuleArg::Kind::LengthArray)
            j << ", \"min\": " << a->uf->min_value << ", \"max\": " << a->uf->max_value;
        j << ", \"size_index\": " << index_in(counted, a) << ", \"shape_index\": " << index_in(shape, a)
          << ", \"layout\": " << json_string(a->layout) << "}";
    }
    j << "], \"size_count\": " << counted.size() << "}";
    return j.str();
}

} // namespace cora::ir
