import { defineConfig } from 'tsup';

export default defineConfig({
  // cli: the package's `bin` (tritonserver-node doctor).
  entry: { index: 'lib/index.ts', cli: 'lib/cli/bin.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  shims: true,
  target: 'node20',
  outDir: 'dist',
});
