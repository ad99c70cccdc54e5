// Helpers shared by the provider tests.
#pragma once

#include <agenthost/mapper/event_mapper.hpp>
#include <agenthost/transport/message.hpp>

#include <vector>

namespace agenthost::test {

/// `messages` with adjacent `assistant` deltas merged into one: how the provider cuts the text depends on how the
/// agent's output arrived (the deltas of one read are merged), so runs are compared at this granularity.
inline std::vector<transport::message> merged_text(const std::vector<transport::message>& messages) {
  std::vector<transport::message> out;
  for (const auto& m : messages)
    if (m.type != transport::message_type::assistant ||
        !mapper::append_to_last_text(out, m.content.at("text").get_ref<const std::string&>()))
      out.push_back(m);
  return out;
}

}  // namespace agenthost::test
