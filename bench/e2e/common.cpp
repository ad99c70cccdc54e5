#include "common.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace agenthost::bench::e2e {

volatile std::sig_atomic_t g_interrupted = 0;

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string fmt(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string fmt_us(double ns) {
  if (ns >= 1e6) return fmt(ns / 1e6, 2) + " ms";
  return fmt(ns / 1e3, ns < 1e4 ? 1 : 0) + " µs";
}

double percentile(std::vector<double>& v, double p) {  // nearest rank
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  if (rank == 0) rank = 1;
  return v[std::min(rank, v.size()) - 1];
}

double median(std::vector<double> v) { return percentile(v, 50); }

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bare_child bare_child::spawn(const std::vector<std::string>& argv, bool inherit_stderr) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  if (!inherit_stderr) ::posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  bare_child c;
  const int rc = ::posix_spawn(&c.pid, args[0], &fa, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  if (rc != 0) {
    ::close(p[0]);
    throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  }
  c.out = p[0];
  return c;
}

int bare_child::wait() {
  if (out >= 0) ::close(out);
  out = -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

agenthost::process::spawn_options fake_options(std::vector<std::string> args) {
  agenthost::process::spawn_options o;
  o.executable = kFake;
  o.args = std::move(args);
  o.stdin_mode = agenthost::process::stdin_kind::null;
  o.containment = agenthost::process::containment_kind::reaper;
  o.reaper_path = kReaper;
  return o;
}

}  // namespace agenthost::bench::e2e
