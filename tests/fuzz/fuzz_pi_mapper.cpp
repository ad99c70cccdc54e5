// Fuzz target: mapper::pi_mapper on arbitrary stdout lines, both thinking modes, every way a run can end.
//
// Input layout: [options byte][end byte][lines separated by '\n']. A line that starts with 0x01 is handed to
// on_oversize_line() (its rest is the head, its total length is made larger), as the process layer does for a line
// above max_line_bytes. Properties checked for every input:
//   * transport::check_run() holds on the whole output (one terminal, last; tool calls closed; session first; the
//     field table);
//   * finish() is idempotent and lines fed after it produce nothing;
//   * the terminal's invalid_output_lines respect max_invalid_lines / max_invalid_line_bytes (+ "…") and
//     invalid_output_line_count is at least their number; stats() counted every line;
//   * every message serializes (to_json_line never throws), and parsing that line back and serializing again gives
//     the same line.
#include "fuzz_util.hpp"

#include <agenthost/mapper/pi_mapper.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using agenthost::mapper::pi_mapper;
using agenthost::mapper::pi_mapper_options;
using agenthost::mapper::run_end;
using agenthost::mapper::thinking_mode;
using agenthost::transport::message;
namespace process = agenthost::process;

run_end make_end(std::uint8_t b) {
  switch (b % 9) {
    case 0: return {.status = process::exited{0}};
    case 1: return {.status = process::exited{1 + b / 9}};
    case 2: return {.status = process::signaled{9, false}};
    case 3: return {.status = process::signaled{15, true}, .stderr_tail = "Error: boom\nlast line"};
    case 4: return {.cancelled = true};
    case 5: return {.timeout = std::string(b & 0x10 ? "idle" : "deadline")};
    case 6: return {.status = process::signaled{15, false}, .stopped_after_finish = true};
    case 7: return {.status = process::unknown_status{}};
    default: return {.stderr_tail = std::string("\xff\xfe not utf-8 \xc3", 16)};  // no status at all
  }
}

void check_output(const std::vector<message>& out, const pi_mapper_options& o, const pi_mapper& mapper,
                  std::size_t lines_fed) {
  const auto violations = agenthost::transport::check_run(out);
  if (!violations.empty()) {
    std::string all;
    for (const auto& v : violations) all += "\n  " + v;
    std::string run;
    for (const auto& m : out) run += "\n  " + m.to_json_line().substr(0, 300);
    agenthost::fuzz::fail("contract violated:" + all + "\nrun:" + run);
  }
  AGENTHOST_FUZZ_CHECK(mapper.stats().lines == lines_fed, "stats().lines does not count every line");
  const message& terminal = out.back();
  if (auto it = terminal.content.find("invalid_output_lines"); it != terminal.content.end()) {
    AGENTHOST_FUZZ_CHECK(it->is_array(), "invalid_output_lines is not an array");
    AGENTHOST_FUZZ_CHECK(it->size() <= o.max_invalid_lines, "more invalid_output_lines than max_invalid_lines");
    for (const auto& l : *it) {
      AGENTHOST_FUZZ_CHECK(l.is_string(), "an invalid output line is not a string");
      AGENTHOST_FUZZ_CHECK(l.get_ref<const std::string&>().size() <= o.max_invalid_line_bytes + 3,
                           "an invalid output line is longer than max_invalid_line_bytes + \"…\"");
    }
    if (!it->empty()) {
      const auto count = terminal.content.find("invalid_output_line_count");
      AGENTHOST_FUZZ_CHECK(count != terminal.content.end() && count->is_number_unsigned() &&
                               count->get<std::size_t>() >= it->size(),
                           "invalid_output_line_count missing or below the number of lines kept");
    }
  }
  for (const auto& m : out) {
    const std::string line = m.to_json_line();
    const auto back = message::from_json_line(line);
    AGENTHOST_FUZZ_CHECK(back.has_value(), "a message's own JSON line does not parse back: " + line.substr(0, 300));
    AGENTHOST_FUZZ_CHECK(back->to_json_line() == line, "serialization is not stable: " + line.substr(0, 300));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  agenthost::fuzz::byte_reader in(data, size);
  const std::uint8_t flags = in.byte();
  const run_end end = make_end(in.byte());
  pi_mapper_options o;
  o.thinking = (flags & 1) != 0 ? thinking_mode::stream : thinking_mode::buffered;
  o.dedupe_replayed_text = (flags & 2) == 0;
  if ((flags & 4) != 0) o.requested_session_id = (flags & 8) != 0 ? "01a228a3-d083-76d7-a9f9-b93789e48028" : "other";
  if ((flags & 16) != 0) {
    o.max_invalid_lines = flags >> 6;  // 0..3
    o.max_invalid_line_bytes = (flags >> 5) & 7;
  }

  pi_mapper mapper(o);
  std::vector<message> out;
  const std::string_view text = in.rest();
  std::size_t pos = 0, lines = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view l = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lines;
    if (!l.empty() && l[0] == '\x01') {
      mapper.on_oversize_line(l.substr(1), l.size() + (std::size_t{64} << 20), out);
    } else {
      mapper.on_line(l, out);
    }
    (void)mapper.agent_finished();
  }
  mapper.finish(end, out);
  if (const char* dump = std::getenv("AGENTHOST_FUZZ_DUMP"); dump != nullptr && dump[0] == '1') {  // triage aid
    for (const auto& m : out) std::fprintf(stderr, "%s\n", m.to_json_line().c_str());
  }
  check_output(out, o, mapper, lines);

  const std::size_t n = out.size();
  mapper.finish(end, out);
  AGENTHOST_FUZZ_CHECK(out.size() == n, "a second finish() appended messages");
  mapper.on_line(R"({"type":"agent_start"})", out);
  mapper.on_line("not json", out);
  mapper.on_oversize_line("x", 1 << 30, out);
  AGENTHOST_FUZZ_CHECK(out.size() == n, "lines after finish() produced messages");
  return 0;
}
