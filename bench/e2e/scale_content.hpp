// agenthost_bench_e2e, section "scale": what each agent streams — the synthetic 100-byte `rate` lines, or a generated
// pi transcript (≥ 0.84 deltas, or a ≤ 0.83 snapshot-era session) written to a file that `fake_agent rate --file`
// cycles through.
#pragma once

#include "common.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace agenthost::bench::e2e {

/// What each scale agent streams: the synthetic 100-byte `rate` lines, or a transcript file's lines (`rate --file`).
struct scale_content {
  std::string name = "synthetic";
  fs::path file;                       // empty: synthetic
  std::vector<std::size_t> line_sizes;  // with the newline, in file order (cycled by the agent)
  std::size_t bytes = 0;                // file size
};

/// The content `name` (synthetic, pi-delta, pi-snapshot), its transcript written to `dir` (nothing for synthetic).
/// Throws std::runtime_error for an unknown name.
scale_content make_scale_content(const std::string& name, const fs::path& dir);

}  // namespace agenthost::bench::e2e
