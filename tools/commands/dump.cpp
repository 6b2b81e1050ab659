// deconvjit dump DESC -o FILE: the generated machine code, raw (e.g. for objdump -b binary -m i386:x86-64 -D).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace deconvjit::cli {
namespace {

struct DumpArgs {
  std::string desc, output, isa = "best", hints;
};

int dump(const DumpArgs& a) {
  Options options;
  options.max_isa = isa_from_string(a.isa);
  options.hints = load_hints(a.hints);
  const Kernel kernel = compile(load_descriptor(a.desc), options);
  write_file_atomically(a.output, kernel.code(), kernel.code_size());
  nlohmann::ordered_json out;
  out["kernel"] = kernel.name();
  out["isa"] = to_string(kernel.isa());
  out["bytes"] = kernel.code_size();
  std::cout << out.dump() << std::endl;
  return kOk;
}

Action setup_dump(CLI::App& app) {
  auto* sub = app.add_subcommand("dump", "Write the kernel's generated machine code to a file");
  auto a = std::make_shared<DumpArgs>();
  add_desc_argument(*sub, a->desc);
  sub->add_option("-o,--output", a->output, "file for the raw code bytes")->required();
  add_isa_option(*sub, a->isa);
  add_hints_option(*sub, a->hints);
  return [a] { return dump(*a); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(dump, deconvjit::cli::setup_dump);
