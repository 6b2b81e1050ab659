// `deconvjit cache bench`: what the on-disk cache buys, per kernel and for a whole suite.
#pragma once

#include "cli.hpp"

namespace deconvjit::cli {

// Adds the `bench` subcommand to `cache` and returns what runs it.
Action add_cache_bench(CLI::App& cache);

}  // namespace deconvjit::cli
