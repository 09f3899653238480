#!/usr/bin/env bash
# `make fuzz`: builds every tests/fuzz target with clang + libFuzzer + ASan +
# UBSan in build-fuzz/ and runs each for FUZZ_SECONDS (default 60).
#   FUZZ_SECONDS=120 FUZZ_TARGETS="http_infer_request grpc_infer_request" make fuzz
# Seeds come from tests/fuzz/corpus/<name>/ (read only); inputs libFuzzer finds
# go to build-fuzz/corpus/<name>/, crashes/timeouts/OOMs to
# build-fuzz/artifacts/<name>/. Exit status 1 if any target crashed.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-$(nproc)}

CXX_BIN=${FUZZ_CXX:-}
if [ -z "$CXX_BIN" ]; then
  for c in clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null; then CXX_BIN=$c; break; fi
  done
fi
if [ -z "$CXX_BIN" ]; then
  echo "[fuzz] no clang++ found (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2
  exit 2
fi

ALL_TARGETS=$(cd tests/fuzz && ls *_fuzz.cpp | sed 's/_fuzz\.cpp$//')
TARGETS=${FUZZ_TARGETS:-$ALL_TARGETS}

# -fsanitize=fuzzer-no-link instruments the libraries for coverage; -w because
# clang warns where GCC does not and the project builds with -Werror (warnings
# are GCC's job in the normal build). -O1 -g1 as libFuzzer's documentation
# builds: line tables are what a crash's stack needs, and it compiles in about
# half the time of -O2 -g.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_CXX_COMPILER="$CXX_BIN" -DORTSERVE_BUILD_TESTS=OFF -DORTSERVE_LIBFUZZER=ON \
  -DORTSERVE_SANITIZE=address,undefined \
  -DCMAKE_CXX_FLAGS="-w -fsanitize=fuzzer-no-link -fno-sanitize-recover=all" >/dev/null || exit 1
cmake --build "$BUILD" -j "$JOBS" --target $(for t in $TARGETS; do echo "fuzz_$t"; done) || exit 1

crashed=()
for t in $TARGETS; do
  mkdir -p "$BUILD/corpus/$t" "$BUILD/artifacts/$t"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  echo "[fuzz] $t for ${SECONDS_PER_TARGET}s"
  # The first corpus dir is where new inputs are written; the seeds stay untouched.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD/fuzz_$t" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 \
      -rss_limit_mb=4096 -malloc_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$BUILD/artifacts/$t/" \
      "$BUILD/corpus/$t" "tests/fuzz/corpus/$t" 2>&1 | tee "$BUILD/artifacts/$t/log.txt" | \
      grep -E '^(==|#[0-9]+[[:space:]]+DONE|SUMMARY|stat::number_of_executed_units|stat::peak_rss|artifact_prefix|Test unit written|.*FUZZ_CHECK|.*runtime error)' 
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then crashed+=("$t"); fi
done
if [ ${#crashed[@]} -gt 0 ]; then
  echo "[fuzz] crashes in: ${crashed[*]} (inputs under $BUILD/artifacts/<name>/; replay one with"
  echo "       $BUILD/fuzz_<name> <file>, and add it to tests/fuzz/corpus/<name>/ once fixed)"
  exit 1
fi
echo "[fuzz] no crashes"
