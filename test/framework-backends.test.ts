// Real models on Triton's framework backends: the Flask-to-Triton article's
// ResNet-50 (and MobileNetV2) on the ONNX Runtime and PyTorch backends,
// in-process. Needs real Triton with those backends beside its library
// (docs/development.md says how to build them); the models come from
// examples/resnet50/make_models.py (Debian's torch), made here when missing.
// Elsewhere, the test core included, each block says why it skips.
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Server,
  TritonError,
  onnxRuntimeParameters,
  pytorchParameters,
  readOnnxRuntimeParameters,
  readPyTorchParameters,
  type ModelConfigInput,
} from '../lib/index.js';
import { backendDirectoryBeside, cacheDirectoryBeside } from '../lib/server.js';
import { loadOnnxRuntimeNode } from '../bench/onnxruntime-node.js';
import { QUIET, REPO_ROOT, rejection } from './helpers.js';

const LIBRARY = resolve(process.env.TRITONSERVER_LIBRARY!);
const BACKENDS = backendDirectoryBeside(LIBRARY);
const CACHES = cacheDirectoryBeside(LIBRARY);
const MODELS = process.env.FRAMEWORK_MODELS ?? join(REPO_ROOT, 'examples/resnet50/model_repository');
const REFERENCE = join(MODELS, 'reference');
const PYTHON = '/usr/bin/python3';

/** Why a backend's tests cannot run here, or undefined when they can. */
function missing(backend: 'onnxruntime' | 'pytorch'): string | undefined {
  if (BACKENDS === undefined) return `no backends/ folder beside ${LIBRARY} (the test core has no framework backends)`;
  if (!existsSync(join(BACKENDS, backend, `libtriton_${backend}.so`))) return `no ${backend} backend in ${BACKENDS}`;
  if (existsSync(join(REFERENCE, 'reference.json'))) return undefined;
  const torch = spawnSync(PYTHON, ['-c', 'import torch, torchvision, PIL'], { encoding: 'utf8' });
  return torch.status === 0 ? undefined : `no models in ${MODELS} and no torch/torchvision/PIL in ${PYTHON} to make them`;
}
const NO_ONNXRUNTIME = missing('onnxruntime');
const NO_PYTORCH = missing('pytorch');
const skipped = (why: string | undefined): string => (why === undefined ? '' : ` (skipped: ${why})`);

interface Reference {
  images: Array<{ name: string; file: string; shape: number[] }>;
  models: Record<string, { output: string; top5: number[][] }>;
}
let reference: Reference;

function floats(file: string): Float32Array {
  const bytes = readFileSync(join(REFERENCE, file));
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

/** max |actual - expected| over the largest |expected|: the error relative to the output's scale. */
function relativeError(actual: Float32Array, expected: Float32Array): number {
  expect(actual.length).toBe(expected.length);
  let error = 0;
  let scale = 0;
  for (let i = 0; i < expected.length; i++) {
    error = Math.max(error, Math.abs(actual[i]! - expected[i]!));
    scale = Math.max(scale, Math.abs(expected[i]!));
  }
  return error / scale;
}

function top5(scores: Float32Array, row: number): number[] {
  const values = scores.subarray(row * 1000, (row + 1) * 1000);
  return [...values.keys()].sort((a, b) => values[b]! - values[a]! || a - b).slice(0, 5);
}

/** A model repository of its own for a test that changes it, holding copies of some generated models. */
function repositoryWith(models: Record<string, string>): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), 'tritonserver-node-frameworks-'));
  for (const [name, source] of Object.entries(models)) cpSync(join(MODELS, source), join(path, name), { recursive: true });
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

let server: Server;
const inputs = (): Float32Array => floats('inputs.f32'); // two preprocessed images, [2, 3, 224, 224]

beforeAll(() => {
  if (NO_ONNXRUNTIME !== undefined && NO_PYTORCH !== undefined) return;
  if (!existsSync(join(REFERENCE, 'reference.json'))) {
    const made = spawnSync(PYTHON, [join(REPO_ROOT, 'examples/resnet50/make_models.py'), '--out', MODELS], { stdio: 'inherit' });
    expect(made.status).toBe(0);
  }
  reference = JSON.parse(readFileSync(join(REFERENCE, 'reference.json'), 'utf8')) as Reference;
}, 600_000);

