import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Server, TritonError, apiVersion, librarySearchPaths, liveObjects } from '../lib/index.js';
import { MODELS, OLD_API_LIBRARY, QUIET, REPO_ROOT, copyRepository, startServer, rejection } from './helpers.js';

const run = promisify(execFile);
const servers: Server[] = [];

async function started(options: Parameters<typeof startServer>[0] = {}): Promise<Server> {
  const server = await startServer(options);
  servers.push(server);
  return server;
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

describe('lifecycle', () => {
  it('starts, answers, stops and starts again', async () => {
    const server = await started();
    expect(await server.live()).toBe(true);
    expect(await server.ready()).toBe(true);
    const metadata = await server.metadata();
    expect(metadata.name).toBe('triton');
    expect(metadata.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(metadata.extensions).toContain('model_repository');
    await server.stop();
    const again = await started();
    expect(await again.live()).toBe(true);
  });

  it('reports the library it loaded', async () => {
    const server = await started();
    expect(server.library.path).toBe(process.env.TRITONSERVER_LIBRARY);
    expect(server.library.major).toBe(1);
    expect(server.library.minor).toBeGreaterThanOrEqual(17);
    expect(await apiVersion()).toEqual({ major: 1, minor: server.library.minor });
  });

  it('stop is idempotent and every later call rejects with UNAVAILABLE', async () => {
    const server = await started();
    const model = await server.loadModel('identity_fp32');
    await Promise.all([server.stop(), server.stop()]);
    await server.stop();
    expect(server.stopped).toBe(true);
    for (const call of [
      server.live(),
      server.ready(),
      server.metadata(),
      server.modelIndex(),
      server.loadModel('identity_fp32'),
      server.pollModelRepository(),
      server.metrics(),
      model.ready(),
      model.metadata(),
      model.config(),
      model.statistics(),
      model.infer({ inputs: { INPUT0: new Float32Array(1) } }),
    ]) {
      const error = await rejection(call);
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.message).toMatch(/stopped/);
    }
  });

  it('stop returns promptly with nothing in flight, despite a long exit timeout', async () => {
    // The test's own 10 s limit is the check: stop must not sit out 60 s.
    const server = await started({ exitTimeoutSeconds: 60 });
    await server.loadModel('identity_fp32');
    await server.loadModel('add_sub');
    await server.stop();
  }, 10_000);

  it('cancels requests in flight at stop: a model that honours cancellation ends them at once', async () => {
    const server = await started({ startupModels: ['slow', 'identity_fp32'] });
    const slow = rejection(
      server.model('slow').infer({
        inputs: { INPUT0: new Float32Array([4, 2]), DELAY_MS: new Uint32Array([20_000]) },
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    const report = await server.stop();
    expect(report).toEqual({ complete: true, requestsInside: 0, message: '' });
    const error = await slow;
    expect(error.code).toBe('CANCELLED');
    expect(error.message).toMatch(/cancel/);
  }, 15_000);

  it('stop() in the same tick as infer(): the requests not yet handed to Triton are cancelled, nothing is left', async () => {
    const server = await started({ startupModels: ['identity_fp32'] });
    const model = server.model('identity_fp32');
    await model.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([1]) } } }); // metadata cached
    // Queued (the addon submits once per tick), then stopped before that tick ends.
    const queued = Array.from({ length: 8 }, (_, i) =>
      rejection(model.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([i]) } } })),
    );
    const report = await server.stop();
    expect(report).toEqual({ complete: true, requestsInside: 0, message: '' });
    for (const error of await Promise.all(queued)) {
      expect(error.code).toBe('CANCELLED');
      expect(error.message).toMatch(/cancelled before it reached Triton/);
    }
    expect(liveObjects()).toMatchObject({ requests: 0, responses: 0, inputReferences: 0, pending: 0 });
  }, 15_000);

  it('past the exit timeout, stop() says what is left running and deletes the server only after it returns', async () => {
    const server = await started({ startupModels: ['slow'], exitTimeoutSeconds: 1 });
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const pending = server.model('slow').infer({
        inputs: { INPUT0: new Float32Array([7]), DELAY_MS: new Uint32Array([2500]), IGNORE_CANCEL: new Uint8Array([1]) },
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const report = await server.stop();
      expect(report.complete).toBe(false);
      expect(report.requestsInside).toBe(1);
      expect(report.message).toMatch(/1 request was still running inside Triton when the exit timeout \(1 s\) ran out/);
      // The request is not abandoned: it completes, and only then is the server deleted.
      const response = await pending;
      expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([7]);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.map((w) => w.message)).toContain(report.message);
    } finally {
      process.off('warning', onWarning);
    }
  }, 15_000);

  it('stop({ timeoutMs }) sets the exit timeout of that stop', async () => {
    const server = await started({ startupModels: ['slow'], exitTimeoutSeconds: 30 });
    const pending = server.model('slow').infer({
      inputs: { INPUT0: new Float32Array([1]), DELAY_MS: new Uint32Array([2000]), IGNORE_CANCEL: new Uint8Array([1]) },
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    // With the configured 30 s this stop would wait for the request; with 1 s it gives up first.
    const report = await server.stop({ timeoutMs: 1000 });
    expect(report.complete).toBe(false);
    expect(report.requestsInside).toBe(1);
    await pending;
  }, 15_000);

  it('supports `await using`', async () => {
    let escaped: Server | undefined;
    {
      await using server = await startServer();
      escaped = server;
      expect(await server.live()).toBe(true);
    }
    expect(escaped.stopped).toBe(true);
    expect((await rejection(escaped.live())).code).toBe('UNAVAILABLE');
  });

  it('runs two servers in one process independently', async () => {
    const [first, second] = await Promise.all([started({ serverId: 'first' }), started({ serverId: 'second' })]);
    expect((await first.metadata()).name).toBe('first');
    expect((await second.metadata()).name).toBe('second');
    await Promise.all([first.loadModel('identity_fp32'), second.loadModel('identity_fp32')]);
    await first.unloadModel('identity_fp32');
    expect(await first.model('identity_fp32').ready()).toBe(false);
    expect(await second.model('identity_fp32').ready()).toBe(true);
  });

  it('works in a worker thread', async () => {
    const worker = new Worker(resolve(import.meta.dirname, 'fixtures/run-ts.mjs'), {
      workerData: { module: resolve(import.meta.dirname, 'fixtures/worker-server.ts'), modelRepository: MODELS },
    });
    const message = await new Promise((resolveMessage, reject) => {
      worker.once('message', resolveMessage);
      worker.once('error', reject);
    });
    expect(message).toEqual({ name: 'identity_fp32', ready: true });
    expect(await new Promise((resolveExit) => worker.once('exit', resolveExit))).toBe(0);
  });

  it('lets the process exit by itself after stop', async () => {
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', resolve(import.meta.dirname, 'fixtures/exit-after-stop.ts'), MODELS],
      { cwd: REPO_ROOT, timeout: 20_000 },
    );
    expect(stdout.trim()).toBe('stopped');
  });

  it('lets the process exit by itself even without stop', async () => {
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', resolve(import.meta.dirname, 'fixtures/exit-without-stop.ts'), MODELS],
      { cwd: REPO_ROOT, timeout: 20_000 },
    );
    expect(stdout.trim()).toBe('1,2');
  });
});

