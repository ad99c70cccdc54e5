#!/usr/bin/env bash
# Hardening CI (self-contained; each configuration in its own build directory, built with AGENTHOST_JOBS jobs):
#   1. build-hardening (the project's compiler; AGENTHOST_HARDENING_BUILD_DIR names a tree to reuse, such as the
#      README's `build`, whose default targets include these): bad-input matrix, security, reaper arguments,
#      no-files, the short soak, the fuzz regressions and seeds replayed without libFuzzer; then the full
#      1,000-cycle soak.
#   2. build-fuzz (clang 14, libFuzzer + ASan + UBSan, warnings are errors): the clang build check, a short run of every
#      fuzz target (AGENTHOST_FUZZ_SECONDS each, default 60), the regressions replayed by the libFuzzer binaries.
#   3. build-tsan (ThreadSanitizer): the process and provider tests and the short soak.
# Every step runs even when an earlier one failed (unless it needs that step's build); the exit status is non-zero
# when any step failed, and a timing summary is printed at the end.
# Env: AGENTHOST_FUZZ_SECONDS (60), AGENTHOST_FULL_SOAK (1; 0 skips the 1,000-cycle soak), AGENTHOST_SKIP_SETUP=1,
#      AGENTHOST_HARDENING_BUILD_DIR (build-hardening), AGENTHOST_JOBS (2: parallel compile jobs per build),
#      AGENTHOST_TSAN_TARGETS (the three test programs of step 3).
set -uo pipefail
cd "$(dirname "$0")/.."
export CTEST_OUTPUT_ON_FAILURE=1
fuzz_seconds=${AGENTHOST_FUZZ_SECONDS:-60}
full_soak=${AGENTHOST_FULL_SOAK:-1}
hardening_dir=${AGENTHOST_HARDENING_BUILD_DIR:-build-hardening}
jobs=${AGENTHOST_JOBS:-2}
t0=$(date +%s)
failures=()
timings=()

step() {
  local name=$1
  shift
  local start status
  start=$(date +%s)
  echo
  echo "== $name"
  if "$@"; then status=ok; else status=FAILED; failures+=("$name"); fi
  timings+=("$(printf '%-44s %6ss  %s' "$name" "$(($(date +%s) - start))" "$status")")
  [[ $status == ok ]]
}

# ---- 1. hardening suites (default compiler) ----------------------------------------------------------------------
hardening_targets=(agenthost_hardening_tests agenthost_soak_tests agenthost_no_files_tests
                   agenthost_replay_fuzz_line_framer agenthost_replay_fuzz_pi_mapper agenthost_replay_fuzz_pi_events
                   agenthost_replay_fuzz_agent_mappers
                   agenthost_replay_fuzz_cli_options agenthost_replay_fuzz_message_json
                   agenthost_replay_fuzz_reaper_protocol)
hardening_tests='^(BadInput|Security|ReaperArguments|NoFiles|Soak)\.|^fuzz_'
figures="$PWD/$hardening_dir/figures.txt"

build_hardening() {
  # A reused tree keeps its own configuration (the README's has the benchmarks on); a new one leaves them out.
  if [[ ! -f $hardening_dir/CMakeCache.txt ]]; then
    cmake -S . -B "$hardening_dir" -DAGENTHOST_BUILD_BENCH=OFF > /dev/null || return 1
  fi
  cmake --build "$hardening_dir" -j"$jobs" --target "${hardening_targets[@]}"
}
test_hardening() {
  rm -f "$figures"
  # Serial: the large-line cases measure the test process's peak RSS.
  AGENTHOST_HARDENING_FIGURES="$figures" ctest --test-dir "$hardening_dir" -R "$hardening_tests" -j1
}
full_soak() {
  AGENTHOST_HARDENING_FIGURES="$figures" AGENTHOST_SOAK=1 ctest --test-dir "$hardening_dir" -R '^Soak\.FullCycles$'
}

# ---- 2. fuzzing (clang) ----------------------------------------------------------------------------------------------
fuzz_ready=0
# $1: ON (warnings are errors), or OFF, only after an ON failure: warnings must not keep the fuzzers from running.
build_fuzz() {
  cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DAGENTHOST_FUZZ_WERROR="$1" > /dev/null &&
    cmake --build build-fuzz -j"$jobs" && fuzz_ready=1
}
fuzz_short() { scripts/fuzz.sh --no-build "$fuzz_seconds"; }
fuzz_regressions() { ctest --test-dir build-fuzz -j1; }

# ---- 3. ThreadSanitizer ----------------------------------------------------------------------------------------------
# AGENTHOST_TSAN_TARGETS (space-separated) narrows them: CI leaves out the provider tests to stay inside its time.
tsan_all="agenthost_process_tests agenthost_provider_tests agenthost_soak_tests"
read -r -a tsan_targets <<< "${AGENTHOST_TSAN_TARGETS:-$tsan_all}"
tsan_ready=0
build_tsan() {
  # -Wno-tsan: GCC 12 warns that TSan does not model std::atomic_thread_fence (used by Boost.Asio), and warnings are
  # errors in our builds, so AGENTHOST_TSAN=ON alone does not compile with GCC 12.
  cmake -S . -B build-tsan -DAGENTHOST_TSAN=ON -DAGENTHOST_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS=-Wno-tsan > /dev/null &&
    cmake --build build-tsan -j"$jobs" --target "${tsan_targets[@]}" && tsan_ready=1
}
test_tsan() {
  # The suites of exactly these programs (ctest -R on their names).
  local suites
  suites=$(for t in "${tsan_targets[@]}"; do build-tsan/bin/"$t" --gtest_list_tests | grep -E '^[^ ].*\.$'; done |
    tr -d '.' | sort -u | paste -sd'|')
  [[ -n $suites ]] || return 1
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --test-dir build-tsan -R "^($suites)\." -j1
}

# ---- run ---------------------------------------------------------------------------------------------------------
if [[ "${AGENTHOST_SKIP_SETUP:-0}" != 1 ]]; then step "setup (scripts/setup.sh --with-fuzz)" scripts/setup.sh --with-fuzz; fi

if step "build-hardening" build_hardening; then
  step "hardening suites + fuzz replays" test_hardening
  if [[ $full_soak == 1 ]]; then step "full soak (1,000 cycles, 8 concurrent)" full_soak; fi
fi

if ! step "build-fuzz (clang 14, -Werror)" build_fuzz ON; then
  step "build-fuzz (clang 14, warnings allowed)" build_fuzz OFF
fi
if [[ $fuzz_ready == 1 ]]; then
  step "fuzz ${fuzz_seconds}s per target" fuzz_short
  step "fuzz regressions (libFuzzer binaries)" fuzz_regressions
fi

if step "build-tsan" build_tsan; then
  step "ThreadSanitizer: ${tsan_targets[*]#agenthost_}" test_tsan
fi

echo
echo "== figures ($hardening_dir/figures.txt)"
cat "$figures" 2>/dev/null || echo "(none)"
echo
echo "== timings"
printf '%s\n' "${timings[@]}"
printf '%-44s %6ss\n' "total" "$(($(date +%s) - t0))"
if [[ -s build-fuzz/fuzz-failures.txt ]]; then
  echo "== fuzz failures (build-fuzz/fuzz-failures.txt)"
  cat build-fuzz/fuzz-failures.txt
fi
if [[ ${#failures[@]} -gt 0 ]]; then
  echo "== FAILED: ${failures[*]}"
  exit 1
fi
echo "== all hardening steps passed"