describe.skipIf(NO_ONNXRUNTIME !== undefined)(`ONNX Runtime backend${skipped(NO_ONNXRUNTIME)}`, () => {
  beforeAll(async () => {
    server = await Server.start({
      modelRepository: MODELS,
      modelControlMode: 'explicit',
      strictModelConfig: false,
      ...(CACHES === undefined ? {} : { cacheConfig: { local: { size: 64 * 1024 * 1024 } } }),
      ...QUIET,
    });
  }, 60_000);
  afterAll(async () => {
    if (server) expect((await server.stop()).complete).toBe(true);
  }, 60_000);

  it('serves ResNet-50 as torch computes it, with the config of the article (two CPU instances, batching, warmup)', async () => {
    const model = await server.loadModel('resnet50_onnx');
    const config = await model.config();
    expect(config).toMatchObject({
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      max_batch_size: 32,
      instance_group: [{ count: 2, kind: 'KIND_CPU' }],
      dynamic_batching: { preferred_batch_size: [8, 16, 32], max_queue_delay_microseconds: 500 },
      model_warmup: [{ name: 'orange', batch_size: 1 }],
    });
    const response = await model.infer({ inputs: { input__0: { shape: [2, 3, 224, 224], data: inputs() } } });
    const output = response.outputs.output__0!;
    expect(output.shape).toEqual([2, 1000]);
    expect(relativeError(output.data as Float32Array, floats(reference.models.resnet50!.output))).toBeLessThan(1e-4);
  }, 120_000);

  it('completes a config from the .onnx file when strictModelConfig is false', async () => {
    const model = await server.loadModel('mobilenet_v2_onnx', {
      config: { name: 'mobilenet_v2_onnx', backend: 'onnxruntime', max_batch_size: 4 },
    });
    const config = await model.config();
    expect(config.input).toEqual([expect.objectContaining({ name: 'input__0', data_type: 'TYPE_FP32', dims: [3, 224, 224] })]);
    expect(config.output).toEqual([expect.objectContaining({ name: 'output__0', data_type: 'TYPE_FP32', dims: [1000] })]);
    expect(config.platform).toBe('onnxruntime_onnx');
    expect(config.default_model_filename).toBe('model.onnx');
    // No scheduler given and max_batch_size > 1: Triton picks the dynamic batcher.
    expect(config.dynamic_batching).toBeDefined();
    const response = await model.infer({ inputs: { input__0: { shape: [2, 3, 224, 224], data: inputs() } } });
    expect(relativeError(response.outputs.output__0!.data as Float32Array, floats(reference.models.mobilenet_v2!.output))).toBeLessThan(1e-4);
  }, 120_000);

  it('passes typed backend parameters to ONNX Runtime and refuses bad ones before Triton', async () => {
    const parameters = { intraOpThreadCount: 1, interOpThreadCount: 1, executionMode: 'sequential', enableMemArena: false } as const;
    const base: ModelConfigInput = { name: 'mobilenet_v2_onnx', backend: 'onnxruntime', max_batch_size: 4 };
    const model = await server.loadModel('mobilenet_v2_onnx', { config: { ...base, parameters: onnxRuntimeParameters(parameters) } });
    expect(readOnnxRuntimeParameters(await model.config())).toEqual(parameters);
    const response = await model.infer({ inputs: { input__0: { shape: [1, 3, 224, 224], data: inputs().subarray(0, 3 * 224 * 224) } } });
    expect(top5(response.outputs.output__0!.data as Float32Array, 0)).toEqual(reference.models.mobilenet_v2!.top5[0]);

    const error = await rejection(
      server.loadModel('mobilenet_v2_onnx', { config: { ...base, parameters: { execution_mode: { string_value: '2' } } } }),
    );
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain('parameters["execution_mode"]: must be 0 (sequential) or 1 (parallel) (got "2")');
  }, 120_000);

  it("reports Triton's own refusal of a bad parameter in config.pbtxt, and a warmup file that is missing", async () => {
    const repo = repositoryWith({ bad_mode: 'mobilenet_v2_onnx', bad_warmup: 'mobilenet_v2_onnx' });
    const own = await Server.start({ modelRepository: repo.path, modelControlMode: 'explicit', ...QUIET });
    try {
      const text = readFileSync(join(repo.path, 'bad_mode', 'config.pbtxt'), 'utf8').replace(/mobilenet_v2_onnx/g, 'bad_mode');
      writeFileSync(join(repo.path, 'bad_mode', 'config.pbtxt'), `${text}parameters { key: "execution_mode" value { string_value: "2" } }\n`);
      const mode = await rejection(own.loadModel('bad_mode'));
      expect(mode.message).toMatch(/execution_mode are 0 or 1 but got 2/);

      writeFileSync(
        join(repo.path, 'bad_warmup', 'config.pbtxt'),
        readFileSync(join(repo.path, 'bad_warmup', 'config.pbtxt'), 'utf8').replace(/mobilenet_v2_onnx/g, 'bad_warmup'),
      );
      rmSync(join(repo.path, 'bad_warmup', 'warmup'), { recursive: true });
      const warmup = await rejection(own.loadModel('bad_warmup'));
      expect(warmup.message).toMatch(/warmup/i);
      expect(warmup.message).toContain('input__0');
    } finally {
      expect((await own.stop()).complete).toBe(true);
      repo.remove();
    }
  }, 120_000);

  it.skipIf(CACHES === undefined || !existsSync(join(CACHES ?? '', 'local')))(
    `answers a repeated request from the response cache${skipped(CACHES === undefined ? `no caches/ folder beside ${LIBRARY}` : undefined)}`,
    async () => {
      const model = await server.loadModel('resnet50_onnx');
      const before = (await model.statistics())[0]!.inference_stats;
      const image = inputs().subarray(3 * 224 * 224);
      const first = await model.infer({ inputs: { input__0: { shape: [1, 3, 224, 224], data: image } } });
      const second = await model.infer({ inputs: { input__0: { shape: [1, 3, 224, 224], data: image } } });
      expect(second.outputs.output__0!.data).toEqual(first.outputs.output__0!.data);
      const after = (await model.statistics())[0]!.inference_stats;
      expect(after.cache_miss.count - before.cache_miss.count).toBe(1);
      expect(after.cache_hit.count - before.cache_hit.count).toBe(1);
    },
    120_000,
  );

  it('runs requests on both instances at once and counts them in the metrics the Grafana panels read', async () => {
    const model = await server.loadModel('mobilenet_v2_onnx'); // the repository's config: two instances
    const row = (i: number): Float32Array => inputs().subarray((i % 2) * 3 * 224 * 224, ((i % 2) + 1) * 3 * 224 * 224);
    const responses = await Promise.all(
      Array.from({ length: 8 }, (_, i) => model.infer({ inputs: { input__0: { shape: [1, 3, 224, 224], data: row(i) } } })),
    );
    responses.forEach((response, i) => {
      expect(top5(response.outputs.output__0!.data as Float32Array, 0)).toEqual(reference.models.mobilenet_v2!.top5[i % 2]);
    });
    const samples = await server.metricsSamples();
    const value = (name: string): number =>
      samples.filter((s) => s.name === name && s.labels.model === 'mobilenet_v2_onnx').reduce((sum, s) => sum + s.value, 0);
    expect(value('nv_inference_request_success')).toBeGreaterThanOrEqual(8);
    expect(value('nv_inference_queue_duration_us')).toBeGreaterThan(0);
    expect(value('nv_inference_compute_input_duration_us')).toBeGreaterThan(0);
    expect(value('nv_inference_compute_infer_duration_us')).toBeGreaterThan(0);
  }, 120_000);

  it('reloads to version 2 while serving, as the article does with curl', async () => {
    const repo = repositoryWith({ classifier: 'mobilenet_v2_onnx' });
    const own = await Server.start({ modelRepository: repo.path, modelControlMode: 'explicit', ...QUIET });
    try {
      const replace = (text: string): string => text.replace(/mobilenet_v2_onnx/g, 'classifier');
      writeFileSync(join(repo.path, 'classifier', 'config.pbtxt'), replace(readFileSync(join(repo.path, 'classifier', 'config.pbtxt'), 'utf8')));
      const model = await own.loadModel('classifier');
      const image = { input__0: { shape: [1, 3, 224, 224], data: inputs().subarray(0, 3 * 224 * 224) } };
      expect(top5((await model.infer({ inputs: image })).outputs.output__0!.data as Float32Array, 0)).toEqual(
        reference.models.mobilenet_v2!.top5[0],
      );
      // Version 2 is ResNet-50: same input and output, other scores.
      cpSync(join(MODELS, 'resnet50_onnx', '1'), join(repo.path, 'classifier', '2'), { recursive: true });
      const during = model.infer({ inputs: image });
      await own.loadModel('classifier');
      expect(top5((await during).outputs.output__0!.data as Float32Array, 0)).toEqual(reference.models.mobilenet_v2!.top5[0]);
      const after = await model.infer({ inputs: image });
      expect(after.model.version).toBe(2);
      expect(top5(after.outputs.output__0!.data as Float32Array, 0)).toEqual(reference.models.resnet50!.top5[0]);
    } finally {
      expect((await own.stop()).complete).toBe(true);
      repo.remove();
    }
  }, 180_000);

  it("equals onnxruntime-node's session.run on the same file", async (context) => {
    const ort = loadOnnxRuntimeNode();
    if (ort === undefined) {
      context.skip('onnxruntime-node is not installed (npm run bench:models installs it)');
      return;
    }
    const session = await ort.InferenceSession.create(join(MODELS, 'resnet50_onnx', '1', 'model.onnx'));
    try {
      const direct = (await session.run({ input__0: new ort.Tensor('float32', inputs(), [2, 3, 224, 224]) })).output__0!;
      const model = server.model('resnet50_onnx');
      const served = await model.infer({ inputs: { input__0: { shape: [2, 3, 224, 224], data: inputs() } } });
      // The same ONNX Runtime library and file: the same numbers.
      expect(relativeError(served.outputs.output__0!.data as Float32Array, direct.data)).toBeLessThan(1e-6);
    } finally {
      await session.release();
    }
  }, 120_000);
});