describe('options', () => {
  it('rejects invalid options before anything native runs, naming the field', async () => {
    const bad = await rejection(Server.start({ modelRepository: MODELS, modelControlMode: 'sometimes' as 'poll' }));
    expect(bad.code).toBe('INVALID_ARG');
    expect(bad.message).toContain('modelControlMode');
    const unknown = await rejection(Server.start({ modelRepository: MODELS, modelRepo: 'x' } as never));
    expect(unknown.code).toBe('INVALID_ARG');
    expect(unknown.message).toContain('modelRepo');
    const missing = await rejection(Server.start({} as never));
    expect(missing.message).toContain('modelRepository');
  });

  it('passes options through to Triton (its options table in the log)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tritonserver-node-log-'));
    try {
      const file = join(dir, 'triton.log');
      const server = await started({
        serverId: 'options-check',
        modelControlMode: 'explicit',
        startupModels: ['identity_fp32'],
        strictModelConfig: true,
        strictReadiness: false,
        exitTimeoutSeconds: 7,
        pinnedMemoryPoolBytes: 1 << 20,
        minSupportedComputeCapability: 7.5,
        modelConfigName: 'config',
        rateLimiterMode: 'execCount',
        rateLimiterResources: [{ name: 'R1', count: 4, device: -1 }],
        cudaMemoryPoolBytes: { 0: 1 << 21 },
        bufferManagerThreadCount: 2,
        modelLoadThreadCount: 2,
        modelLoadRetryCount: 1,
        modelNamespacing: false,
        backendConfig: { identity: { 'tritonserver-node-test': 1 } },
        metrics: { enabled: true, gpu: false, cpu: false, intervalMs: 500 },
        log: { file, info: true, warn: true, error: true, verbose: 0, format: 'default' },
      });
      expect((await server.metadata()).name).toBe('options-check');
      expect(await server.model('identity_fp32').ready()).toBe(true);
      const log = await readFile(file, 'utf8');
      const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      const row = (name: string, value: string) =>
        expect(log).toMatch(new RegExp(`\\|\\s*${escape(name)}\\s*\\|\\s*${escape(value)}\\s*\\|`));
      row('server_id', 'options-check');
      row('model_repository_path[0]', MODELS);
      row('model_control_mode', 'MODE_EXPLICIT');
      row('startup_models_0', 'identity_fp32');
      row('strict_model_config', '1');
      row('strict_readiness', '0');
      row('exit_timeout', '7');
      row('pinned_memory_pool_byte_size', '1048576');
      row('min_supported_compute_capability', '7.5');
      row('model_config_name', 'config');
      row('rate_limit', 'EXEC_COUNT');
      row('rate_limit_resource[0]', '{"name":"R1", "count":4 "device":-1}');
      row('cuda_memory_pool_byte_size{0}', '2097152');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fails with INTERNAL when the repository does not exist', async () => {
    const error = await rejection(Server.start({ modelRepository: '/nonexistent/repo', ...QUIET }));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toContain('failed to stat file /nonexistent/repo');
  });
});

