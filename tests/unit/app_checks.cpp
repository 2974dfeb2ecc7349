// The apps' shared helpers that decide pass/fail and read input: the error check (a NaN output must
// fail), integer parsing (every byte counts) and the data-file readers' limits.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "common/cli.h"
#include "common/data_files.h"
#include "common/error_check.h"

using namespace cora::apps;
using Catch::Matchers::Contains;

TEST_CASE("ErrorCheck fails on a value that is not finite where the reference is", "[apps][check]") {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    ErrorCheck exact;
    for (int i = 0; i < 10; i++)
        exact.add(0.5 * i, 0.5 * i);
    REQUIRE(exact.abs_within(0.0));
    REQUIRE(exact.rel_within(0.0));
    REQUIRE(exact.non_finite_note().empty());

    // All NaN against a finite reference: the old `std::max(err, fabs(got - want))` measured 0.
    ErrorCheck all_nan;
    for (int i = 0; i < 10; i++)
        all_nan.add(nan, 0.25 * i);
    REQUIRE(all_nan.max_abs() == 0.0);
    REQUIRE(all_nan.mismatches() == 10);
    REQUIRE_FALSE(all_nan.abs_within(1e30));
    REQUIRE_FALSE(all_nan.rel_within(1e30));
    REQUIRE_THAT(all_nan.non_finite_note(),
                 Contains("10 of 10 values NaN or infinite where the reference is not, or the reverse (first: "
                          "element 0 is NaN, expected 0)"));

    // One NaN among good values, an infinity, and a finite value where the reference is infinite.
    for (double bad : {nan, inf, -inf}) {
        ErrorCheck one;
        one.add(1.0, 1.0);
        one.add(bad, 2.0);
        one.add(3.0, 3.0);
        REQUIRE_FALSE(one.abs_within(1.0));
    }
    ErrorCheck reverse;
    reverse.add(1.0, inf);
    REQUIRE_FALSE(reverse.abs_within(1e300));

    // Propagation: where the reference is itself NaN or infinite, the same value agrees.
    ErrorCheck propagates;
    propagates.add(nan, nan);
    propagates.add(inf, inf);
    propagates.add(-inf, -inf);
    propagates.add(1.0, 1.0 + 1e-9);
    REQUIRE(propagates.abs_within(1e-6));
    REQUIRE(propagates.mismatches() == 0);
    ErrorCheck wrong_sign;
    wrong_sign.add(-inf, inf);
    REQUIRE_FALSE(wrong_sign.abs_within(1e300));

    // The finite errors: absolute, relative to max(1, |want|), and the reference's scale.
    ErrorCheck errs;
    errs.add(10.5, 10.0);
    errs.add(0.25, 0.0);
    REQUIRE(errs.max_abs() == 0.5);
    REQUIRE(errs.max_rel() == 0.25);
    REQUIRE(errs.scale() == 10.0);
    REQUIRE(errs.abs_within(0.5));
    REQUIRE_FALSE(errs.abs_within(0.49));
}

TEST_CASE("integers on command lines and in data files are whole: no embedded NUL, no spaces", "[apps][cli]") {
    int64_t v = 0;
    REQUIRE(parse_int64("7", &v));
    REQUIRE(v == 7);
    REQUIRE(parse_int64("-12", &v));
    REQUIRE(v == -12);
    REQUIRE(parse_int64("+3", &v));
    REQUIRE(v == 3);
    REQUIRE_FALSE(parse_int64(std::string("7\0junk", 6), &v)); // strtoll stops at the NUL
    REQUIRE_FALSE(parse_int64(std::string("7\0", 2), &v));
    REQUIRE_FALSE(parse_int64(" 7", &v));
    REQUIRE_FALSE(parse_int64("7 ", &v));
    REQUIRE_FALSE(parse_int64("", &v));
    REQUIRE_FALSE(parse_int64("0x10", &v));
    REQUIRE_FALSE(parse_int64("99999999999999999999", &v));

    std::istringstream with_nul(std::string("5 7\0junk 3\n", 11));
    REQUIRE_THROWS_AS(parse_lengths(with_nul, "lens.txt", 3, 0, 512), UsageError);
    std::istringstream with_nul_again(std::string("5 7\0junk 3\n", 11));
    REQUIRE_THROWS_WITH(parse_lengths(with_nul_again, "lens.txt", 3, 0, 512), Contains("lens.txt:1: '7\\x00junk' is not an integer"));
    std::istringstream gemm(std::string("1 2 3\n4 5\0 6\n", 13));
    REQUIRE_THROWS_WITH(parse_gemm_shapes(gemm, "shapes.txt", 2, 0, 8192), Contains("shapes.txt:2:"));
}

TEST_CASE("the data-file readers stop at their documented limits", "[apps][cli]") {
    // A line longer than kMaxLineBytes (what `--lengths /dev/zero` gives: NUL bytes, no newline).
    std::string zeros((size_t)kMaxLineBytes + 10, '\0');
    std::istringstream endless(zeros);
    REQUIRE_THROWS_WITH(parse_lengths(endless, "/dev/zero", 3, 0, 512),
                        Contains("/dev/zero:1: a line longer than 16 MiB, the limit of a data file's line"));
    std::istringstream long_gemm_line(std::string((size_t)kMaxLineBytes + 1, '1'));
    REQUIRE_THROWS_WITH(parse_gemm_shapes(long_gemm_line, "big.txt", 1, 0, 8192), Contains("big.txt:1: a line longer"));
    // Lines just under the limit are read (a lengths file may hold all its lengths on one line).
    std::string one_line;
    for (int i = 0; i < 1000; i++)
        one_line += "17 ";
    std::istringstream many(one_line);
    REQUIRE(parse_lengths(many, "one_line.txt", 1000, 0, 512).size() == 1000);
}
