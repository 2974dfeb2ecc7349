#include "driver/Subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/Error.h"

extern char **environ;

namespace cora::driver {

std::vector<std::string> split_words(const std::string &command) {
    std::vector<std::string> words;
    std::string w;
    for (char c : command) {
        if (c == ' ' || c == '\t' || c == '\n') {
            if (!w.empty()) words.push_back(w);
            w.clear();
        } else {
            w += c;
        }
    }
    if (!w.empty()) words.push_back(w);
    return words;
}

std::string format_command(const std::vector<std::string> &argv) {
    std::string s;
    for (const std::string &a : argv) {
        if (!s.empty()) s += ' ';
        if (a.find_first_of(" \t'\"\\;$`") == std::string::npos && !a.empty()) {
            s += a;
            continue;
        }
        s += '\'';
        for (char c : a)
            s += c == '\'' ? std::string("'\\''") : std::string(1, c);
        s += '\'';
    }
    return s;
}

namespace {

/** Closes what it holds when it goes out of scope, so no path leaks a descriptor. */
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) close(fd);
    }
    void reset() {
        if (fd >= 0) close(fd);
        fd = -1;
    }
};

struct SpawnActions {
    posix_spawn_file_actions_t actions;
    SpawnActions() { posix_spawn_file_actions_init(&actions); }
    ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
};

} // namespace

ProcessResult run_process(const std::vector<std::string> &argv, const std::vector<std::string> &env) {
    CORA_CHECK(!argv.empty() && !argv[0].empty(), "run_process: no program");
    for (const std::string &e : env)
        CORA_CHECK(e.find('=') != std::string::npos && e[0] != '=', "run_process: environment entry '", e,
                   "' is not NAME=value");
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        throw EnvironmentError(concat("cora: cannot create a pipe to run '", argv[0], "': ", std::strerror(errno)));
    Fd read_end{fds[0]}, write_end{fds[1]};
    SpawnActions sa;
    // The child writes both streams into the pipe; the dup2'd copies do not carry O_CLOEXEC.
    posix_spawn_file_actions_adddup2(&sa.actions, write_end.fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&sa.actions, write_end.fd, STDERR_FILENO);
    posix_spawn_file_actions_addopen(&sa.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);

    std::vector<char *> cargv;
    for (const std::string &a : argv)
        cargv.push_back(const_cast<char *>(a.c_str()));
    cargv.push_back(nullptr);
    std::vector<char *> cenv;
    for (const std::string &e : env)
        cenv.push_back(const_cast<char *>(e.c_str()));
    for (char **e = environ; e && *e; e++) {
        bool replaced = false;
        for (const std::string &o : env)
            replaced = replaced || std::strncmp(*e, o.c_str(), o.find('=') + 1) == 0;
        if (!replaced) cenv.push_back(*e);
    }
    cenv.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, cargv[0], &sa.actions, nullptr, cargv.data(), cenv.data());
    if (rc != 0) {
        if (rc == ENOENT)
            throw EnvironmentError(concat("cora: cannot run '", argv[0], "': no such program",
                                          argv[0].find('/') == std::string::npos ? " on PATH" : "",
                                          " (set CORA_CXX to a C++ compiler, or install clang)"));
        throw EnvironmentError(concat("cora: cannot run '", argv[0], "': ", std::strerror(rc)));
    }
    write_end.reset(); // EOF on the read end once the child exits
    ProcessResult r;
    char buf[4096];
    for (;;) {
        ssize_t n = read(read_end.fd, buf, sizeof buf);
        if (n > 0) {
            r.output.append(buf, (size_t)n);
        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            throw EnvironmentError(concat("cora: waiting for '", argv[0], "' failed: ", std::strerror(errno)));
    if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r.signal = WTERMSIG(status);
    }
    return r;
}

} // namespace cora::driver
