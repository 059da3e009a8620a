#!/usr/bin/env bash
# The C++ unit tests under sanitizers, each in its own build (CPU only: no CUDA, no benchmarks,
# no Python module):
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer) over every test of
#         ferry_tests but those in ASAN_EXCLUDE (none today), in build-asan/
#         ($FERRY_ASAN_BUILD_DIR)
#   tsan  ThreadSanitizer over the tests of the threaded parts (TSAN_TESTS), in build-tsan/
#         ($FERRY_TSAN_BUILD_DIR); all of ferry_core is built with -fsanitize=thread, since a
#         race is only seen where both sides are instrumented
# Both at -O1 -g1 with frame pointers (readable stacks at a build time CI can afford). Any
# finding fails the run: UBSan does not recover (-fno-sanitize-recover=all), and every
# sanitizer stops at its first report. Suppressions (scripts/sanitizers/*.supp) are only for
# findings inside third-party libraries, each with its reason; ferry's own are fixed.
#   scripts/sanitize.sh [asan] [tsan]     (default: both)
# The tests run under ctest as in the normal build, one process per test, one per core; the
# ferry binary the CLI tests start is the sanitized one of the same build, so those runs are
# checked too. Each sanitizer's ctest log: DIR/asan-ctest.log, DIR/tsan-ctest.log.
set -euo pipefail
cd "$(dirname "$0")/.."

