// Shared by the mapper fuzz targets (fuzz_pi_mapper: raw pi lines; fuzz_pi_events: generated pi event sequences;
// fuzz_agent_mappers: raw lines for the other agents' mappers): the mapper options and run end taken from input
// bytes, the feeding, and every property checked on the output.
#pragma once

#include "fuzz_util.hpp"

#include <agenthost/mapper/event_mapper.hpp>
#include <agenthost/mapper/pi_mapper.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::fuzz {

using mapper::event_mapper;
using mapper::pi_mapper;
using mapper::pi_mapper_options;
using mapper::run_end;
using mapper::thinking_mode;
using transport::message;

/// The options every agent's mapper has that the checks depend on.
struct invalid_line_limits {
  std::size_t max_invalid_lines = 20;
  std::size_t max_invalid_line_bytes = 4096;
};

inline run_end make_end(std::uint8_t b) {
  switch (b % 9) {
    case 0: return {.status = process::exited{0}};
    case 1: return {.status = process::exited{1 + b / 9}};
    case 2: return {.status = process::signaled{9, false}};
    case 3: return {.status = process::signaled{15, true}, .stderr_tail = "Error: boom\nlast line"};
    case 4: return {.cancelled = true};
    case 5: return {.timeout = std::string(b & 0x10 ? "idle" : "deadline")};
    case 6: return {.status = process::signaled{15, false}, .stopped_after_finish = true};
    case 7: return {.status = process::unknown_status{}};
    default: {  // no status at all, and a stderr tail that is not UTF-8
      static constexpr char tail[] = "\xff\xfe not utf-8 \xc3";
      return {.stderr_tail = std::string(tail, sizeof tail - 1)};
    }
  }
}

inline void check_output(const std::vector<message>& out, const invalid_line_limits& o, const event_mapper& mapper,
                         std::size_t lines_fed) {
  auto violations = agenthost::transport::check_run(out);
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

inline pi_mapper_options make_options(std::uint8_t flags) {
  pi_mapper_options o;
  o.thinking = (flags & 1) != 0 ? thinking_mode::stream : thinking_mode::buffered;
  o.dedupe_replayed_text = (flags & 2) == 0;
  if ((flags & 4) != 0) o.requested_session_id = (flags & 8) != 0 ? "01a228a3-d083-76d7-a9f9-b93789e48028" : "other";
  if ((flags & 16) != 0) {
    o.max_invalid_lines = flags >> 6;  // 0..3
    o.max_invalid_line_bytes = (flags >> 5) & 7;
  }
  return o;
}

/// Feeds `lines` (a line starting with 0x01 goes to on_oversize_line) to a fresh mapper and finishes with `end`.
inline std::vector<message> map_lines(event_mapper& mapper, const run_end& end,
                                      const std::vector<std::string_view>& lines) {
  std::vector<message> out;
  for (const std::string_view l : lines) {
    if (!l.empty() && l[0] == '\x01') {
      mapper.on_oversize_line(l.substr(1), l.size() + (std::size_t{64} << 20), out);
    } else {
      mapper.on_line(l, out);
    }
    (void)mapper.agent_finished();
  }
  mapper.finish(end, out);
  return out;
}

/// As map_lines(), but the messages are taken after every line (so text deltas of two lines are never merged), then
/// dropped (`recycle` false) or handed back with recycle() — every third one modified first (an added member, a text
/// of another type, a content that is no object): the mapper refills them. `ask_more`: after every other line, what
/// take_more() appends is taken too, until it returns false.
inline std::vector<message> map_lines_per_line(event_mapper& mapper, const run_end& end,
                                               const std::vector<std::string_view>& lines, bool recycle,
                                               bool ask_more = false) {
  std::vector<message> seen, out;
  std::size_t n = 0;
  std::size_t line_number = 0;
  auto take = [&] {
    seen.insert(seen.end(), out.begin(), out.end());
    if (!recycle) {
      out.clear();
      return;
    }
    for (auto& m : out) {
      switch (n++ % 3) {
        case 0: m.content["zz_added"] = true; break;
        case 1: m.content["text"] = 7; break;
        default: m.content = nlohmann::json::array({1}); break;
      }
    }
    mapper.recycle(out);
  };
  for (const std::string_view l : lines) {
    if (!l.empty() && l[0] == '\x01') {
      mapper.on_oversize_line(l.substr(1), l.size() + (std::size_t{64} << 20), out);
    } else {
      mapper.on_line(l, out);
    }
    take();
    if (ask_more && line_number++ % 2 == 0) {
      while (mapper.take_more(out)) {
        AGENTHOST_FUZZ_CHECK(!out.empty(), "take_more() returned true but appended nothing");
        take();
      }
      AGENTHOST_FUZZ_CHECK(out.empty(), "take_more() returned false but appended messages");
    }
  }
  mapper.finish(end, out);
  take();
  AGENTHOST_FUZZ_CHECK(!mapper.take_more(out) && out.empty(), "take_more() appended after finish()");
  return seen;
}

/// The messages that differ between two runs, one pair per line.
inline std::string diff(const std::vector<message>& a, const std::vector<message>& b) {
  std::string d;
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i].to_json_line() : "(none)";
    const std::string y = i < b.size() ? b[i].to_json_line() : "(none)";
    if (x != y) d += "\n  #" + std::to_string(i) + " first:  " + x.substr(0, 300) + "\n  #" + std::to_string(i) +
                     " second: " + y.substr(0, 300);
  }
  return d;
}

