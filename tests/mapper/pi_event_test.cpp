// The pi line parser's internals (mapper/src/pi_event.hpp) that the mapper's behaviour tests reach only in part.
#include "pi_event.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>

namespace {

using agenthost::mapper::detail::classify_event;
using agenthost::mapper::detail::event_kind;

TEST(PiEvent, ClassifyEventKnowsEveryTypeAndNothingElse) {
  const std::pair<std::string_view, event_kind> known[] = {
      {"session", event_kind::session},
      {"agent_start", event_kind::agent_start},
      {"agent_end", event_kind::agent_end},
      {"agent_settled", event_kind::agent_settled},
      {"turn_start", event_kind::turn_start},
      {"turn_end", event_kind::turn_end},
      {"message_start", event_kind::message_start},
      {"message_update", event_kind::message_update},
      {"message_end", event_kind::message_end},
      {"tool_execution_start", event_kind::tool_execution_start},
      {"tool_execution_update", event_kind::tool_execution_update},
      {"tool_execution_end", event_kind::tool_execution_end},
      {"auto_retry_start", event_kind::auto_retry_start},
      {"auto_retry_end", event_kind::auto_retry_end},
      {"auto_compaction_start", event_kind::compaction_start},
      {"compaction_start", event_kind::compaction_start},
      {"auto_compaction_end", event_kind::compaction_end},
      {"compaction_end", event_kind::compaction_end},
      {"extension_error", event_kind::extension_error},
  };
  for (const auto& [name, kind] : known) {
    EXPECT_EQ(classify_event(name), kind) << name;
    // The same length with one byte changed, one byte more or less, another case: not a known type.
    std::string changed(name);
    changed.back() = changed.back() == 'x' ? 'y' : 'x';
    EXPECT_EQ(classify_event(changed), event_kind::unknown) << changed;
    EXPECT_EQ(classify_event(std::string(name) + "s"), event_kind::unknown) << name << 's';
    EXPECT_EQ(classify_event(name.substr(0, name.size() - 1)), event_kind::unknown) << name.substr(0, name.size() - 1);
    std::string upper(name);
    upper[0] = static_cast<char>(upper[0] - 'a' + 'A');
    EXPECT_EQ(classify_event(upper), event_kind::unknown) << upper;
  }
  for (const std::string_view other : {"", "rate", "queue_update", "response", "message", "turn", "tool_execution"})
    EXPECT_EQ(classify_event(other), event_kind::unknown) << other;
}

}  // namespace
