/**
 * The server side of bench/hostile.ts: a Server on test/models with
 * identity_fp32 and slow loaded, served by `serveKServe` with one engine for
 * both protocols. It runs in a process of its own so that the attacker's
 * memory is not counted in the server's.
 *
 *   node --import tsx bench/hostile-server.ts --engine native|node
 *
 * Prints `{"http":PORT,"grpc":PORT}` as one line on stdout once listening,
 * then runs until killed; on SIGUSR2 it prints `{"jsLoopMaxMs":N}`, its JS
 * event loop's worst delay since the last one. TRITONSERVER_LIBRARY picks
 * the library (the test core when unset).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

const root = resolve(import.meta.dirname, '..');
const testCore = resolve(root, 'build/testcore/libtritonserver.so');
// Set before the package is imported: the library is looked up from the environment.
if (!process.env.TRITONSERVER_LIBRARY && existsSync(testCore)) process.env.TRITONSERVER_LIBRARY = testCore;

const { Server } = await import('../lib/index.js');
const { serveKServe } = await import('../lib/kserve/index.js');

const { values } = parseArgs({ options: { engine: { type: 'string', default: 'native' } } });
const engine = values.engine;
if (engine !== 'native' && engine !== 'node') throw new Error(`--engine must be native or node, not ${engine}`);

const server = await Server.start({
  modelRepository: resolve(root, 'test/models'),
  modelControlMode: 'explicit',
  startupModels: ['identity_fp32', 'slow'],
  log: { info: false },
});
const frontends = await serveKServe(server, { http: { port: 0, engine }, grpc: { port: 0, engine } });
process.stdout.write(`${JSON.stringify({ http: frontends.http?.port, grpc: frontends.grpc?.port })}\n`);

// How long the JS thread was held at most (its event loop's worst delay), asked for with SIGUSR2; then measured afresh.
const delay = monitorEventLoopDelay({ resolution: 2 });
delay.enable();
process.on('SIGUSR2', () => {
  process.stdout.write(`${JSON.stringify({ jsLoopMaxMs: delay.max / 1e6 })}\n`);
  delay.reset();
});

const stop = async (): Promise<void> => {
  await frontends.close();
  await server.stop();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
