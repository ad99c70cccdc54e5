// Helpers shared by the pi mapper tests.
#pragma once

#include <agenthost/mapper/pi_mapper.hpp>
#include <agenthost/transport/contract_checker.hpp>
#include <agenthost/transport/message.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace agenthost::mapper::test {

using transport::message;
using transport::message_type;
using json = nlohmann::json;

inline std::string fixture_path(const std::string& relative) {
  return std::string(AGENTHOST_FIXTURES_DIR) + "/pi/" + relative;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Lines of a file split on '\n' (a final empty piece after the last newline is dropped).
inline std::vector<std::string> read_lines(const std::string& path) {
  const std::string body = read_file(path);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < body.size()) {
    std::size_t nl = body.find('\n', start);
    if (nl == std::string::npos) nl = body.size();
    lines.push_back(body.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

inline std::vector<message> run_mapper(const std::vector<std::string>& lines, pi_mapper_options options = {},
                                       run_end end = {.status = process::exited{0}}) {
  pi_mapper mapper(std::move(options));
  std::vector<message> out;
  for (const auto& l : lines) mapper.on_line(l, out);
  mapper.finish(end, out);
  return out;
}

inline std::string to_jsonl(const std::vector<message>& messages) {
  std::string s;
  for (const auto& m : messages) {
    s += m.to_json_line();
    s += '\n';
  }
  return s;
}

inline std::vector<message> of_type(const std::vector<message>& messages, message_type t) {
  std::vector<message> r;
  for (const auto& m : messages) {
    if (m.type == t) r.push_back(m);
  }
  return r;
}

/// The concatenation of all `assistant` deltas.
inline std::string assistant_text(const std::vector<message>& messages) {
  std::string s;
  for (const auto& m : of_type(messages, message_type::assistant)) s += m.content.at("text").get<std::string>();
  return s;
}

inline std::vector<std::string> texts(const std::vector<message>& messages, message_type t) {
  std::vector<std::string> r;
  for (const auto& m : of_type(messages, t)) r.push_back(m.content.at("text").get<std::string>());
  return r;
}

inline std::vector<std::string> type_names(const std::vector<message>& messages) {
  std::vector<std::string> r;
  for (const auto& m : messages) r.emplace_back(transport::to_string(m.type));
  return r;
}

inline void expect_valid_run(const std::vector<message>& messages) {
  const auto violations = transport::check_run(messages);
  EXPECT_TRUE(violations.empty()) << ::testing::PrintToString(violations) << "\n" << to_jsonl(messages);
}

}  // namespace agenthost::mapper::test
