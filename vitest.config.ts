import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

// Without a real Triton (TRITONSERVER_LIBRARY unset) the suite runs against
// the test core that `npm run build:testcore` builds.
const testCore = resolve(import.meta.dirname, 'build/testcore/libtritonserver.so');

export default defineConfig({
  // Code under test that imports the package by name (examples/) gets the
  // same lib/ modules as the tests, not a second copy from dist/.
  resolve: {
    alias: [
      { find: /^tritonserver-node\/client$/, replacement: resolve(import.meta.dirname, 'lib/client/index.ts') },
      { find: /^tritonserver-node\/kserve$/, replacement: resolve(import.meta.dirname, 'lib/kserve/index.ts') },
      { find: /^tritonserver-node$/, replacement: resolve(import.meta.dirname, 'lib/index.ts') },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    env: { TRITONSERVER_LIBRARY: process.env.TRITONSERVER_LIBRARY ?? testCore },
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    execArgv: ['--expose-gc'],
  },
});
