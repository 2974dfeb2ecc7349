/** \file NVRTC loaded with dlopen (Nvrtc.h). The few entry points cora calls are declared here
 * with NVRTC's C ABI (nvrtcResult is an int enum, nvrtcProgram an opaque pointer), so no CUDA
 * header is needed to build cora. */
#include "driver/Nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "util/Error.h"

namespace cora::driver {

struct Nvrtc::Api {
    using Program = void *;
    int (*version)(int *, int *) = nullptr;
    const char *(*error_string)(int) = nullptr;
    int (*create)(Program *, const char *, const char *, int, const char *const *, const char *const *) = nullptr;
    int (*destroy)(Program *) = nullptr;
    int (*compile)(Program, int, const char *const *) = nullptr;
    int (*log_size)(Program, size_t *) = nullptr;
    int (*log)(Program, char *) = nullptr;
    int (*cubin_size)(Program, size_t *) = nullptr;
    int (*cubin)(Program, char *) = nullptr;
    int (*ptx_size)(Program, size_t *) = nullptr;
    int (*ptx)(Program, char *) = nullptr;
};

namespace {

template <typename F> bool bind(void *h, const char *name, F &fn) {
    fn = reinterpret_cast<F>(dlsym(h, name));
    return fn != nullptr;
}

std::vector<std::string> candidates() {
    std::vector<std::string> v;
    if (const char *p = std::getenv("CORA_NVRTC"); p && *p) v.push_back(p);
#ifdef CORA_NVRTC_PATH
    v.push_back(CORA_NVRTC_PATH);
#endif
    for (const char *env : {"CUDA_HOME", "CUDA_PATH"})
        if (const char *p = std::getenv(env); p && *p) v.push_back(std::string(p) + "/lib64/libnvrtc.so");
    v.push_back("/usr/local/cuda/lib64/libnvrtc.so");
    for (const char *so : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"})
        v.push_back(so);
    return v;
}

} // namespace

std::shared_ptr<Nvrtc> Nvrtc::load(std::string *why) {
    if (const char *p = std::getenv("CORA_NVRTC"); p && std::string(p) == "off") {
        if (why) *why = "NVRTC is switched off (CORA_NVRTC=off)";
        return nullptr;
    }
    std::string tried;
    for (const std::string &path : candidates()) {
        void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            tried += "\n  " + path + ": " + (e ? e : "not found");
            continue;
        }
        auto api = std::make_unique<Api>();
        bool ok = bind(h, "nvrtcVersion", api->version) && bind(h, "nvrtcGetErrorString", api->error_string) &&
                  bind(h, "nvrtcCreateProgram", api->create) && bind(h, "nvrtcDestroyProgram", api->destroy) &&
                  bind(h, "nvrtcCompileProgram", api->compile) && bind(h, "nvrtcGetProgramLogSize", api->log_size) &&
                  bind(h, "nvrtcGetProgramLog", api->log) && bind(h, "nvrtcGetCUBINSize", api->cubin_size) &&
                  bind(h, "nvrtcGetCUBIN", api->cubin) && bind(h, "nvrtcGetPTXSize", api->ptx_size) &&
                  bind(h, "nvrtcGetPTX", api->ptx);
        if (!ok) {
            tried += "\n  " + path + ": loaded, but it lacks NVRTC's entry points";
            dlclose(h);
            continue;
        }
        std::shared_ptr<Nvrtc> n(new Nvrtc());
        n->handle_ = h;
        n->path_ = path;
        n->api_ = std::move(api);
        return n;
    }
    if (why) *why = "NVRTC (the CUDA runtime compiler) was not found; tried:" + tried;
    return nullptr;
}

Nvrtc::~Nvrtc() {
    api_.reset();
    if (handle_) dlclose(handle_);
}

std::string Nvrtc::version() const {
    int major = 0, minor = 0;
    api_->version(&major, &minor);
    return std::to_string(major) + "." + std::to_string(minor);
}

Nvrtc::Output Nvrtc::compile(const std::string &source, const std::string &name, int arch) const {
    if (arch < 50 || arch > 200)
        throw_compile_error("CUDA architecture sm_", arch, " is not one NVRTC knows (e.g. 80 for A100, 90 for H100)");
    const Api &a = *api_;
    Api::Program prog = nullptr;
    int rc = a.create(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
    if (rc != 0) throw_runtime_error("nvrtcCreateProgram failed: ", a.error_string(rc));
    struct Release {
        const Api &a;
        Api::Program &p;
        ~Release() { a.destroy(&p); }
    } release{a, prog};
    std::string arch_flag = "--gpu-architecture=sm_" + std::to_string(arch);
    // CUDA's defaults otherwise: IEEE division and square root, denormals kept, multiply-adds
    // contracted (results differ from the CPU's in the last bits, as cuBLAS's do).
    const char *options[] = {arch_flag.c_str(), "--std=c++17", "-default-device"};
    int compiled = a.compile(prog, 3, options);
    Output out;
    size_t n = 0;
    a.log_size(prog, &n);
    out.log.resize(n);
    if (n) a.log(prog, out.log.data());
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n'))
        out.log.pop_back();
    if (compiled != 0)
        throw_compile_error("NVRTC could not compile ", name, " for sm_", arch, " (", a.error_string(compiled), "):\n",
                            out.log);
    a.cubin_size(prog, &n);
    out.cubin.resize(n);
    if (n) a.cubin(prog, out.cubin.data());
    a.ptx_size(prog, &n);
    out.ptx.resize(n);
    if (n) a.ptx(prog, out.ptx.data());
    while (!out.ptx.empty() && out.ptx.back() == '\0')
        out.ptx.pop_back();
    return out;
}

} // namespace cora::driver
