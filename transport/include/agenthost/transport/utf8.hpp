// agenthost/transport/utf8.hpp — making text valid UTF-8 before it goes into a message (the contract's text is UTF-8;
// agents, paths and stderr are not always).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace agenthost::transport {

/// Copy `s`, replacing each invalid UTF-8 byte (stray continuation bytes, truncated or overlong sequences,
/// surrogates, values above U+10FFFF) with U+FFFD, keeping at most `max_bytes` bytes: the cut falls on a character
/// boundary and "…" is appended when something was cut. Default: no limit.
[[nodiscard]] std::string sanitize_utf8(std::string_view s, std::size_t max_bytes = std::string::npos);

}  // namespace agenthost::transport
