import { cpSync } from 'node:fs';
import { defineConfig } from 'tsup';

export default defineConfig({
  // cli: the package's `bin` (tritonserver-node doctor); kserve: the
  // `tritonserver-node/kserve` subpath; client: `tritonserver-node/client` (remote mode).
  entry: { index: 'lib/index.ts', cli: 'lib/cli/bin.ts', kserve: 'lib/kserve/index.ts', client: 'lib/client/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  shims: true,
  target: 'node20',
  outDir: 'dist',
  // gRPC and undici are optional: their packages stay out of the bundle and load lazily.
  external: ['@grpc/grpc-js', '@grpc/proto-loader', 'undici'],
  // The KServe .proto files are read at run time, beside dist/kserve.js.
  onSuccess: async () => {
    cpSync('lib/kserve/proto', 'dist/proto', { recursive: true });
  },
});
