// Internal text helpers.
#include "text_util.hpp"

namespace agenthost::mapper::detail {

std::string_view last_line(std::string_view s, std::size_t max_bytes) noexcept {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  const std::size_t nl = s.find_last_of('\n');
  std::string_view line = nl == std::string_view::npos ? s : s.substr(nl + 1);
  if (line.size() > max_bytes) line = line.substr(line.size() - max_bytes);
  return line;
}

}  // namespace agenthost::mapper::detail
