// The tests' main: Catch2's, after one setting of the environment.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

int main(int argc, char **argv) {
    // Kernels' OpenMP worker threads sleep as soon as a parallel region ends (unless the caller
    // chose otherwise). By default they spin for up to 200 ms, and a test that runs a kernel and
    // then its single-threaded reference check kept a second core busy spinning: a third of the
    // encoder test's CPU time, taken from the test ctest runs beside it. The OpenMP runtime reads
    // this when the first kernel starts it, after this line.
    setenv("OMP_WAIT_POLICY", "passive", 0);
    return Catch::Session().run(argc, argv);
}