describe('library loading', () => {
  it('searches TRITONSERVER_LIBRARY, TRITON_HOME, the container path, then the loader path', () => {
    expect(librarySearchPaths(undefined, { TRITONSERVER_LIBRARY: '/a/libtritonserver.so', TRITON_HOME: '/t' })).toEqual([
      '/a/libtritonserver.so',
      '/t/lib/libtritonserver.so',
      '/opt/tritonserver/lib/libtritonserver.so',
      'libtritonserver.so',
    ]);
    expect(librarySearchPaths(undefined, {})).toEqual(['/opt/tritonserver/lib/libtritonserver.so', 'libtritonserver.so']);
    expect(librarySearchPaths('/explicit/libtritonserver.so', { TRITONSERVER_LIBRARY: '/a.so' })).toEqual([
      '/explicit/libtritonserver.so',
    ]);
  });

  it('says which paths it tried and why each failed', async () => {
    const error = await rejection(
      Server.start({ modelRepository: MODELS, libraryPath: '/nonexistent/lib/libtritonserver.so' }),
    );
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toContain('/nonexistent/lib/libtritonserver.so: ');
    expect(error.message).toContain('cannot open shared object file');
    expect(error.message).toContain('TRITON_HOME');
    const notTriton = await rejection(apiVersion({ libraryPath: 'libc.so.6' }));
    expect(notTriton.message).toContain('libc.so.6: not a Triton server library');
  });

  it('reports functions newer than the library as UNSUPPORTED', async () => {
    expect(await apiVersion({ libraryPath: OLD_API_LIBRARY })).toEqual({ major: 1, minor: 24 });
    const error = await rejection(
      Server.start({ modelRepository: MODELS, libraryPath: OLD_API_LIBRARY, modelLoadRetryCount: 2, ...QUIET }),
    );
    expect(error.code).toBe('UNSUPPORTED');
    expect(error.message).toBe(
      `TRITONSERVER_ServerOptionsSetModelLoadRetryCount needs C API 1.28; the loaded library (${OLD_API_LIBRARY}) implements 1.24`,
    );
    // Without the newer option the old library serves normally.
    const server = await Server.start({ modelRepository: MODELS, libraryPath: OLD_API_LIBRARY, modelControlMode: 'explicit', ...QUIET });
    servers.push(server);
    expect(server.library.minor).toBe(24);
    expect(await (await server.loadModel('identity_fp32')).ready()).toBe(true);
  });
});