/// The output with the terminal's invalid_output_lines replaced by their number (for comparing runs whose invalid
/// lines differ only in their bytes).
inline std::vector<message> without_invalid_line_text(std::vector<message> out) {
  if (!out.empty()) {
    auto& c = out.back().content;
    if (auto it = c.find("invalid_output_lines"); it != c.end()) *it = it->size();
  }
  return out;
}

/// Feeds `lines` to a mapper from `make`, finishes with `end`, checks every property, then that handing the messages
/// back after every line (recycle) changes nothing, then the metamorphic one: the
/// same lines with a space after their opening '{' (the same JSON) map to the same messages. The mappers' fast paths
/// only take lines that start exactly with `{"type":…` (or another key), so the variant runs every event through the
/// On-Demand path: this compares the fast paths (and their memoized prefixes) with it. `after_finish` is a valid
/// event of the agent, fed after finish() (it must add nothing).
/// `make_batched` (optional): the same mapper with its buffered thoughts released a few at a time
/// (thought_release_batch); asked for them after every other line, it must give the same messages.
inline void map_and_check(const std::function<std::unique_ptr<event_mapper>()>& make, const invalid_line_limits& o,
                          const run_end& end, const std::vector<std::string_view>& lines,
                          std::string_view after_finish,
                          const std::function<std::unique_ptr<event_mapper>()>& make_batched = {}) {
  const auto mapper = make();
  std::vector<message> out = map_lines(*mapper, end, lines);
  if (const char* dump = std::getenv("AGENTHOST_FUZZ_DUMP"); dump != nullptr && dump[0] == '1') {  // triage aid
    for (const auto l : lines) std::fprintf(stderr, "< %s\n", std::string(l).c_str());
    for (const auto& m : out) std::fprintf(stderr, "> %s\n", m.to_json_line().c_str());
  }
  check_output(out, o, *mapper, lines.size());

  const std::size_t n = out.size();
  mapper->finish(end, out);
  AGENTHOST_FUZZ_CHECK(out.size() == n, "a second finish() appended messages");
  mapper->on_line(after_finish, out);
  mapper->on_line("not json", out);
  mapper->on_oversize_line("x", 1 << 30, out);
  AGENTHOST_FUZZ_CHECK(out.size() == n, "lines after finish() produced messages");
  out.resize(n);

  // Recycled messages (refilled in place) must give exactly the same messages.
  const auto dropping = make();
  const auto recycling = make();
  const auto dropped = map_lines_per_line(*dropping, end, lines, false);
  if (const auto r = map_lines_per_line(*recycling, end, lines, true); r != dropped)
    fail("recycled messages map differently:" + diff(dropped, r));
  if (make_batched) {
    const auto batched = make_batched();
    if (const auto r = map_lines_per_line(*batched, end, lines, true, true); r != dropped)
      fail("thoughts released a few at a time map differently:" + diff(dropped, r));
  }

  std::vector<std::string> spaced;
  spaced.reserve(lines.size());
  for (const std::string_view l : lines)
    spaced.push_back(!l.empty() && l[0] == '{' ? "{ " + std::string(l.substr(1)) : std::string(l));
  std::vector<std::string_view> spaced_views;
  for (const auto& l : spaced) spaced_views.emplace_back(l);
  const auto slow = make();
  const auto a = without_invalid_line_text(std::move(out));
  const auto b = without_invalid_line_text(map_lines(*slow, end, spaced_views));
  if (a != b) fail("the same events with a space after '{' map differently (fast path vs On-Demand):" + diff(a, b));
}

/// The pi mapper with `o`.
inline void map_and_check(const pi_mapper_options& o, const run_end& end, const std::vector<std::string_view>& lines) {
  map_and_check([&o] { return std::make_unique<pi_mapper>(o); },
                {.max_invalid_lines = o.max_invalid_lines, .max_invalid_line_bytes = o.max_invalid_line_bytes}, end,
                lines, R"({"type":"agent_start"})");
}

}  // namespace agenthost::fuzz
