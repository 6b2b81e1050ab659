// deconvjit shape DESC: the resolved output shape and pads, as one JSON line.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace deconvjit::cli {
namespace {

Action setup_shape(CLI::App& app) {
  auto* sub = app.add_subcommand("shape", "Print the output shape (data_format order) and resolved pads");
  auto desc = std::make_shared<std::string>();
  add_desc_argument(*sub, *desc);
  return [desc] {
    const Problem p = resolve(load_descriptor(*desc));
    nlohmann::ordered_json out;
    out["dst"] = p.dst_shape;
    out["pads_begin"] = p.pads_begin;
    out["pads_end"] = p.pads_end;
    std::cout << out.dump() << std::endl;
    return kOk;
  };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(shape, deconvjit::cli::setup_shape);
