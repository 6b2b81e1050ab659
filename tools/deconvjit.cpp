// The `deconvjit` command-line tool. Subcommands live in tools/commands/, one file each, and register
// themselves (see cli.hpp); this file only parses, dispatches and turns failures into exit codes.
#include <iostream>

#include "cli.hpp"

namespace {

using deconvjit::cli::Exit;

const char* kExitCodes =
    "Exit codes: 0 success; 1 check found a mismatch; 2 invalid descriptor, argument or file;\n"
    "3 requested ISA not available on this CPU; 4 unsupported problem; 5 internal error.";

// Scripts read the first stderr line, so a message is always exactly one line.
int fail(int code, std::string message) {
  constexpr size_t kMaxMessage = 2000;  // messages quote excerpts; this is the backstop for anything else
  if (message.size() > kMaxMessage) message = message.substr(0, kMaxMessage - 3) + "...";
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::cerr << "error: " << message << "\n";
  return code;
}

// Usage errors get one `error:` line like every other failure; help and version print normally.
int parse_failure(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  return fail(Exit::kInvalid, std::string(e.what()) + " (run with --help for usage)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"deconvjit: transposed convolution (ConvolutionBackpropData) JIT compiler for x86-64"};
  app.footer(kExitCodes);
  app.set_version_flag("--version", deconvjit::version());
  app.require_subcommand(1);
  std::map<std::string, deconvjit::cli::Action> actions;
  for (const auto& [name, setup] : deconvjit::cli::registered_commands()) actions[name] = setup(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_failure(app, e);
  }
  try {
    return actions.at(app.get_subcommands().at(0)->get_name())();
  } catch (const deconvjit::Error& e) {
    return fail(deconvjit::cli::exit_code(e.kind()), e.what());
  } catch (const std::exception& e) {
    return fail(Exit::kInternal, std::string("internal: ") + e.what());
  }
}
