#include "node_runner.hpp"

#include <nlohmann/json.hpp>

#include <stdlib.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace agenthost::bench {

bool have_node() { return std::system("node --version > /dev/null 2>&1") == 0; }

std::map<std::string, node_result> run_node(
    const std::string& script, const std::vector<std::pair<std::string, const std::string*>>& transcripts) {
  std::map<std::string, node_result> out;
  char tmpl[] = "/tmp/agenthost-bench-mapper-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return out;
  const std::filesystem::path dir = tmpl;
  std::string cmd = "node " + script;
  std::map<std::string, std::string> by_file;
  for (const auto& [name, text] : transcripts) {
    const auto path = dir / (name + ".jsonl");
    std::ofstream(path, std::ios::binary) << *text;
    cmd += " " + path.string();
    by_file[path.string()] = name;
  }
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf{};
    while (std::fgets(buf.data(), static_cast<int>(buf.size()), f) != nullptr) {
      const auto j = nlohmann::json::parse(buf.data(), nullptr, false);
      if (!j.is_object() || !j.contains("file")) continue;
      const auto it = by_file.find(j["file"].get<std::string>());
      if (it == by_file.end()) continue;
      out[it->second] = {j.value("bytes", 0.0), j.value("wall_mbps", 0.0), j.value("cpu_mbps", 0.0)};
    }
    ::pclose(f);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return out;
}

}  // namespace agenthost::bench
