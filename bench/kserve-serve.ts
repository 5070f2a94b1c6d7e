/**
 * Serves the KServe v2 protocol from this package for clients not written
 * here (tritonclient examples, perf_analyzer):
 *
 *   npx tsx bench/kserve-serve.ts [--http 8000] [--grpc 8001] [--metrics 8002] [--repository DIR]... [model ...]
 *
 * Repositories: test/models and bench/models (the tritonclient examples'
 * `simple`) unless given; bench/tritonclient-models has the decoupled
 * `repeat_int32` simple_grpc_custom_repeat expects (it shadows
 * test/models/repeat_int32, so serve it with --repository bench/models
 * --repository bench/tritonclient-models). Models named on the command line are loaded (default
 * identity_fp32, repeat_int32, simple); repository control is on, so the
 * model-control examples work. TRITONSERVER_LIBRARY picks the library.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Server } from '../lib/index.js';
import { serveKServe } from '../lib/kserve/index.js';

const { values, positionals } = parseArgs({
  options: {
    http: { type: 'string', default: '8000' },
    grpc: { type: 'string', default: '8001' },
    metrics: { type: 'string', default: '8002' },
    repository: { type: 'string', multiple: true },
  },
  allowPositionals: true,
});
const root = resolve(import.meta.dirname, '..');
const server = await Server.start({
  modelRepository: values.repository ?? [resolve(root, 'test/models'), resolve(root, 'bench/models')],
  modelControlMode: 'explicit',
  modelLoadRetryCount: 0,
  log: { info: false },
});
for (const name of positionals.length > 0 ? positionals : ['identity_fp32', 'repeat_int32', 'simple']) {
  try {
    await server.loadModel(name);
  } catch (error) {
    console.error(`could not load ${name}: ${(error as Error).message}`);
  }
}
const frontends = await serveKServe(server, {
  http: { port: Number(values.http) },
  grpc: { port: Number(values.grpc) },
  metrics: { port: Number(values.metrics) },
  repositoryControl: true,
});
console.log(`KServe v2 on http :${frontends.http?.port}, grpc :${frontends.grpc?.port}, metrics :${frontends.metrics?.port} (${server.library.path})`);
const stop = async (): Promise<void> => {
  await frontends.close();
  await server.stop();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
