// Fuzz target: mapper::pi_mapper on arbitrary stdout lines, both thinking modes, every way a run can end.
//
// Input layout: [options byte][end byte][lines separated by '\n']. A line that starts with 0x01 is handed to
// on_oversize_line() (its rest is the head, its total length is made larger), as the process layer does for a line
// above max_line_bytes. Each line is copied into its own allocation, so that a fast path reading past the end of a line
// is an ASan error. Properties checked for every input (mapper_checks.hpp):
//   * transport::check_run() holds on the whole output (one terminal, last; tool calls closed; session first; the
//     field table);
//   * finish() is idempotent and lines fed after it produce nothing;
//   * the terminal's invalid_output_lines respect max_invalid_lines / max_invalid_line_bytes (+ "…") and
//     invalid_output_line_count is at least their number; stats() counted every line;
//   * every message serializes (to_json_line never throws), and parsing that line back and serializing again gives
//     the same line.
// AGENTHOST_FUZZ_DUMP=1 prints the input lines and the messages (triage).
#include "mapper_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  agenthost::fuzz::byte_reader in(data, size);
  const auto options = agenthost::fuzz::make_options(in.byte());
  const auto end = agenthost::fuzz::make_end(in.byte());
  std::vector<std::unique_ptr<char[]>> owned;  // each line in its own allocation: see owned_lines()
  agenthost::fuzz::map_and_check(options, end, agenthost::fuzz::owned_lines(in.rest(), owned));
  return 0;
}
