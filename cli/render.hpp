// Output of the agenthost program: JSONL, or a readable rendering for a terminal (internal to cli/).
#pragma once

#include <agenthost/transport/message.hpp>

#include <cstdio>

namespace agenthost::cli {

class renderer {
 public:
  explicit renderer(bool human) : human_(human) {}
  void operator()(const transport::message& m);

 private:
  bool human_;
  bool mid_line_ = false;  // an assistant delta left the cursor mid-line
};

/// 0 completed, 1 failed, 130 cancelled.
int exit_code_for(const transport::message& terminal);

}  // namespace agenthost::cli