describe.skipIf(NO_PYTORCH !== undefined)(`PyTorch backend${skipped(NO_PYTORCH)}`, () => {
  let torchServer: Server;
  beforeAll(async () => {
    torchServer = await Server.start({ modelRepository: MODELS, modelControlMode: 'explicit', strictModelConfig: false, ...QUIET });
  }, 60_000);
  afterAll(async () => {
    if (torchServer) expect((await torchServer.stop()).complete).toBe(true);
  }, 60_000);

  it("serves the article's resnet50 (TorchScript) as torch computes it", async () => {
    const model = await torchServer.loadModel('resnet50');
    expect(await model.config()).toMatchObject({ platform: 'pytorch_libtorch', backend: 'pytorch', instance_group: [{ count: 2 }] });
    const response = await model.infer({ inputs: { input__0: { shape: [2, 3, 224, 224], data: inputs() } } });
    expect(relativeError(response.outputs.output__0!.data as Float32Array, floats(reference.models.resnet50!.output))).toBeLessThan(1e-4);
  }, 180_000);

  it('passes typed backend parameters to LibTorch', async () => {
    const parameters = { intraOpThreadCount: 1, interOpThreadCount: 1, inferenceMode: true, disableOptimizedExecution: true } as const;
    const text = readFileSync(join(MODELS, 'mobilenet_v2', 'config.pbtxt'), 'utf8');
    expect(text).toContain('input__0');
    const model = await torchServer.loadModel('mobilenet_v2', {
      config: {
        name: 'mobilenet_v2',
        platform: 'pytorch_libtorch',
        max_batch_size: 4,
        input: [{ name: 'input__0', data_type: 'TYPE_FP32', dims: [3, 224, 224] }],
        output: [{ name: 'output__0', data_type: 'TYPE_FP32', dims: [1000] }],
        parameters: pytorchParameters(parameters),
      },
    });
    expect(readPyTorchParameters(await model.config())).toEqual(parameters);
    const response = await model.infer({ inputs: { input__0: { shape: [2, 3, 224, 224], data: inputs() } } });
    expect(relativeError(response.outputs.output__0!.data as Float32Array, floats(reference.models.mobilenet_v2!.output))).toBeLessThan(1e-4);
  }, 180_000);

  it('needs inputs and outputs in the config: TorchScript files do not name them, so nothing is completed', async () => {
    // A model of its own: a failed reload of a loaded model would keep Triton's stop
    // from finishing (TRITON_FACTS.md), and this load fails.
    const repo = repositoryWith({ bare: 'mobilenet_v2' });
    const own = await Server.start({ modelRepository: repo.path, modelControlMode: 'explicit', strictModelConfig: false, ...QUIET });
    try {
      const error = await rejection(own.loadModel('bare', { config: { name: 'bare', platform: 'pytorch_libtorch', max_batch_size: 4 } }));
      expect(error).toBeInstanceOf(TritonError);
      expect(error.message).toMatch(/configuration expects 0 inputs, model provides 1/);
    } finally {
      expect((await own.stop()).complete).toBe(true);
      repo.remove();
    }
  }, 120_000);
});

