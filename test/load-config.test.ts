import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Server,
  parseModelConfig,
  writeModelRepository,
  type ModelConfigInput,
} from '../lib/index.js';
import { MODELS, QUIET, startServer, rejection } from './helpers.js';

let server: Server;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
});

function identityConfig(name: string, dataType: string, maxBatchSize = 4): ModelConfigInput {
  return {
    name,
    backend: 'identity',
    max_batch_size: maxBatchSize,
    input: [{ name: 'INPUT0', data_type: dataType, dims: [-1] }],
    output: [{ name: 'OUTPUT0', data_type: dataType, dims: [-1] }],
  } as ModelConfigInput;
}

describe('model.config()', () => {
  it('returns the typed config of every test model', async () => {
    const names = (await readdir(MODELS, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
    expect(names.length).toBeGreaterThanOrEqual(19);
    for (const name of names) {
      const model = await server.loadModel(name);
      const config = await model.config();
      const file = parseModelConfig(await readFile(join(MODELS, name, 'config.pbtxt'), 'utf8'));
      expect(config.name).toBe(name);
      expect(config.backend).toBe(file.backend ?? ''); // '' for an ensemble
      expect(config.max_batch_size).toBe(file.max_batch_size ?? 0);
      expect(config.input?.map((i) => [i.name, i.data_type, i.dims])).toEqual(file.input?.map((i) => [i.name, i.data_type, i.dims]));
      expect(config.output?.map((o) => [o.name, o.data_type, o.dims])).toEqual(file.output?.map((o) => [o.name, o.data_type, o.dims]));
      expect(config.model_transaction_policy?.decoupled ?? false).toBe(file.model_transaction_policy?.decoupled ?? false);
    }
  });
});

describe('loading with a config and files', () => {
  it('loads a model from memory that is not in the repository', async () => {
    const model = await server.loadModel('memory_identity', {
      config: identityConfig('memory_identity', 'TYPE_INT32'),
      files: { '1/README.txt': 'identity models need only a version directory' },
    });
    expect(await model.ready()).toBe(true);
    const metadata = await model.metadata();
    expect(metadata.inputs).toEqual([{ name: 'INPUT0', datatype: 'INT32', shape: [-1, -1] }]);
    const response = await model.infer({ inputs: { INPUT0: { shape: [2, 2], data: new Int32Array([1, 2, 3, 4]) } } });
    expect(Array.from(response.outputs.OUTPUT0!.data as Int32Array)).toEqual([1, 2, 3, 4]);
    await server.unloadModel('memory_identity');
  });

  it('serves a model whose name is long and not ASCII, request after request', async () => {
    // 59 bytes of UTF-8, two per 'ü': held by the addon once and shared by
    // every request (lib/native.ts NativeName).
    const name = `identity_${'ü'.repeat(25)}`;
    const model = await server.loadModel(name, {
      config: identityConfig(name, 'TYPE_INT32'),
      files: { '1/README.txt': 'identity models need only a version directory' },
    });
    try {
      for (let round = 0; round < 3; round++) {
        const responses = await Promise.all(
          Array.from({ length: 8 }, (_, i) => model.infer({ inputs: { INPUT0: { shape: [1, 2], data: new Int32Array([round, i]) } } })),
        );
        responses.forEach((response, i) => {
          expect(response.model.name).toBe(name);
          expect(Array.from(response.outputs.OUTPUT0!.data as Int32Array)).toEqual([round, i]);
        });
      }
    } finally {
      await server.unloadModel(name);
    }
  });

  it('reloads a repository model with a changed config, and inference follows', async () => {
    const model = await server.loadModel('identity_fp32');
    expect((await model.metadata()).inputs[0]!.datatype).toBe('FP32');
    await model.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([1]) } } });
    try {
      await server.loadModel('identity_fp32', { config: identityConfig('identity_fp32', 'TYPE_FP64', 2) });
      const metadata = await model.metadata();
      expect(metadata.inputs).toEqual([{ name: 'INPUT0', datatype: 'FP64', shape: [-1, -1] }]);
      expect((await model.config()).max_batch_size).toBe(2);
      const response = await model.infer({ inputs: { INPUT0: { shape: [1, 2], data: new Float64Array([0.1, 0.2]) } } });
      expect(Array.from(response.outputs.OUTPUT0!.data as Float64Array)).toEqual([0.1, 0.2]);
      const batch = await rejection(model.infer({ inputs: { INPUT0: { shape: [3, 1], data: new Float64Array(3) } } }));
      expect(batch.message).toContain('max_batch_size 2');
      // Like Triton: a plain load of a model whose files did not change keeps the override.
      await server.loadModel('identity_fp32');
      expect((await model.metadata()).inputs[0]!.datatype).toBe('FP64');
    } finally {
      // Unloading, then loading, brings back the repository's config.
      await server.unloadModel('identity_fp32');
      await server.loadModel('identity_fp32');
    }
    expect((await model.metadata()).inputs[0]!.datatype).toBe('FP32');
    const back = await model.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([3]) } } });
    expect(Array.from(back.outputs.OUTPUT0!.data as Float32Array)).toEqual([3]);
  });

  it('rejects a config the schema can tell is wrong before sending it, naming the field', async () => {
    const error = await rejection(
      server.loadModel('identity_fp32', {
        config: { ...identityConfig('identity_fp32', 'TYPE_FP32', 0), dynamic_batching: {} } as ModelConfigInput,
      }),
    );
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain('dynamic_batching: not allowed when max_batch_size is 0');
    const dims = await rejection(
      server.loadModel('identity_fp32', {
        config: { ...identityConfig('identity_fp32', 'TYPE_FP32'), input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [0] }] } as ModelConfigInput,
      }),
    );
    expect(dims.message).toContain('input[0].dims[0]: must be a positive integer or -1');
    const name = await rejection(server.loadModel('identity_fp32', { config: identityConfig('other_name', 'TYPE_FP32') }));
    expect(name.message).toContain("does not match the model name 'identity_fp32'");
    const files = await rejection(server.loadModel('identity_fp32', { files: { '1/x': 'y' } }));
    expect(files.message).toContain('needs a config');
    const escape = await rejection(
      server.loadModel('identity_fp32', { config: identityConfig('identity_fp32', 'TYPE_FP32'), files: { '../x': 'y' } }),
    );
    expect(escape.message).toContain('must be relative');
    // Still the repository's model, untouched.
    expect((await server.model('identity_fp32').metadata()).inputs[0]!.datatype).toBe('FP32');
  });

  it('passes on the error of a config Triton itself refuses', async () => {
    const error = await rejection(
      server.loadModel('no_such_backend', {
        config: { ...identityConfig('no_such_backend', 'TYPE_FP32'), backend: 'no_such_backend_anywhere' },
        files: { '1/README.txt': 'x' },
      }),
    );
    // Triton's own code and message: the version failed to load.
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain("load failed for model 'no_such_backend'");
    expect(error.message).toContain("unable to find backend library for backend 'no_such_backend_anywhere'");
    expect(await server.model('no_such_backend').ready()).toBe(false);
  });
});

describe('writeModelRepository', () => {
  it('writes a repository a server loads and serves', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tritonserver-node-written-'));
    try {
      await writeModelRepository(dir, {
        written_identity: { config: identityConfig('written_identity', 'TYPE_UINT8', 8) },
      });
      const text = await readFile(join(dir, 'written_identity', 'config.pbtxt'), 'utf8');
      expect(parseModelConfig(text).input?.[0]?.data_type).toBe('TYPE_UINT8');
      const written = await Server.start({ modelRepository: dir, modelControlMode: 'poll', ...QUIET });
      try {
        const response = await written.model('written_identity').infer({
          inputs: { INPUT0: { shape: [1, 3], data: new Uint8Array([7, 8, 9]) } },
        });
        expect(Array.from(response.outputs.OUTPUT0!.data as Uint8Array)).toEqual([7, 8, 9]);
      } finally {
        await written.stop();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
