#!/usr/bin/env bash
# Runs one fuzzer for longer than test/fuzz.test.ts does:
#   test/fuzz/run.sh HARNESS SECONDS [libFuzzer flags...]
# HARNESS: http_head_fuzzer, http_infer_fuzzer, grpc_infer_fuzzer or
# http_response_fuzzer (the _fuzzer may be left off). Builds build/fuzz first
# (clang++, or $CXX), then
# fuzzes for SECONDS in one process on build/fuzz/corpus/HARNESS, a corpus
# seeded from test/fuzz/corpus/HARNESS that keeps what each run finds (the
# committed seeds are never written to). A crashing input lands in
# build/fuzz/artifacts/; reproduce with: build/fuzz/HARNESS FILE
# JOBS=N runs N processes at once instead (-jobs/-workers N; their output
# goes to build/fuzz/logs/fuzz-*.log).
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 HARNESS SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
harness=${1%_fuzzer}_fuzzer
seconds=$2
shift 2
case $harness in
  http_head_fuzzer | http_infer_fuzzer | grpc_infer_fuzzer | http_response_fuzzer) ;;
  *) echo "unknown harness: $harness (http_head_fuzzer, http_infer_fuzzer, grpc_infer_fuzzer, http_response_fuzzer)" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/fuzz
cmake -S "$root/test/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target "$harness"

corpus=$build/corpus/$harness
mkdir -p "$corpus" "$build/artifacts" "$build/logs"
cp -n "$root/test/fuzz/corpus/$harness/"* "$corpus/"

jobs=${JOBS:-1}
flags=(-max_total_time="$seconds" -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/$harness-")
if [ "$jobs" -gt 1 ]; then
  # libFuzzer writes each job's output to fuzz-N.log in its working directory.
  cd "$build/logs"
  flags+=(-jobs="$jobs" -workers="$jobs")
fi
exec "$build/$harness" "${flags[@]}" "$@" "$corpus"
