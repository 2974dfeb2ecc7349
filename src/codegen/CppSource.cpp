/** \file The C++ backends' translation units (CppSource.h). */
#include "codegen/CppSource.h"

#include "codegen/CRuntime.h"
#include "codegen/CodeGen_C.h"
#include "codegen/CodeGen_Emulated.h"
#include "codegen/EntryFunction.h"
#include "util/Error.h"

namespace cora::ir {

std::string codegen_c_body(const Module &m, const std::string &symbol) {
    if (!m.device_kernels().empty()) return codegen_emulated_body(m, symbol);
    return emit_function("extern \"C\" ", symbol, m.entry());
}

std::string codegen_c(const Module &m) { return c_prologue() + "\n" + codegen_c_body(m, entry_symbol(m)); }

std::string codegen_c_batch(const std::vector<const Module *> &modules, const std::vector<std::string> &symbols) {
    CORA_CHECK(modules.size() == symbols.size(), "codegen_c_batch: one symbol per module");
    std::string src = c_prologue() + "\n";
    for (size_t i = 0; i < modules.size(); i++)
        src += "namespace cora_batch_" + std::to_string(i) + " {\n" + codegen_c_body(*modules[i], symbols[i]) +
               "} // namespace cora_batch_" + std::to_string(i) + "\n\n";
    return src;
}

} // namespace cora::ir
