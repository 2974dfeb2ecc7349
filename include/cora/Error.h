/** \file Exceptions thrown by cora. User mistakes are CompileError (while defining or compiling)
 * or RuntimeError (bad inputs at run time); EnvironmentError is a problem with the machine (no
 * compiler, an untrusted cache directory); InternalError means a bug in cora itself. */
#pragma once

#include <stdexcept>
#include <string>

namespace cora {

/** Base of every exception cora throws. */
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/** A mistake in a definition, layout or schedule; the message names the dim or tensor at fault. */
class CompileError : public Error {
public:
    using Error::Error;
};

/** Bad input at run time (lengths, offsets, buffer sizes, element types). Nothing was written. */
class RuntimeError : public Error {
public:
    using Error::Error;
};

/** The environment cora runs in stops it: no C++ compiler, a kernel cache directory it must not
 * trust, a file it cannot write. The message says what was looked for and how to fix it. */
class EnvironmentError : public Error {
public:
    using Error::Error;
};

/** A bug in cora: an invariant that should hold did not. */
class InternalError : public Error {
public:
    using Error::Error;
};

} // namespace cora