which=("$@")
((${#which[@]})) || which=(asan tsan)
supp=$PWD/scripts/sanitizers

# Under ASan every test runs. Two options make the tests that first failed under it work
# (rather than leaving them out):
# - verify_asan_link_order=0: FaultInjection.FullDisk* and PackTest.InterruptedPack* start ferry
#   with LD_PRELOAD of the ENOSPC shim (a "small disk"), which then comes before the ASan
#   runtime in the library list; ASan would refuse to start. The shim only wraps write-side
#   libc calls and passes them on (dlsym RTLD_NEXT), ASan's interceptors included.
# - handle_sigbus=0: FaultGuard.SigbusOutsideAGuardStillKills expects the process to die of
#   SIGBUS; ASan's handler would turn that into a report and exit 1. ferry's own guard handler
#   still runs (it chains to the default action), and an unexpected SIGBUS still fails a test.
ASAN_EXCLUDE=()  # ctest -E regexes over "Suite.Test" names, each with its reason above

# The threaded parts: streams and events of the CPU backend and its pool, the streaming
# provider (slot ring, copy stream), the bounce ring and storage reads, the host registrar,
# sessions (open beside registration, runs, early stops), the timelines of their events, and the
# host engine's workers.
TSAN_TESTS=(
  'CpuBackend\.' 'ThreadPool\.' 'TimingEvents\.' 'Graph\.' 'BackgroundCopies\.'
  'Streaming[A-Za-z]*\.' 'StorageTest\.' 'StorageRing\.'
  'HostRegistrar\.' 'RegistrationInPieces\.' 'StartTimes\.'
  'PlannerSessions\.' 'PlannerSessionOptions\.' 'EarlyStop[A-Za-z]*\.' 'Timelines\.'
  'HostGemv\.'
)

# Tests of those suites ThreadSanitizer does not run, each with its reason:
# - StreamingChecks.AMissingWaitChangesTheOutput, ...AMissingBounceWaitChangesTheOutput, and
#   StreamingCompressedChecks.AMissingDecodeWaitChangesTheOutput, ...AMissingStagingWait...: they
#   leave a stream wait out on purpose and require the output to change, i.e. they are a data
#   race by design (the checks that a missing wait is caught); TSan rightly reports it.
# - StreamingBudget.ThePlannedPlanFitsEveryBudgetOfTheRealModel: plans the full-size models at
#   every budget (pure planning, one thread); ~10 minutes under TSan, past the test timeout.
#   It runs in the normal and the ASan builds.
TSAN_EXCLUDE=(
  'StreamingChecks\.AMissingWaitChangesTheOutput' 'StreamingChecks\.AMissingBounceWaitChangesTheOutput'
  'StreamingCompressedChecks\.AMissingDecodeWaitChangesTheOutput'
  'StreamingCompressedChecks\.AMissingStagingWaitChangesTheOutput'
  'StreamingBudget\.ThePlannedPlanFitsEveryBudgetOfTheRealModel'
)

# alternatives RE...: one extended regex matching any of them as a whole test's suite name
# (gtest_discover_tests names tests "Suite.Test", parameterized "Prefix/Suite.Test/N").
alternatives() {
  local IFS='|'
  echo "^([A-Za-z0-9_]*/)?($*)"
}

# configure_build DIR FLAGS: ferry_tests (and the ferry binary and shim it runs) built with FLAGS.
configure_build() {
  local dir=$1 flags=$2
  local args=(-S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
              "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_CXX_FLAGS=$flags"
              "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags"
              "-DCMAKE_MODULE_LINKER_FLAGS=$flags"
              -DFERRY_CUDA=OFF -DFERRY_BENCH=OFF -DFERRY_PYTHON=OFF
              # The normal build holds the warnings to -Werror; the sanitizers change what
              # GCC's flow analysis sees and can warn where the normal build does not.
              -DFERRY_WERROR=OFF)
  if command -v ccache >/dev/null 2>&1; then
    args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  fi
  cmake "${args[@]}" >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target ferry_tests
}

# run_tests NAME DIR CTEST-ARGS...: the tests as ctest runs them in CI (one process each, one
# per core at a time), with the sanitizer's options already in the environment.
runner=()  # a command the tests' ctest runs under (setarch -R for TSan)
run_tests() {
  local name=$1 dir=$2
  shift 2
  local log=$dir/$name-ctest.log
  if ! "${runner[@]}" ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "$@" >"$log" 2>&1; then
    grep -E '^[0-9]+% tests passed|\*\*\*|Failed|Exception' "$log" | tail -n 40 >&2 || true
    echo "sanitize: $name: FAILED; every failing test's output is in $log" >&2
    return 1
  fi
  echo "sanitize: $name: $(grep -E '^100% tests passed' "$log"), no findings"
}

for w in "${which[@]}"; do
  start=$SECONDS
  case $w in
    asan)
      dir=${FERRY_ASAN_BUILD_DIR:-build-asan}
      echo "== ASan + UBSan: build ($dir)"
      configure_build "$dir" "-fsanitize=address,undefined,float-cast-overflow \
-fno-sanitize-recover=all -fno-omit-frame-pointer"
      built=$SECONDS
      echo "== ASan + UBSan: ferry_tests"
      exclude=()
      ((${#ASAN_EXCLUDE[@]})) && exclude=(-E "$(alternatives "${ASAN_EXCLUDE[@]}")")
      asan_options=(detect_leaks=1 detect_stack_use_after_return=1 check_initialization_order=1
                    strict_init_order=1 strict_string_checks=1
                    verify_asan_link_order=0 handle_sigbus=0)  # these two: see ASAN_EXCLUDE
      ASAN_OPTIONS=$(IFS=:; echo "${asan_options[*]}") \
      LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp \
        run_tests asan "$dir" "${exclude[@]}"
      ;;
    tsan)
      dir=${FERRY_TSAN_BUILD_DIR:-build-tsan}
      echo "== TSan: build ($dir)"
      configure_build "$dir" "-fsanitize=thread -fno-omit-frame-pointer"
      built=$SECONDS
      echo "== TSan: the threaded parts' tests"
      # TSan needs its fixed address layout: with more than 28 bits of mmap randomization
      # (newer kernels' default) it stops with "unexpected memory mapping". setarch -R turns
      # randomization off for the test processes only (no privileges needed).
      norandom=()
      if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi
      runner=("${norandom[@]}")
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp \
        run_tests tsan "$dir" -R "$(alternatives "${TSAN_TESTS[@]}")" \
        -E "^([A-Za-z0-9_]*/)?($(IFS='|'; echo "${TSAN_EXCLUDE[*]}"))(/[0-9]+)?$"
      ;;
    *)
      echo "sanitize: unknown '$w' (asan, tsan)" >&2
      exit 2
      ;;
  esac
  echo "sanitize: $w took $((SECONDS - start)) s: build $((built - start)) s," \
    "tests $((SECONDS - built)) s"
done
