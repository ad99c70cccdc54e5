// agenthost_bench_e2e, section "latency": the delay from a line written by fake_agent to the consumer's handler, bare
// blocking read() beside child::async_read_lines (with and without the pi mapper).
#include "common.hpp"

#include <agenthost/mapper/pi_mapper.hpp>
#include <agenthost/process/child.hpp>

#include <boost/asio/io_context.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::bench::e2e {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

/// `{"type":"ts","t":123}` → 123.
std::int64_t parse_stamp(std::string_view line) {
  const auto at = line.find("\"t\":");
  if (at == std::string_view::npos) return -1;
  std::int64_t v = 0;
  for (std::size_t i = at + 4; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) v = v * 10 + (line[i] - '0');
  return v;
}

std::vector<double> latency_bare(std::uint64_t n, std::uint64_t interval_us) {
  std::vector<double> d;
  d.reserve(n);
  bare_child c = bare_child::spawn({kFake, "timestamps", std::to_string(n), "--interval-us",
                                    std::to_string(interval_us)});
  std::string pending;
  std::array<char, 65536> buf{};
  for (;;) {
    const ssize_t k = ::read(c.out, buf.data(), buf.size());
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    const std::int64_t now = mono_ns();
    pending.append(buf.data(), static_cast<std::size_t>(k));
    std::size_t start = 0;
    for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::int64_t t = parse_stamp(std::string_view(pending).substr(start, nl - start));
      if (t > 0) d.push_back(static_cast<double>(now - t));
    }
    pending.erase(0, start);
  }
  c.wait();
  return d;
}

std::vector<double> latency_ours(std::uint64_t n, std::uint64_t interval_us, bool with_mapper) {
  std::vector<double> d;
  d.reserve(n);
  asio::io_context io;
  auto c = agenthost::process::child::spawn(
      io.get_executor(), fake_options({"timestamps", std::to_string(n), "--interval-us", std::to_string(interval_us)}));
  if (!c) return d;
  agenthost::mapper::pi_mapper mapper;
  std::vector<agenthost::transport::message> out;
  std::function<void()> read = [&] {
    c->async_read_lines([&](error_code ec, agenthost::process::line_batch lines) {
      const std::int64_t now = mono_ns();  // the handler runs: the lines have reached the consumer
      if (ec) return;
      for (const auto& l : lines) {
        const std::int64_t t = parse_stamp(l.text);
        if (t > 0) d.push_back(static_cast<double>(now - t));
        if (with_mapper) {
          mapper.on_line(l.text, out);
          mapper.recycle(out);
        }
      }
      read();
    });
  };
  read();
  c->async_wait([](error_code, agenthost::process::exit_status) {});
  io.run();
  return d;
}

}  // namespace

void latency(const config& cfg, report& rep) {
  rep.add("");
  rep.add("### Latency (a line written by the agent → the consumer's handler)");
  rep.add("");
  rep.add("fake_agent `timestamps N --interval-us " + std::to_string(cfg.latency_interval_us) +
          "` (one write per line, CLOCK_MONOTONIC ns in the line); delay = receipt − stamp; paths alternate in 2 "
          "rounds of N/2; percentiles by nearest rank. Target: p99 < 100 µs.");
  rep.add("");
  rep.add("| path | lines | p50 | p90 | p99 | p99.9 | max | target p99 < 100 µs |");
  rep.add("|---|---:|---:|---:|---:|---:|---:|---|");
  std::vector<double> bare, ours, mapped;
  const std::uint64_t half = std::max<std::uint64_t>(1, cfg.latency_lines / 2);
  for (int round = 0; round < 2 && g_interrupted == 0; ++round) {
    auto a = latency_bare(half, cfg.latency_interval_us);
    bare.insert(bare.end(), a.begin(), a.end());
    auto b = latency_ours(half, cfg.latency_interval_us, false);
    ours.insert(ours.end(), b.begin(), b.end());
    auto c = latency_ours(half, cfg.latency_interval_us, true);
    mapped.insert(mapped.end(), c.begin(), c.end());
  }
  const auto row = [&](const std::string& name, std::vector<double>& v, bool target) {
    if (v.empty()) {
      rep.add("| " + name + " | 0 | – | – | – | – | – | failed |");
      if (target) rep.missed = true;
      return;
    }
    const double p99 = percentile(v, 99);
    std::string verdict = "(baseline)";
    if (target) {
      verdict = p99 < 100e3 ? "met" : "**missed**";
      rep.missed = rep.missed || p99 >= 100e3;
    }
    rep.add("| " + name + " | " + std::to_string(v.size()) + " | " + fmt_us(percentile(v, 50)) + " | " +
            fmt_us(percentile(v, 90)) + " | " + fmt_us(p99) + " | " + fmt_us(percentile(v, 99.9)) + " | " +
            fmt_us(percentile(v, 100)) + " | " + verdict + " |");
  };
  row("bare posix_spawn + blocking read()", bare, false);
  row("child::async_read_lines handler", ours, true);
  row("child::async_read_lines + pi_mapper::on_line", mapped, true);
}

}  // namespace agenthost::bench::e2e
