#!/usr/bin/env bash
# The tests of the native front ends, the client's native transports and the
# inference engine again, against an AddressSanitizer + UndefinedBehaviorSanitizer
# build of the addon and of the test core (part of `npm test`, after the
# suite). Any report fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/sanitized
# GCC 12 cannot evaluate node-addon-api's compile-time function-pointer tests
# with its null-pointer checks on, and node-addon-api's ObjectWrap downcasts
# the object it is constructing (the vptr check): those checks are left out.
sanitize="-fsanitize=address,undefined -fno-sanitize=null,nonnull-attribute,returns-nonnull-attribute,vptr"
sanitize+=" -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

# The addon: node-gyp builds into the folder it runs in, so in a copy of its sources.
mkdir -p "$out/addon"
cp -p binding.gyp package.json "$out/addon/"
rm -rf "$out/addon/native" && cp -rp native "$out/addon/"  # -p: make rebuilds only what changed
ln -sfn "$PWD/node_modules" "$out/addon/node_modules"
(cd "$out/addon" && CXXFLAGS="$sanitize" LDFLAGS="$sanitize" npm run --silent build:native >/dev/null)

cmake -S . -B "$out/testcore" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESTCORE_SANITIZE=address,undefined >/dev/null
cmake --build "$out/testcore" -j 2 >/dev/null

runtime="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
log="$out/vitest.log"
set +e
LD_PRELOAD="$runtime" ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
  TRITONSERVER_NODE_ADDON="$PWD/$out/addon/build/Release/tritonserver_node.node" \
  TRITONSERVER_LIBRARY="$PWD/$out/testcore/libtritonserver.so" \
  npx vitest run test/kserve-http-native.test.ts test/kserve-grpc-native.test.ts test/kserve-hostile.test.ts \
    test/kserve-shared-memory.test.ts test/inference.test.ts test/client.test.ts test/client-faults.test.ts test/client-native.test.ts \
    test/client-native-http.test.ts test/client-native-tls.test.ts test/client-native-fuzz.test.ts test/kserve-tls.test.ts >"$log" 2>&1
status=$?
set -e
if grep -qE "ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer" "$log"; then
  grep -E -A30 "ERROR: AddressSanitizer|runtime error:" "$log" | head -80
  echo "sanitizers: a report (the whole log: $log)"
  exit 1
fi
tail -5 "$log"
exit $status
