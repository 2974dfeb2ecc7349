#include "util/Debug.h"

#include <cstdlib>

namespace cora::util {

int env_debug_level() {
    const char *s = std::getenv("CORA_DEBUG");
    return s ? std::atoi(s) : 0;
}

} // namespace cora::util
