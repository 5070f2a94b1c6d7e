import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

export default function setup(): void {
  if (process.env.TRITONSERVER_LIBRARY) return;
  const testCore = resolve(import.meta.dirname, '../build/testcore/libtritonserver.so');
  if (!existsSync(testCore)) {
    throw new Error(`the test core is not built (${testCore}); run \`npm run build:testcore\` or \`npm test\``);
  }
}
