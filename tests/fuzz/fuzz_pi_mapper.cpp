// Fuzz target: mapper::pi_mapper on arbitrary stdout lines, both thinking modes, every way a run can end.
//
// Input layout: [options byte][end byte][lines separated by '\n']. A line that starts with 0x01 is handed to
// on_oversize_line() (its rest is the head, its total length is made larger), as the process layer does for a line
// above max_line_bytes. Properties checked for every input (mapper_checks.hpp):
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
  const std::string_view text = in.rest();
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  agenthost::fuzz::map_and_check(options, end, lines);
  return 0;
}
