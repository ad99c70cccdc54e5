// agenthost_bench_e2e, section "memory": the peak RSS of `agenthost map` on the generated transcripts, taken by a
// small helper process (`--rss-child`, dispatched from main()).
#include "common.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::bench::e2e {

/// `--rss-child PROGRAM ARGS…`: run PROGRAM (stdin and stdout on /dev/null) from this small, freshly started process
/// and print its peak RSS in KiB (wait4's ru_maxrss) and its exit status. A process created directly by the benchmark
/// (posix_spawn is a vfork) would be charged the benchmark's own high-water mark, which holds the transcripts.
int rss_child_main(int argc, char** argv) {
  const pid_t pid = ::fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::execv(argv[0], argv);
    ::_exit(127);
  }
  int status = 0;
  rusage u{};
  while (::wait4(pid, &status, 0, &u) < 0 && errno == EINTR) {
  }
  (void)argc;
  std::printf("%ld %d\n", u.ru_maxrss, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  return 0;
}

namespace {

/// Peak RSS (KiB) of `agenthost map --agent pi FILE > /dev/null`; -1 on failure.
long map_peak_rss_kib(const fs::path& file, double& seconds) {
#ifdef AGENTHOST_CLI
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string cmd = "'" + self + "' --rss-child '" + std::string(AGENTHOST_CLI) + "' map --agent pi '" +
                          file.string() + "'";
  const std::int64_t t0 = mono_ns();
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return -1;
  long kib = -1;
  int code = -1;
  if (std::fscanf(f, "%ld %d", &kib, &code) != 2) kib = -1;
  ::pclose(f);
  seconds = static_cast<double>(mono_ns() - t0) / 1e9;
  return code == 0 ? kib : -1;
#else
  (void)file;
  (void)seconds;
  return -1;
#endif
}

}  // namespace

void memory(const config& cfg, const fs::path& dir, report& rep) {
  rep.add("");
  rep.add("### Memory (peak RSS of `agenthost map`)");
  rep.add("");
  rep.add("`agenthost map --agent pi FILE > /dev/null` on each generated transcript; peak RSS = wait4 ru_maxrss "
          "(VmHWM). Target: ≤ 2 × the longest line + 16 MiB, never proportional to the stream.");
  rep.add("");
  rep.add("| transcript | file MB | longest line | peak RSS | budget (2 × longest + 16 MiB) | map time | verdict |");
  rep.add("|---|---:|---:|---:|---:|---:|---|");
  // The program's own footprint, for reference: a one-turn session.
  std::vector<std::pair<std::string, agenthost::bench::transcript>> cases;
  cases.emplace_back("tiny (1 tool turn, reference)", agenthost::bench::make_transcript(transcript_kind::tools, 1));
  for (auto kind : cfg.kinds) {
    cases.emplace_back(std::string(agenthost::bench::to_string(kind)),
                       agenthost::bench::make_transcript(kind, agenthost::bench::default_size(kind)));
  }
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const std::string& name = cases[c].first;
    const auto& t = cases[c].second;
    const fs::path file = dir / ("mem-" + std::to_string(c) + ".jsonl");
    {
      std::ofstream f(file, std::ios::binary);
      for (const auto& l : t.lines) f << l << '\n';
    }
    double s = 0;
    const long kib = map_peak_rss_kib(file, s);
    const double budget = 2.0 * static_cast<double>(t.longest) + 16.0 * 1024 * 1024;
    if (kib < 0) {
      rep.add("| " + name + " | " + fmt(static_cast<double>(fs::file_size(file)) / 1e6, 1) + " | " +
              fmt(static_cast<double>(t.longest) / 1024, 1) + " KiB | failed | – | – | **missed** |");
      rep.missed = true;
      continue;
    }
    const double rss = static_cast<double>(kib) * 1024;
    const bool ok = rss <= budget;
    rep.missed = rep.missed || !ok;
    rep.add("| " + name + " | " + fmt(static_cast<double>(fs::file_size(file)) / 1e6, 1) + " | " +
            fmt(static_cast<double>(t.longest) / 1024, 1) + " KiB | " + fmt(rss / 1048576, 1) + " MiB | " +
            fmt(budget / 1048576, 1) + " MiB | " + fmt(s, 2) + " s | " + (ok ? "met" : "**missed**") + " |");
    if (!cfg.keep_files) fs::remove(file);
  }
}

}  // namespace agenthost::bench::e2e