describe('model control', () => {
  it('loads and unloads explicitly, with index and readiness following', async () => {
    const server = await started();
    const before = await server.modelIndex();
    expect(before.map((entry) => entry.name)).toEqual(expect.arrayContaining(['identity_fp32', 'add_sub', 'repeat_int32']));
    expect(before.find((entry) => entry.name === 'identity_fp32')).toEqual({ name: 'identity_fp32' });
    expect(await server.modelIndex({ readyOnly: true })).toEqual([]);

    const model = await server.loadModel('identity_fp32');
    expect(model.name).toBe('identity_fp32');
    expect(await model.ready()).toBe(true);
    expect(await server.modelIndex({ readyOnly: true })).toEqual([{ name: 'identity_fp32', version: '1', state: 'READY' }]);

    await server.unloadModel('identity_fp32');
    expect(await model.ready()).toBe(false);
    expect((await server.modelIndex()).find((entry) => entry.name === 'identity_fp32')).toEqual({
      name: 'identity_fp32',
      version: '1',
      state: 'UNAVAILABLE',
      reason: 'unloaded',
    });
  });

  it('gives clear errors for models that do not exist', async () => {
    const server = await started();
    const load = await rejection(server.loadModel('does_not_exist'));
    expect(load.code).toBe('INTERNAL');
    expect(load.message).toBe("failed to load 'does_not_exist', failed to poll from model repository");
    const metadata = await rejection(server.model('does_not_exist').metadata());
    expect(metadata.code).toBe('NOT_FOUND');
    expect(metadata.message).toContain("'does_not_exist' is not found");
    const unload = await rejection(server.unloadModel('does_not_exist'));
    expect(unload.code).toBe('NOT_FOUND');
    expect(unload.message).toBe("model 'does_not_exist' is neither loaded nor in the model repository");
    expect(() => server.model('')).toThrow(TritonError);
  });

  it('loads every model at start in poll mode and picks up a new model directory on poll', async () => {
    const repo = await copyRepository(['identity_fp32']);
    try {
      const server = await started({ modelRepository: repo.path, modelControlMode: 'poll' });
      expect(await server.model('identity_fp32').ready()).toBe(true);
      expect((await server.modelIndex()).map((entry) => entry.name)).toEqual(['identity_fp32']);
      await cp(join(MODELS, 'identity_int32'), join(repo.path, 'identity_int32'), { recursive: true });
      await server.pollModelRepository();
      expect(await server.model('identity_int32').ready()).toBe(true);
      const explicit = await rejection(server.loadModel('identity_int32'));
      expect(explicit.code).toBe('UNAVAILABLE');
    } finally {
      await repo.remove();
    }
  });

  it('loads startup models in explicit mode', async () => {
    const server = await started({ startupModels: ['add_sub'] });
    expect(await server.model('add_sub').ready()).toBe(true);
    expect(await server.model('identity_fp32').ready()).toBe(false);
  });

  it('registers and unregisters extra repositories with a name mapping', async () => {
    const repo = await copyRepository(['identity_int32']);
    try {
      const server = await started({ modelRepository: join(MODELS, '..', 'fixtures', 'empty-repository') });
      await server.registerModelRepository(repo.path, { identity_int32: 'renamed_identity' });
      expect((await server.modelIndex()).map((entry) => entry.name)).toContain('renamed_identity');
      const model = await server.loadModel('renamed_identity');
      expect((await model.metadata()).name).toBe('renamed_identity');
      await server.unloadModel('renamed_identity');
      await server.unregisterModelRepository(repo.path);
      expect((await server.modelIndex()).map((entry) => entry.name)).not.toContain('renamed_identity');
      const missing = await rejection(server.registerModelRepository('/nonexistent/repo'));
      expect(missing.code).not.toBe('UNKNOWN');
    } finally {
      await repo.remove();
    }
  });
});

