// Fuzz target: transport::message::from_json_line (the contract's only parser: consumers of the CLI's JSONL and the
// tests read messages back with it) and transport::contract_checker on whatever it accepts.
//
// Input: lines separated by '\n'. Each line goes through from_json_line (must never throw); an accepted message must
// serialize (to_json_line never throws), parse back, and serialize to the same line again (not to an equal message:
// invalid UTF-8 comes back as U+FFFD). The
// accepted messages, as one run, go through contract_checker (violations are expected, crashes are not).
#include "fuzz_util.hpp"

#include <agenthost/transport/contract_checker.hpp>
#include <agenthost/transport/message.hpp>

#include <vector>

using agenthost::transport::message;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  agenthost::fuzz::byte_reader in(data, size);
  const std::string_view text = in.rest();
  std::vector<message> run;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view l = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto m = message::from_json_line(l);
    if (!m) continue;
    AGENTHOST_FUZZ_CHECK(m->content.is_object(), "accepted a message whose content is not an object");
    const std::string line = m->to_json_line();
    const auto back = message::from_json_line(line);
    AGENTHOST_FUZZ_CHECK(back.has_value(), "to_json_line output does not parse: " + line.substr(0, 300));
    AGENTHOST_FUZZ_CHECK(back->to_json_line() == line, "serialization is not stable: " + line.substr(0, 300));
    run.push_back(std::move(*m));
  }
  agenthost::transport::contract_checker checker;
  for (const auto& m : run) checker.observe(m);
  (void)checker.finish();
  (void)agenthost::transport::check_run(run);
  return 0;
}
