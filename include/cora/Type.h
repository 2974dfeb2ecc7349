/** \file Scalar element types. Integer index arithmetic is 64-bit; tensors hold fp32 by default. */
#pragma once

#include <cstdint>
#include <string>

namespace cora {

struct Type {
    enum class Code : uint8_t { Int, Float, Bool };
    Code code = Code::Int;
    int bits = 64;

    static constexpr Type Int(int bits = 64) { return Type{Code::Int, bits}; }
    static constexpr Type Float(int bits = 32) { return Type{Code::Float, bits}; }
    static constexpr Type Bool() { return Type{Code::Bool, 1}; }

    bool is_int() const { return code == Code::Int; }
    bool is_float() const { return code == Code::Float; }
    bool is_bool() const { return code == Code::Bool; }
    int bytes() const { return bits <= 8 ? 1 : bits / 8; }
    bool operator==(const Type &o) const { return code == o.code && bits == o.bits; }
    bool operator!=(const Type &o) const { return !(*this == o); }
    /** "int64", "float32", "bool". */
    std::string str() const;
    /** The C type the generated code uses: "int64_t", "float", "bool". */
    std::string c_name() const;
};

inline constexpr Type Int64 = Type::Int(64);
inline constexpr Type Int32 = Type::Int(32);
inline constexpr Type Float32 = Type::Float(32);
inline constexpr Type Float64 = Type::Float(64);
inline constexpr Type Bool = Type::Bool();

} // namespace cora