describe('model information', () => {
  it('reports identity_fp32 metadata, config and properties as Triton prints them', async () => {
    const server = await started();
    const model = await server.loadModel('identity_fp32');
    expect(await model.metadata()).toEqual({
      name: 'identity_fp32',
      versions: ['1'],
      platform: 'identity',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [-1, -1] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [-1, -1] }],
    });
    const config = await model.config();
    expect(config.name).toBe('identity_fp32');
    expect(config.backend).toBe('identity');
    expect(config.max_batch_size).toBe(8);
    expect(config.input?.[0]).toMatchObject({ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] });
    expect(config.dynamic_batching?.preferred_batch_size).toEqual([8]);
    // KIND_CPU here; a GPU machine's Triton may place it on KIND_GPU.
    expect(config.instance_group?.[0]?.kind).toMatch(/^KIND_(CPU|GPU)$/);
    expect(config.instance_group?.[0]?.count).toBe(1);
    expect(await model.batchProperties()).toEqual({ batching: 'first-dim' });
    expect(await model.transactionProperties()).toEqual({ oneToOne: true, decoupled: false });
    const [stats] = await model.statistics();
    expect(stats).toMatchObject({ name: 'identity_fp32', version: '1', inference_count: 0 });
  });

  it('reports metadata of every python test model', async () => {
    const server = await started();
    const expected: Record<string, { inputs: string[]; outputs: string[]; decoupled: boolean }> = {
      add_sub: { inputs: ['INPUT0:FP32:4', 'INPUT1:FP32:4'], outputs: ['OUTPUT0:FP32:4', 'OUTPUT1:FP32:4'], decoupled: false },
      repeat_int32: { inputs: ['IN:INT32:-1', 'DELAY_MS:UINT32:1'], outputs: ['OUT:INT32:1'], decoupled: true },
      slow: { inputs: ['INPUT0:FP32:-1', 'DELAY_MS:UINT32:1', 'IGNORE_CANCEL:BOOL:1'], outputs: ['OUTPUT0:FP32:-1'], decoupled: false },
      fail: { inputs: ['INPUT0:FP32:-1'], outputs: ['OUTPUT0:FP32:-1'], decoupled: false },
      bytes_echo: { inputs: ['INPUT0:BYTES:-1'], outputs: ['OUTPUT0:BYTES:-1'], decoupled: false },
    };
    for (const [name, want] of Object.entries(expected)) {
      const model = await server.loadModel(name);
      const metadata = await model.metadata();
      const describe = (t: { name: string; datatype: string; shape: number[] }) => `${t.name}:${t.datatype}:${t.shape.join(',')}`;
      expect(metadata.platform).toBe('python');
      expect(metadata.inputs.map(describe)).toEqual(want.inputs);
      expect(metadata.outputs.map(describe)).toEqual(want.outputs);
      expect((await model.transactionProperties()).decoupled).toBe(want.decoupled);
      expect((await model.config()).backend).toBe('python');
    }
  });

  it('exposes metrics in Prometheus text', async () => {
    const server = await started();
    await server.loadModel('identity_fp32');
    const metrics = await server.metrics();
    expect(metrics).toContain('# TYPE nv_inference_request_success counter');
  });
});

describe('quickstart example', () => {
  it('lists the models and prints their metadata', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/quickstart.ts', MODELS], {
      cwd: REPO_ROOT,
      timeout: 30_000,
    });
    expect(stdout).toContain('identity_fp32 v1 READY');
    expect(stdout).toContain('INPUT0 FP32 [-1,-1]');
    expect(stdout).toContain('add_sub v1 READY');
  });
});
