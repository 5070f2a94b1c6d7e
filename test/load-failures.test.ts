/**
 * Model loads that fail: bounded retries, and errors that say which model
 * failed and why (Triton's model index), at start and on load and poll.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Server, type ModelLoadFailure } from '../lib/index.js';
import { QUIET, copyRepository, rejection } from './helpers.js';

const BROKEN_REASON =
  "Invalid argument: unable to find backend library for backend 'nonexistent_backend', try specifying runtime on the model configuration.";

/** A model whose backend does not exist: every load of it fails. */
async function addBroken(repository: string, name = 'broken'): Promise<void> {
  await mkdir(join(repository, name, '1'), { recursive: true });
  await writeFile(
    join(repository, name, 'config.pbtxt'),
    `name: "${name}"\nbackend: "nonexistent_backend"\nmax_batch_size: 0\n` +
      'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n' +
      'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n',
  );
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function repositoryWithBroken(): Promise<string> {
  const repository = await copyRepository(['identity_fp32']);
  cleanups.push(repository.remove);
  await addBroken(repository.path);
  return repository.path;
}

async function start(options: Parameters<typeof Server.start>[0]): Promise<Server> {
  const server = await Server.start({ ...QUIET, log: { info: false, error: false }, ...options });
  cleanups.push(() => server.stop());
  return server;
}

describe('failed model loads', () => {
  // Without the package's default of 0 retries, Triton's in-process server
  // retries the failing load without end and start never returns: this
  // test would run into its timeout.
  it('start with a broken model fails at once, naming the model and Triton’s reason', async () => {
    const repository = await repositoryWithBroken();
    for (const modelControlMode of ['poll', 'none'] as const) {
      const error = await rejection(start({ modelRepository: repository, modelControlMode }));
      expect(error.code).toBe('INTERNAL');
      expect(error.message).toContain('failed to load all models');
      expect(error.message).toContain(`'broken' version 1: ${BROKEN_REASON}`);
      expect(error.models).toEqual([{ name: 'broken', version: '1', reason: BROKEN_REASON }] satisfies ModelLoadFailure[]);
    }
  }, 20_000);

  it('with exitOnError off the server starts, not ready, and the index gives the reason', async () => {
    const repository = await repositoryWithBroken();
    const server = await start({ modelRepository: repository, modelControlMode: 'poll', exitOnError: false });
    expect(await server.ready()).toBe(false);
    const index = await server.modelIndex();
    expect(index.find((entry) => entry.name === 'broken')).toEqual({
      name: 'broken',
      version: '1',
      state: 'UNAVAILABLE',
      reason: BROKEN_REASON,
    });
    const response = await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 2], data: new Float32Array([1, 2]) } } });
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([1, 2]);
  }, 20_000);

  it('a retry count of its own is bounded too', async () => {
    const repository = await repositoryWithBroken();
    const error = await rejection(start({ modelRepository: repository, modelControlMode: 'poll', modelLoadRetryCount: 2 }));
    expect(error.models?.map((model) => model.name)).toEqual(['broken']);
  }, 20_000);

  it('an explicit load of a broken model fails with the reason', async () => {
    const repository = await repositoryWithBroken();
    const server = await start({ modelRepository: repository, modelControlMode: 'explicit' });
    const error = await rejection(server.loadModel('broken'));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain(BROKEN_REASON);
    // The server keeps serving.
    await server.loadModel('identity_fp32');
    expect(await server.model('identity_fp32').ready()).toBe(true);
  }, 20_000);

  it('a model loaded from memory that fails to load fails at once (no retries without end)', async () => {
    const repository = await repositoryWithBroken();
    const server = await start({ modelRepository: repository, modelControlMode: 'explicit' });
    const error = await rejection(
      server.loadModel('from_memory', {
        config: {
          name: 'from_memory',
          backend: 'nonexistent_backend',
          max_batch_size: 0,
          input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
          output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
        },
        files: { '1/model.bin': new Uint8Array([1]) },
      }),
    );
    expect(error.message).toContain("unable to find backend library for backend 'nonexistent_backend'");
  }, 20_000);
});

