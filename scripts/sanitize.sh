#!/usr/bin/env bash
# Sanitizer and fuzzing runs, each in its own clang build directory:
#   scripts/sanitize.sh asan [ctest args]  AddressSanitizer + UndefinedBehaviorSanitizer (build-asan):
#                                          unit, error and API tests, the list forms, the shared-memory
#                                          tests, and the collective sweep with its large count cut to
#                                          65539 elements
#   scripts/sanitize.sh tsan [ctest args]  ThreadSanitizer (build-tsan): the multi-rank API tests, which
#                                          drive the messenger and the executor from several threads
#   scripts/sanitize.sh fuzz [SECONDS] [RUNS]
#                                          each libFuzzer target for SECONDS (default 20), or RUNS
#                                          executions, from its seed corpus (tests/fuzz/corpus),
#                                          as many at once as there are cores
# Any report fails the run: sanitizers stop at the first one, and the
# suppression files in tests/sanitizers name each third-party exception.
# Run scripts/setup.sh first (packages); the CUDA plugins are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
supp=$PWD/tests/sanitizers

configure() {  # configure DIR CMAKE_ARGS...
  local dir=$1
  shift
  # -g1: line tables, all a report's stack needs, at a fraction of -g's compile time.
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DFAIRWAY_WITH_CUDA=OFF "$@" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  rm -f "$dir.configure.log"
}

case "$mode" in
  asan)
    configure build-asan -DFAIRWAY_SANITIZE=address,undefined
    cmake --build build-asan -j "${FAIRWAY_BUILD_JOBS:-$(nproc)}" --target fairway fairway-transport-ucx fairway_unit_tests \
      fairway_error_tests fairway_api_tests fairway_collective_tests fairway_list_form_tests fairway_shared_memory_tests \
      fairway_trace_tests fairway-trace
    export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1
    # use_tls=0: clang 14's LeakSanitizer misreads the dynamic TLS of
    # libraries loaded with dlopen (UCX's, through the transport plugin)
    # under glibc 2.36 and crashes in ScanRangeForPointers ("Tracer caught
    # signal 11") in some memory layouts. Not scanning TLS only makes the
    # check stricter: what TLS alone holds counts as leaked (lsan.supp
    # names glibc's one such buffer).
    export LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0:use_tls=0
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    export FAIRWAY_TEST_SWEEP_LARGE_COUNT=65539
    echo "sanitize: ASan+UBSan: unit, error, API and collective tests"
    ctest --test-dir build-asan -L "unit|errors|api|collectives" -j "$(nproc)" --output-on-failure "$@"
    ;;
  tsan)
    configure build-tsan -DFAIRWAY_SANITIZE=thread
    cmake --build build-tsan -j "${FAIRWAY_BUILD_JOBS:-$(nproc)}" --target fairway fairway-transport-ucx fairway_api_tests
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp
    echo "sanitize: TSan: multi-rank API tests"
    ctest --test-dir build-tsan -L api -j "$(nproc)" --output-on-failure "$@"
    ;;
  fuzz)
    seconds=${1:-20}
    runs=${2:-}
    configure build-fuzz -DFAIRWAY_SANITIZE=address,undefined -DFAIRWAY_BUILD_FUZZERS=ON -DFAIRWAY_BUILD_TESTS=OFF \
      -DFAIRWAY_BUILD_PERF=OFF
    targets=(fuzz_bootstrap_frames fuzz_unique_id fuzz_config fuzz_topology fuzz_trace_dump)
    cmake --build build-fuzz -j "${FAIRWAY_BUILD_JOBS:-$(nproc)}" --target "${targets[@]}"
    export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
    export LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    limit=(-max_total_time="$seconds")
    [ -n "$runs" ] && limit=(-runs="$runs")
    fuzz_one() {  # fuzz_one TARGET: runs it from its corpus; its output in build-fuzz/TARGET.log
      local t=$1 corpus=build-fuzz/corpus/$1  # the corpus grows here; the seeds in the repository stay
      mkdir -p "$corpus" build-fuzz/findings
      local seeds=(tests/fuzz/corpus/"$t")
      [ "$t" = fuzz_topology ] && seeds+=(tests/data)
      build-fuzz/bin/"$t" "${limit[@]}" -print_final_stats=1 -artifact_prefix=build-fuzz/findings/"$t"- \
        "$corpus" "${seeds[@]}" > build-fuzz/"$t".log 2>&1
    }
    # One target per core at a time: each is one process, so one after the
    # other left a core idle for the whole run.
    passed=0
    jobs=$(nproc)
    for ((first = 0; first < ${#targets[@]}; first += jobs)); do
      batch=("${targets[@]:first:jobs}")
      pids=()
      for t in "${batch[@]}"; do
        fuzz_one "$t" &
        pids+=($!)
      done
      for i in "${!batch[@]}"; do
        t=${batch[$i]}
        log=build-fuzz/$t.log
        if ! wait "${pids[$i]}"; then
          wait  # the rest of the batch ends within its time limit
          tail -n 60 "$log"
          echo "fuzz: $t found a failure (input in build-fuzz/findings/)"
          echo "fuzz: $passed passed, 1 failed"
          exit 1
        fi
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
        echo "fuzz: $t: $execs executions ($rate/s), corpus $(ls build-fuzz/corpus/"$t" | wc -l) inputs, no finding"
        passed=$((passed + 1))
      done
    done
    echo "fuzz: $passed passed, 0 failed"
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan [ctest args] | fuzz [SECONDS] [RUNS]" >&2
    exit 2
    ;;
esac
