// Fuzz target: the Claude Code, Codex, Gemini CLI and OpenCode mappers on arbitrary stdout lines, both thinking
// modes, every way a run can end (pi has its own targets: fuzz_pi_mapper, fuzz_pi_events).
//
// Input layout: [agent byte][options byte][end byte][lines separated by '\n']. The agent byte % 4 picks claude,
// codex, gemini or opencode. A line that starts with 0x01 is handed to on_oversize_line() (its rest is the head). Each
// line is copied into its own allocation, so that a fast path reading past the end of a line is an ASan error, not a
// read of the next line. Properties checked for every input (mapper_checks.hpp):
//   * transport::check_run() holds on the whole output;
//   * finish() is idempotent and lines fed after it produce nothing;
//   * invalid_output_lines respect the limits, stats() counted every line, every message serializes stably;
//   * the same lines with a space after '{' (every line then takes the On-Demand path) map to the same messages:
//     the byte-scan fast paths accept a subset of what On-Demand accepts and yield the same events;
//   * Codex and OpenCode: with thought_release_batch 1–4 (the agent byte's bits 2–3) and take_more() asked after every
//     other line, the same messages.
// AGENTHOST_FUZZ_DUMP=1 prints the input lines and the messages (triage).
#include "mapper_checks.hpp"

#include <agenthost/mapper/claude_mapper.hpp>
#include <agenthost/mapper/codex_mapper.hpp>
#include <agenthost/mapper/gemini_mapper.hpp>
#include <agenthost/mapper/opencode_mapper.hpp>

namespace {

using namespace agenthost;
using namespace agenthost::fuzz;

// The options every agent's mapper has, from one byte (as make_options does for pi).
template <class Options>
Options agent_options(std::uint8_t flags) {
  Options o;
  o.thinking = (flags & 1) != 0 ? thinking_mode::stream : thinking_mode::buffered;
  o.merge_adjacent_text = (flags & 2) != 0;
  if ((flags & 4) != 0) o.requested_session_id = (flags & 8) != 0 ? "519302db-3c98-4d19-baf8-1053a7e35306" : "other";
  if ((flags & 16) != 0) {
    o.max_invalid_lines = flags >> 6;  // 0..3
    o.max_invalid_line_bytes = (flags >> 5) & 7;
  }
  return o;
}

template <class Mapper, class Options>
void run(std::uint8_t flags, const run_end& end, const std::vector<std::string_view>& lines,
         std::string_view after_finish) {
  const Options o = agent_options<Options>(flags);
  map_and_check([&o] { return std::make_unique<Mapper>(o); },
                {.max_invalid_lines = o.max_invalid_lines, .max_invalid_line_bytes = o.max_invalid_line_bytes}, end,
                lines, after_finish);
}

// The Codex and OpenCode mappers also with thought_release_batch (1–4 from the agent byte's high bits).
template <class Mapper, class Options>
void run_batched(std::uint8_t agent, std::uint8_t flags, const run_end& end,
                 const std::vector<std::string_view>& lines, std::string_view after_finish) {
  const Options o = agent_options<Options>(flags);
  Options batched = o;
  batched.thought_release_batch = 1 + ((agent >> 2) & 3);
  map_and_check([&o] { return std::make_unique<Mapper>(o); },
                {.max_invalid_lines = o.max_invalid_lines, .max_invalid_line_bytes = o.max_invalid_line_bytes}, end,
                lines, after_finish, [&batched] { return std::make_unique<Mapper>(batched); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  byte_reader in(data, size);
  const std::uint8_t agent = in.byte();
  const std::uint8_t flags = in.byte();
  const auto end = make_end(in.byte());
  const std::string_view text = in.rest();
  std::vector<std::unique_ptr<char[]>> owned;
  const std::vector<std::string_view> lines = owned_lines(text, owned);
  switch (agent % 4) {
    case 0:
      run<mapper::claude_mapper, mapper::claude_mapper_options>(
          flags, end, lines, R"({"type":"system","subtype":"init","session_id":"s"})");
      break;
    case 1:
      run_batched<mapper::codex_mapper, mapper::codex_mapper_options>(agent, flags, end, lines,
                                                                      R"({"type":"thread.started","thread_id":"t"})");
      break;
    case 2:
      run<mapper::gemini_mapper, mapper::gemini_mapper_options>(
          flags, end, lines, R"({"type":"init","session_id":"s","model":"m"})");
      break;
    default:
      run_batched<mapper::opencode_mapper, mapper::opencode_mapper_options>(
          agent, flags, end, lines,
          R"({"type":"text","sessionID":"s","part":{"id":"p","messageID":"m","type":"text","text":"late"}})");
      break;
  }
  return 0;
}
