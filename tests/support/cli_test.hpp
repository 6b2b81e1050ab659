// Running the built `deconvjit` tool from tests: a fresh temporary directory per test, and the tool's
// exit code, stdout and stderr for a command line.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace deconvjit::testing {

struct CliResult {
  int code = -1;
  std::string out, err;
  std::vector<nlohmann::json> json_lines() const {  // stdout as JSON Lines
    std::vector<nlohmann::json> v;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line));
    return v;
  }
};

// Single quotes for a POSIX shell, so a JSON descriptor survives the command line as one word.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "deconvjit_test_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path path(const std::string& name) const { return dir_ / name; }

  // `args` is pasted into a shell command line (quote what needs it); `env` goes before the program.
  CliResult run(const std::string& args, const std::string& env = "") const {
    const std::filesystem::path err = path("stderr.txt");
    const std::string cmd =
        env + " " + shell_quote(DECONVJIT_CLI_PATH) + " " + args + " 2>" + shell_quote(err.string());
    CliResult r;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
    const int status = pclose(pipe);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = slurp(err);
    return r;
  }

  std::filesystem::path dir_;
};

}  // namespace deconvjit::testing
