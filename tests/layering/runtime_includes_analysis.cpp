// Compiled with the runtime layer's include path (tests/CMakeLists.txt, layering_*): a layer may
// include the layers below it.
#include "analysis/Interpreter.h"
#include "runtime/RaggedShapeImpl.h"

int main() { return 0; }
