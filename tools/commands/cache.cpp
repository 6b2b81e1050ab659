// deconvjit cache ls|verify|clear|bench [--cache DIR]: inspects and manages the on-disk kernel cache.
#include <iostream>
#include <map>
#include <memory>

#include "cli.hpp"
#include "commands/cache_bench.hpp"

namespace deconvjit::cli {
namespace {

std::string cache_dir(const std::string& given) {
  const std::string dir = given.empty() ? default_cache_dir() : given;
  if (dir.empty())
    throw Error(Error::Kind::InvalidArgument,
                "the disk cache is disabled (DECONVJIT_CACHE_DIR is set but empty): give --cache DIR");
  return dir;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

int list(const std::string& dir) {
  uint64_t bytes = 0;
  const std::vector<DiskCacheEntry> entries = disk_cache_entries(dir);
  for (const DiskCacheEntry& e : entries) {
    bytes += e.file_size;
    std::cout << base_name(e.path) << "  " << (e.isa.empty() ? "?" : e.isa) << "  " << e.file_size << " B  "
              << (e.kernel_name.empty() ? "?" : e.kernel_name) << "  " << e.descriptor;
    if (!e.valid) std::cout << "  [invalid: " << e.error << "]";
    std::cout << "\n";
  }
  std::cout << entries.size() << " entries, " << bytes << " bytes in " << dir << "\n";
  return kOk;
}

int verify(const std::string& dir) {
  size_t bad = 0;
  const std::vector<DiskCacheEntry> entries = disk_cache_entries(dir);
  for (const DiskCacheEntry& e : entries) {
    if (e.valid) {
      std::cout << "ok    " << base_name(e.path) << "  " << e.kernel_name << "\n";
    } else {
      ++bad;
      std::cout << "bad   " << base_name(e.path) << "  " << e.error << "\n";
    }
  }
  std::cout << entries.size() << " entries: " << entries.size() - bad << " valid, " << bad
            << " would be rejected and recompiled\n";
  return bad ? 1 : kOk;
}

int clear(const std::string& dir) {
  std::cout << "removed " << disk_cache_clear(dir) << " files from " << dir << "\n";
  return kOk;
}

Action setup_cache(CLI::App& app) {
  auto* sub = app.add_subcommand("cache", "Inspect or manage the on-disk kernel cache");
  sub->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto actions = std::make_shared<std::map<std::string, Action>>();
  const auto add = [&](const char* name, const char* help, int (*run)(const std::string&)) {
    auto* c = sub->add_subcommand(name, help);
    c->add_option("--cache", *dir, "cache directory (default: DECONVJIT_CACHE_DIR or ~/.cache/deconvjit)");
    (*actions)[name] = [dir, run] { return run(cache_dir(*dir)); };
  };
  add("ls", "List the entries: file, ISA, size, kernel, descriptor", list);
  add("verify", "Check every entry as loading would (exit 1 if any would be rejected)", verify);
  add("clear", "Remove every entry and leftover temporary file", clear);
  (*actions)["bench"] = add_cache_bench(*sub);
  return [sub, actions] { return actions->at(sub->get_subcommands().at(0)->get_name())(); };
}

}  // namespace
}  // namespace deconvjit::cli

DECONVJIT_COMMAND(cache, deconvjit::cli::setup_cache);