describe.skipIf(NO_ONNXRUNTIME !== undefined || NO_PYTORCH !== undefined)(
  `the article's pipeline ensemble${skipped(NO_ONNXRUNTIME ?? NO_PYTORCH)}`,
  () => {
    let pipelineServer: Server;
    beforeAll(async () => {
      pipelineServer = await Server.start({ modelRepository: MODELS, modelControlMode: 'explicit', ...QUIET });
    }, 60_000);
    afterAll(async () => {
      if (pipelineServer) expect((await pipelineServer.stop()).complete).toBe(true);
    }, 60_000);

    it.each(['pipeline', 'pipeline_onnx'])('%s: raw_image in, the top-5 of the same steps in Python out', async (name) => {
      const pipeline = await pipelineServer.loadModel(name);
      for (const [i, image] of reference.images.entries()) {
        const pixels = new Uint8Array(readFileSync(join(REFERENCE, image.file)));
        const response = await pipeline.infer({ inputs: { raw_image: { shape: [1, ...image.shape], data: pixels } } });
        const scores = response.outputs.classification_result!.data as Float32Array;
        expect(top5(scores, 0)).toEqual(reference.models.resnet50!.top5[i]);
      }
    }, 300_000);

    it('examples/resnet50/service.ts (and flask_app.py where Flask is installed) answer the same top-5 over HTTP, and 400 for a body that is not an image', async () => {
      const labels = readFileSync(join(MODELS, 'resnet50_onnx', 'labels.txt'), 'utf8').trim().split('\n');
      const expected = reference.models.resnet50!.top5[0]!.map((i) => labels[i]);
      const image = readFileSync(join(REPO_ROOT, 'examples/images/orange.jpg'));
      const engines = ['triton-onnx', 'triton-pytorch', ...(loadOnnxRuntimeNode() ? ['onnxruntime-node'] : [])];
      const flask = spawnSync(PYTHON, ['-c', 'import flask, torch, PIL']).status === 0;
      const targets = [
        ...engines.map((engine) => ({
          name: engine,
          command: process.execPath,
          args: ['--import', 'tsx', join(REPO_ROOT, 'examples/resnet50/service.ts')],
          env: { ENGINE: engine, PORT: '0' },
          ready: /listening on (http:\/\/\S+)/,
        })),
        ...(flask
          ? [{ name: 'flask', command: PYTHON, args: [join(REPO_ROOT, 'examples/resnet50/flask_app.py')], env: { PORT: '5713' }, ready: /Running on (http:\/\/127\.0\.0\.1:\d+)/ }]
          : []),
      ];
      for (const target of targets) {
        const child = spawn(target.command, target.args, { env: { ...process.env, ...target.env, MODEL_REPOSITORY: MODELS }, stdio: ['ignore', 'pipe', 'pipe'] });
        try {
          const url = await new Promise<string>((resolveUrl, reject) => {
            let output = '';
            const onData = (chunk: Buffer): void => {
              output += chunk.toString();
              const match = target.ready.exec(output);
              if (match) resolveUrl(match[1]!);
            };
            child.stdout.on('data', onData);
            child.stderr.on('data', onData);
            child.once('exit', (code) => reject(new Error(`${target.name} exited (${code}): ${output}`)));
          });
          const answer = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'image/jpeg' }, body: image });
          expect(answer.status).toBe(200);
          const { top5: got } = (await answer.json()) as { top5: Array<{ label: string }> };
          expect([target.name, got.map((entry) => entry.label)]).toEqual([target.name, expected]);
          const bad = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'image/jpeg' }, body: 'not an image' });
          expect([target.name, bad.status]).toEqual([target.name, 400]);
        } finally {
          const exited = new Promise((done) => child.once('exit', done));
          child.kill('SIGTERM');
          await exited;
        }
      }
    }, 300_000);

    it('examples/resnet50/classify.ts prints the top-5 labels of the same steps in Python', async () => {
      const labels = readFileSync(join(MODELS, 'resnet50_onnx', 'labels.txt'), 'utf8').trim().split('\n');
      const expected = reference.models.resnet50!.top5[0]!.map((i) => labels[i]);
      for (const flag of [[], ['--pytorch']]) {
        const run = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'examples/resnet50/classify.ts'), ...flag], {
          cwd: REPO_ROOT,
          encoding: 'utf8',
          env: { ...process.env, MODEL_REPOSITORY: MODELS },
          timeout: 120_000,
        });
        expect(run.status).toBe(0);
        const lines = run.stdout.trim().split('\n');
        expect(lines[0]).toContain(`orange.jpg (200x150) through ${flag.length ? 'pipeline' : 'pipeline_onnx'}`);
        expect(lines.slice(1).map((line) => line.trim().split(/ {2}/)[1])).toEqual(expected);
      }
    }, 300_000);
  },
);
