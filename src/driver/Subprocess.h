/** \file Run a program with an argument vector, never through a shell.
 *
 * The JIT and the AOT builder run the C++ compiler with paths that come from the environment
 * (CORA_CACHE_DIR, output directories): passed as separate arguments they are never parsed, so
 * quotes, semicolons or spaces in them are just characters of a file name. */
#pragma once

#include <string>
#include <vector>

namespace cora::driver {

struct ProcessResult {
    int exit_code = -1; ///< the program's exit status; -1 when killed by a signal
    int signal = 0;     ///< the signal that ended it, or 0
    std::string output; ///< stdout and stderr, interleaved
    bool ok() const { return exit_code == 0 && signal == 0; }
};

/** Runs argv[0] (looked up on PATH when it has no '/') with argv[1..]; waits for it and returns its
 * status and output. EnvironmentError when the program cannot be found or started, naming it.
 * `env` ("NAME=value" each) is set in the child's environment on top of this process's, replacing
 * a variable of the same name (the JIT points TMPDIR at a private directory it removes after). */
ProcessResult run_process(const std::vector<std::string> &argv, const std::vector<std::string> &env = {});

/** A command line split at whitespace (CORA_CXX="ccache clang++" gives two words). No quoting:
 * a program path with spaces cannot be named this way; put it on PATH instead. */
std::vector<std::string> split_words(const std::string &command);

/** The command for messages: words joined by spaces, each quoted when it holds a space or quote. */
std::string format_command(const std::vector<std::string> &argv);

} // namespace cora::driver
