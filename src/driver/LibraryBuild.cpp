/** \file A library build's work directory (LibraryBuild.h). */
#include "driver/LibraryBuild.h"

#include <unistd.h>

#include <fstream>

#include "driver/Subprocess.h"
#include "util/Error.h"

namespace cora::driver {

namespace fs = std::filesystem;

LibraryBuild::LibraryBuild(const std::string &output_dir, const std::string &fn)
    : dir_(output_dir.empty() ? fs::path(".") : fs::path(output_dir)) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw Error("cora: cannot create output directory '" + dir_.string() + "': " + ec.message());
    work_ = dir_ / (".cora-" + fn + "-" + std::to_string(getpid()));
    fs::create_directories(work_, ec);
    if (ec) throw Error("cora: cannot create '" + work_.string() + "': " + ec.message());
}

LibraryBuild::~LibraryBuild() {
    std::error_code ec;
    fs::remove_all(work_, ec);
}

fs::path LibraryBuild::write(const std::string &name, const std::string &text) const {
    fs::path p = work_ / name;
    std::ofstream f(p, std::ios::binary);
    f << text;
    f.close();
    if (!f) throw Error("cora: cannot write '" + p.string() + "'");
    return p;
}

void LibraryBuild::run(const std::vector<std::string> &cmd, const std::string &what) const {
    // The compiler's own temporaries go to the work directory too, removed with it.
    ProcessResult r = run_process(cmd, {"TMPDIR=" + fs::absolute(work_).string()});
    if (!r.ok())
        throw Error("cora: " + what + " failed. Command: " + format_command(cmd) + "\n" + r.output.substr(0, 4000));
}

std::string LibraryBuild::publish(const std::string &name) const {
    fs::path from = work_ / name, to = dir_ / name;
    std::error_code ec;
    fs::rename(from, to, ec);
    if (ec) throw Error("cora: cannot move '" + from.string() + "' to '" + to.string() + "': " + ec.message());
    return to.string();
}

} // namespace cora::driver