describe('configs that would abort the process', () => {
  // Triton's ONNX Runtime and PyTorch backends parse integer parameters with std::stoi and do not
  // catch its out_of_range: on real Triton r25.07 this config aborts the process that loads it.
  async function repositoryWithAborting(): Promise<string> {
    const repository = await copyRepository(['identity_fp32']);
    cleanups.push(repository.remove);
    await mkdir(join(repository.path, 'aborts', '1'), { recursive: true });
    await writeFile(
      join(repository.path, 'aborts', 'config.pbtxt'),
      'name: "aborts"\nbackend: "onnxruntime"\nmax_batch_size: 8\n' +
        'parameters { key: "intra_op_thread_count" value { string_value: "99999999999" } }\n',
    );
    return repository.path;
  }
  const MESSAGE = /^not loaded: the backend would abort the process on this value \(its std::stoi throws out of range\):\n {2}'aborts' \(.*\/aborts\/config\.pbtxt\): parameters\["intra_op_thread_count"\]: "99999999999" is out of the backend's 32-bit range$/;

  it('are refused before Triton reads them, on load and on poll; other models load', async () => {
    const repository = await repositoryWithAborting();
    const server = await start({ modelRepository: repository, modelControlMode: 'explicit' });
    const error = await rejection(server.loadModel('aborts'));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toMatch(MESSAGE);
    // Triton was never asked: the model has no state in its index.
    expect((await server.modelIndex()).find((entry) => entry.name === 'aborts')).toEqual({ name: 'aborts' });
    expect(await (await server.loadModel('identity_fp32')).ready()).toBe(true);
    expect((await rejection(server.pollModelRepository())).message).toMatch(MESSAGE);
  });

  it('are looked for where Triton reads the config: configs/<modelConfigName>.pbtxt first', async () => {
    const repository = await repositoryWithAborting();
    await mkdir(join(repository, 'aborts', 'configs'));
    await writeFile(join(repository, 'aborts', 'configs', 'safe.pbtxt'), 'name: "aborts"\nbackend: "onnxruntime"\nmax_batch_size: 8\n');
    await writeFile(join(repository, 'aborts', 'configs', 'custom.pbtxt'), await readFile(join(repository, 'aborts', 'config.pbtxt'), 'utf8'));
    await writeFile(join(repository, 'aborts', 'config.pbtxt'), 'name: "aborts"\nbackend: "onnxruntime"\nmax_batch_size: 8\n');
    const custom = await start({ modelRepository: repository, modelControlMode: 'explicit', modelConfigName: 'custom' });
    expect((await rejection(custom.loadModel('aborts'))).message).toMatch(/'aborts' \(.*\/aborts\/configs\/custom\.pbtxt\): parameters\["intra_op_thread_count"\]/);
    // With the safe one Triton is asked, and reports what it finds (no ONNX Runtime backend here, or no model file).
    const safe = await start({ modelRepository: repository, modelControlMode: 'explicit', modelConfigName: 'safe' });
    expect((await rejection(safe.loadModel('aborts'))).message).not.toMatch(/^not loaded/);
  });

  it('keep a server from starting when it would load them', async () => {
    const repository = await repositoryWithAborting();
    const modes: Array<Partial<Parameters<typeof Server.start>[0]>> = [
      { modelControlMode: 'poll' },
      { modelControlMode: 'none' },
      { modelControlMode: 'explicit', startupModels: ['*'] },
    ];
    for (const options of modes) {
      const error = await rejection(start({ modelRepository: repository, ...options }));
      expect(error.code).toBe('INVALID_ARG');
      expect(error.message).toMatch(MESSAGE);
    }
    // Explicit mode loading other models starts.
    const server = await start({ modelRepository: repository, modelControlMode: 'explicit', startupModels: ['identity_fp32'] });
    expect(await server.model('identity_fp32').ready()).toBe(true);
  });
});
