/** \file Building one ahead-of-time library (driver/Aot.cpp for CPUs, driver/AotCuda.cpp for CUDA):
 * a private work directory beside the output, the generated sources written there, the tools
 * run on them, and the results moved into place, so a build system never sees a half-written
 * library and a failed build leaves nothing behind. */
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace cora::driver {

class LibraryBuild {
public:
    /** Creates `output_dir` (when missing) and the work directory for library `fn` in it. */
    LibraryBuild(const std::string &output_dir, const std::string &fn);
    ~LibraryBuild(); ///< removes the work directory and what is left in it
    LibraryBuild(const LibraryBuild &) = delete;
    LibraryBuild &operator=(const LibraryBuild &) = delete;

    /** `text` written as file `name` of the work directory; its path. Error when it cannot be. */
    std::filesystem::path write(const std::string &name, const std::string &text) const;
    /** A path in the work directory. */
    std::filesystem::path path(const std::string &name) const { return work_ / name; }
    /** Runs a tool, its temporary files (TMPDIR) in the work directory; Error with the command and
     * its output when it fails. */
    void run(const std::vector<std::string> &cmd, const std::string &what) const;
    /** Moves work file `name` to the output directory (as `name`); the new path. */
    std::string publish(const std::string &name) const;

private:
    std::filesystem::path dir_, work_;
};

} // namespace cora::driver
