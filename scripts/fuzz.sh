#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz/ for SECONDS each (default 600) and prints the figures (executions,
# coverage, corpus, crashes). Builds build-fuzz with clang first unless --no-build.
#   scripts/fuzz.sh [--no-build] [SECONDS] [TARGET...]
# Corpora grow in build-fuzz/corpus/<target>/ across runs (seeded from fixtures/ by tests/fuzz/make_seeds.sh);
# crashes land in build-fuzz/crashes/<target>/ — turn each into tests/fuzz/regressions/<target>/<name> (see
# tests/fuzz/README.md). Exit status: 0 when no target crashed, 1 otherwise, 2 on a usage or build error.
# Env: AGENTHOST_FUZZ_JOBS (libFuzzer worker processes per target, default 1), AGENTHOST_FUZZ_STRICT=1 (check the
# known bugs too), AGENTHOST_FUZZ_CMAKE_ARGS (extra configure arguments, e.g. -DAGENTHOST_FUZZ_WERROR=ON),
# AGENTHOST_FUZZ_BUILD_DIR (the build directory, default build-fuzz). A failing target's digest (error lines, stack
# top, small inputs in base64) is also written to <build dir>/fuzz-failures.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
if [[ "${1:-}" == "--no-build" ]]; then build=0; shift; fi
seconds=${1:-600}
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then echo "usage: scripts/fuzz.sh [--no-build] [SECONDS] [TARGET...]" >&2; exit 2; fi
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(fuzz_line_framer fuzz_pi_mapper fuzz_pi_events fuzz_agent_mappers fuzz_cli_options fuzz_message_json
    fuzz_reaper_protocol)
fi
dir=${AGENTHOST_FUZZ_BUILD_DIR:-build-fuzz}

if [[ $build -eq 1 ]]; then
  command -v clang++ > /dev/null || { echo "fuzz: clang++ not found (scripts/setup.sh --with-fuzz)" >&2; exit 2; }
  # shellcheck disable=SC2086
  cmake -S tests/fuzz -B "$dir" -DCMAKE_CXX_COMPILER=clang++ ${AGENTHOST_FUZZ_CMAKE_ARGS:-} > "$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log" >&2; exit 2; }
  cmake --build "$dir" -j1 --target "${targets[@]}" || exit 2
fi
tests/fuzz/make_seeds.sh "$dir/seeds" > /dev/null

declare -A dict=([fuzz_line_framer]="" [fuzz_pi_mapper]=pi.dict [fuzz_pi_events]="" [fuzz_agent_mappers]=agents.dict
  [fuzz_cli_options]=cli.dict [fuzz_message_json]=message.dict
  [fuzz_reaper_protocol]=reaper.dict)
crashed=0
summary=()
failures="$dir/fuzz-failures.txt"
rm -f "$failures"
for t in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$t" "$dir/crashes/$t" "$dir/logs"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/crashes/$t/")
  if [[ -n "${dict[$t]:-}" ]]; then args+=(-dict="tests/fuzz/dict/${dict[$t]}"); fi
  if [[ -n "${AGENTHOST_FUZZ_JOBS:-}" && "${AGENTHOST_FUZZ_JOBS}" -gt 1 ]]; then
    args+=(-fork="$AGENTHOST_FUZZ_JOBS" -ignore_crashes=1)
  fi
  log="$dir/logs/$t.log"
  before=$(find "$dir/crashes/$t" -type f | wc -l)
  touch "$log.start"
  echo "== $t: ${seconds}s"
  set +e
  "$dir/$t" "${args[@]}" "$dir/corpus/$t" "$dir/seeds/$t" > "$log" 2>&1
  rc=$?
  set -e
  after=$(find "$dir/crashes/$t" -type f | wc -l)
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | awk '{s += $2} END {print s + 0}')
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | awk '{print $2}' | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<< "$last")
  rss=$(grep -oE 'stat::peak_rss_mb: *[0-9]+' "$log" | awk '{print $2}' | tail -1)
  new=$((after - before))
  line=$(printf '%-18s %4ss  execs %10s  exec/s %6s  cov %5s  ft %6s  corpus %-12s  peak_rss %5s MB  new crashes %s' \
    "$t" "$seconds" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${rss:-?}" "$new")
  echo "$line"
  summary+=("$line")
  if [[ $rc -ne 0 || $new -gt 0 ]]; then
    crashed=1
    # The digest goes to stderr and to $failures, which .ci/hardening.sh prints at its end: CI keeps only the tail of
    # its output, and the failure must be reproducible from it (the input itself when it is small).
    {
      echo "fuzz: $t failed (exit $rc); log $log; artifacts in $dir/crashes/$t/"
      grep -E 'ERROR:|fuzz property violated|runtime error|SUMMARY|^ +#[0-9] ' "$log" | head -14 || true
      find "$dir/crashes/$t" -type f -newer "$log.start" | head -3 | while read -r a; do
        echo "artifact $(basename "$a"): $(stat -c %s "$a") bytes"
        if [[ $(stat -c %s "$a") -le 3000 ]]; then echo "  base64: $(base64 -w0 "$a")"; fi
      done
    } | tee -a "$failures" >&2
  fi
done
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $crashed
