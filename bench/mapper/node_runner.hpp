// The Node baseline of agenthost_bench_mapper: node_baseline.mjs (readline + JSON.parse of each line) run on the
// transcripts, each written to a temporary file first.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::bench {

/// Node's figures for one transcript file: its size (newlines included) and MB/s by wall and by process CPU time.
struct node_result {
  double file_bytes = 0, wall_mbps = 0, cpu_mbps = 0;
};

/// Whether `node` runs (is on PATH).
[[nodiscard]] bool have_node();

/// Runs `node <script>` once over every transcript of `transcripts` (name, the whole transcript as it would be read),
/// written to a temporary directory that is removed after. Results by name; a transcript Node did not report (or a
/// failure to start Node at all) is absent.
[[nodiscard]] std::map<std::string, node_result> run_node(
    const std::string& script, const std::vector<std::pair<std::string, const std::string*>>& transcripts);

}  // namespace agenthost::bench
