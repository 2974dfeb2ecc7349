/** \file main() of a generator program (the cora::generator_main library): link it with the
 * files that define and register generators. */
#include "cora/Generator.h"

int main(int argc, char **argv) { return cora::generator_main(argc, argv); }
