/** \file The apps' command lines: one small parser, shared by every app.
 *
 * Every flag takes a value (`--batch 32` or `--batch=32`) unless it is a switch; integers are
 * checked for syntax and range; an unknown flag, a missing value, a repeated flag or a stray
 * argument is a UsageError. `--help` prints the flags and their defaults. run_app() turns a
 * UsageError into one line `program: message` and exit status 2, and any other error (cora's
 * included) into one line and exit status 1: never an abort, never a silent default. */
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace cora::apps {

/** Bad input to a program (a flag, a value, a data file); exit status 2. */
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/** The whole of `text` as a decimal integer (an optional sign, then digits); false when it is not
 * one or does not fit. Every byte counts: "7\0junk" (an embedded NUL, where strtoll stops) and
 * " 7" are not 7. */
inline bool parse_int64(const std::string &text, int64_t *out) {
    if (text.empty() || !(text[0] == '-' || text[0] == '+' || (text[0] >= '0' && text[0] <= '9'))) return false;
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (end != text.c_str() + text.size() || errno == ERANGE) return false;
    *out = v;
    return true;
}

class CommandLine {
public:
    CommandLine(std::string program, std::string summary)
        : program_(std::move(program)), summary_(std::move(summary)) {}

    /** An integer flag in [min, max]; `value` holds the default and receives the parsed value. */
    CommandLine &integer(const std::string &flag, int64_t *value, int64_t min, int64_t max, const std::string &help) {
        add(flag, "N", help + " [" + std::to_string(min) + ", " + std::to_string(max) + "]", std::to_string(*value),
            [=](const std::string &text) { *value = parse_integer(flag, text, min, max); });
        return *this;
    }
    /** A text flag (a file name, a choice checked by the app). */
    CommandLine &text(const std::string &flag, std::string *value, const std::string &meta, const std::string &help) {
        add(flag, meta, help, value->empty() ? "" : *value, [=](const std::string &t) {
            if (t.empty()) throw UsageError(flag + " needs a non-empty value");
            *value = t;
        });
        return *this;
    }
    /** A switch: no value; present means true. */
    CommandLine &toggle(const std::string &flag, bool *value, const std::string &help) {
        add(flag, "", help, "", [=](const std::string &) { *value = true; });
        flags_.back().is_switch = true;
        return *this;
    }

    /** Parses argv. Returns false when --help was given (the help is printed; exit 0). */
    bool parse(int argc, const char *const *argv) {
        for (int i = 1; i < argc; i++) {
            std::string arg = argv[i];
            if (arg == "--help" || arg == "-h") {
                std::fputs(help().c_str(), stdout);
                return false;
            }
            if (arg.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + arg + "' (see --help)");
            std::string name = arg, value;
            bool inline_value = false;
            if (size_t eq = arg.find('='); eq != std::string::npos) {
                name = arg.substr(0, eq);
                value = arg.substr(eq + 1);
                inline_value = true;
            }
            Flag *f = find(name);
            if (!f) throw UsageError("unknown flag '" + name + "' (see --help)");
            if (seen_.count(name)) throw UsageError(name + " is given twice");
            seen_[name] = true;
            if (f->is_switch) {
                if (inline_value) throw UsageError(name + " takes no value");
                f->set("");
                continue;
            }
            if (!inline_value) {
                if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0)
                    throw UsageError(name + " needs a value (" + f->meta + ")");
                value = argv[++i];
            }
            f->set(value);
        }
        return true;
    }
    /** Whether the user gave `flag` (defaults are not "given"). */
    bool given(const std::string &flag) const { return seen_.count(flag) != 0; }

    std::string help() const {
        std::string h = "usage: " + program_ + " [flags]\n" + summary_ + "\n\nflags:\n";
        for (const Flag &f : flags_) {
            std::string left = "  " + f.name + (f.meta.empty() ? "" : " " + f.meta);
            if (left.size() < 24) left.resize(24, ' ');
            h += left + " " + f.help + (f.default_text.empty() ? "" : " (default " + f.default_text + ")") + "\n";
        }
        h += "  --help                 print this help\n";
        return h;
    }

    /** An integer in [min, max]; UsageError naming the flag otherwise. */
    static int64_t parse_integer(const std::string &flag, const std::string &text, int64_t min, int64_t max) {
        int64_t v = 0;
        if (!parse_int64(text, &v)) throw UsageError(flag + " expects an integer, got '" + text + "'");
        if (v < min || v > max)
            throw UsageError(flag + " must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                             std::to_string(v));
        return v;
    }

private:
    struct Flag {
        std::string name, meta, help, default_text;
        std::function<void(const std::string &)> set;
        bool is_switch = false;
    };
    void add(const std::string &name, const std::string &meta, const std::string &help, const std::string &def,
             std::function<void(const std::string &)> set) {
        flags_.push_back(Flag{name, meta, help, def, std::move(set)});
    }
    Flag *find(const std::string &name) {
        for (Flag &f : flags_)
            if (f.name == name) return &f;
        return nullptr;
    }

    std::string program_, summary_;
    std::vector<Flag> flags_;
    std::map<std::string, bool> seen_;
};

/** Runs an app's body: its status, or 2 after a UsageError and 1 after any other exception, each
 * reported on one line as `program: message`. */
inline int run_app(const char *program, const std::function<int()> &body) {
    try {
        return body();
    } catch (const UsageError &e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        return 2;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
        return 1;
    }
}

} // namespace cora::apps
