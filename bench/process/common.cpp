#include "common.hpp"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace agenthost::bench::process_bench {

volatile std::sig_atomic_t g_abort = 0;

const char* mode_name(ap::containment_kind k) {
  switch (k) {
    case ap::containment_kind::reaper: return "reaper";
    case ap::containment_kind::session: return "session";
    case ap::containment_kind::automatic: return "auto";
  }
  return "?";
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

std::string fmt_ms(double v) {
  if (std::isnan(v)) return "–";
  char buf[32];
  if (v >= 100)
    std::snprintf(buf, sizeof buf, "%.0f ms", v);
  else if (v >= 10)
    std::snprintf(buf, sizeof buf, "%.1f ms", v);
  else
    std::snprintf(buf, sizeof buf, "%.2f ms", v);
  return buf;
}

namespace {

/// Live processes (not zombies) whose environment contains `needle` ("NAME=value").
std::vector<int> processes_with_env(const std::string& needle) {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return pids;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z') continue;
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string item;
    while (std::getline(env, item, '\0')) {
      if (item == needle) {
        pids.push_back(static_cast<int>(pid));
        break;
      }
    }
  }
  ::closedir(d);
  return pids;
}

}  // namespace

std::size_t kill_leftovers(const std::string& needle) {
  const auto pids = processes_with_env(needle);
  for (int pid : pids) ::kill(pid, SIGKILL);
  return pids.size();
}

bool run_until(asio::io_context& io, const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = clk::now() + timeout;
  while (!done()) {
    if (g_abort != 0 || clk::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    if (io.run_one_for(50ms) == 0 && io.stopped()) std::this_thread::sleep_for(1ms);  // nothing pending at all
  }
  return true;
}

void drain(asio::io_context& io) {
  io.restart();
  io.poll();
}

}  // namespace agenthost::bench::process_bench
