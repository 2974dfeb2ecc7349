/** \file NVRTC, the CUDA runtime compiler, loaded when first used (dlopen), so that cora builds,
 * links and runs without a CUDA toolkit; only compile_cuda() needs one.
 *
 * Where it looks: $CORA_NVRTC (a library path; "off": nowhere, NVRTC is unavailable), the toolkit CMake found when cora
 * was built (CORA_NVRTC_PATH), $CUDA_HOME/lib64 and $CUDA_PATH/lib64, /usr/local/cuda/lib64, then the loader's search
 * path (libnvrtc.so, .so.13, .so.12). The loaded library lives as long as the returned handle; nothing is process-wide.
 */
#pragma once

#include <memory>
#include <string>

namespace cora::driver {

class Nvrtc {
public:
    /** The first NVRTC found, or nullptr with what was tried in `why`. */
    static std::shared_ptr<Nvrtc> load(std::string *why);
    ~Nvrtc();

    /** NVRTC's version, e.g. "13.0". */
    std::string version() const;
    /** The library that was loaded. */
    const std::string &path() const { return path_; }

    struct Output {
        std::string cubin; ///< SASS for sm_<arch>, loadable by the driver API
        std::string ptx;   ///< PTX for compute_<arch> (what a newer GPU can JIT)
        std::string log;   ///< NVRTC's warnings
    };
    /** Compiles `source` (a whole translation unit) for sm_<arch>. CompileError with NVRTC's log,
     * the first lines of the source around it, and `name` on failure. */
    Output compile(const std::string &source, const std::string &name, int arch) const;

    struct Api;

private:
    Nvrtc() = default;
    void *handle_ = nullptr;
    std::string path_;
    std::unique_ptr<Api> api_;
};

} // namespace cora::driver
