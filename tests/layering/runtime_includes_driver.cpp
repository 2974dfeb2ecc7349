// Compiled with the runtime layer's include path (tests/CMakeLists.txt, layering_*): an upward
// include, runtime -> driver, must not compile.
#include "driver/JIT.h"

int main() { return 0; }
