/** \file Scalar element types. Integer index arithmetic is 64-bit; tensors hold fp32 by default.
 *
 * float16 (IEEE binary16) is a storage type: a tensor or Func may hold it, but a value read from
 * it is float32 and a value written to it is rounded to the nearest binary16 (ties to even), so
 * all arithmetic and every accumulation is fp32 (value_type()). */
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
    /** Whether values of this type exist only in storage (float16). */
    bool is_storage_only() const { return code == Code::Float && bits == 16; }
    /** The type of a value read from storage of this type: float32 for float16, else itself. */
    Type value_type() const { return is_storage_only() ? Type::Float(32) : *this; }
    bool operator==(const Type &o) const { return code == o.code && bits == o.bits; }
    bool operator!=(const Type &o) const { return !(*this == o); }
    /** "int64", "float32", "bool". */
    std::string str() const;
    /** The C type the generated code uses: "int64_t", "float", "bool"; "uint16_t" (the bits) for
     * float16. */
    std::string c_name() const;
};

inline constexpr Type Int64 = Type::Int(64);
inline constexpr Type Int32 = Type::Int(32);
inline constexpr Type Float16 = Type::Float(16);
inline constexpr Type Float32 = Type::Float(32);
inline constexpr Type Float64 = Type::Float(64);
inline constexpr Type Bool = Type::Bool();

} // namespace cora
