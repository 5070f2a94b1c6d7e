/**
 * Hostile arguments: every public function and method, given arguments of
 * the wrong kind, ends in a TritonError within a second — never a crash, a
 * hang, or another kind of error — and the server serves afterwards with
 * nothing left live.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Server,
  Tensor,
  TritonError,
  apiVersion,
  bfloat16BitsToFloat32,
  checkModelConfig,
  decodeBytes,
  encodeBytes,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  formatModelConfig,
  librarySearchPaths,
  liveObjects,
  parseModelConfig,
  parseModelConfigJson,
  parseServerOptions,
  validateModelConfig,
  writeModelRepository,
  type InferenceRequest,
  type ServerOptions,
} from '../lib/index.js';
import { MODELS, QUIET, collectGarbage, rejection, startServer } from './helpers.js';

let server: Server;
let scratch: string;

beforeAll(async () => {
  server = await startServer({ startupModels: ['identity_fp32', 'add_sub', 'repeat_int32'] });
  scratch = await mkdtemp(join(tmpdir(), 'tritonserver-node-args-'));
});

afterAll(async () => {
  await server.stop();
  await rm(scratch, { recursive: true, force: true });
});

// Values that are wrong almost everywhere.
const detached = (() => {
  const view = new Float32Array(2);
  structuredClone(view.buffer, { transfer: [view.buffer] });
  return view;
})();
const posingSignal = { aborted: false, addEventListener() {}, removeEventListener() {} };
const posingTensor = { datatype: 'FP32', shape: [1], data: { length: 1, 0: 1 } };
const good = (): InferenceRequest => ({ inputs: { INPUT0: { shape: [1, 2], data: new Float32Array([1, 2]) } } });

/** Calls that run against the shared server; `any` where the argument is deliberately wrong. */
type Row = [label: string, call: () => unknown];

/* eslint-disable @typescript-eslint/no-explicit-any */
const bad = (value: unknown): any => value;

function rows(): Row[] {
  const model = server.model('identity_fp32');
  const stream = (request: unknown) => async () => {
    for await (const response of server.model('repeat_int32').stream(bad(request))) void response;
  };
  const table: Row[] = [
    // Server.start and options
    ['Server.start(undefined)', () => Server.start(bad(undefined))],
    ['Server.start(null)', () => Server.start(bad(null))],
    ['Server.start("path")', () => Server.start(bad(MODELS))],
    ['Server.start({ unknown option })', () => Server.start(bad({ modelRepository: MODELS, modelControllMode: 'explicit' }))],
    ['Server.start({ exitTimeoutSeconds: NaN })', () => Server.start({ modelRepository: MODELS, exitTimeoutSeconds: NaN })],
    ['Server.start({ exitTimeoutSeconds: 1.5 })', () => Server.start({ modelRepository: MODELS, exitTimeoutSeconds: 1.5 })],
    ['Server.start({ modelRepository: 42 })', () => Server.start(bad({ modelRepository: 42 }))],
    ['parseServerOptions([])', () => parseServerOptions([])],
    // server methods
    ['server.model(undefined)', () => server.model(bad(undefined))],
    ['server.model("")', () => server.model('')],
    ['server.model("a\\0b")', () => server.model('identity_fp32\u0000x')],
    ['server.model(name, 1.5)', () => server.model('identity_fp32', 1.5)],
    ['server.model(name, NaN)', () => server.model('identity_fp32', NaN)],
    ['server.model(name, -2)', () => server.model('identity_fp32', -2)],
    ['server.model(name, "1")', () => server.model('identity_fp32', bad('1'))],
    ['server.loadModel(null)', () => server.loadModel(bad(null))],
    ['server.loadModel(name\\0)', () => server.loadModel('identity_fp32\u0000x')],
    ['server.loadModel(name, "x")', () => server.loadModel('identity_fp32', bad('x'))],
    ['server.loadModel(name, { unknown })', () => server.loadModel('identity_fp32', bad({ confg: {} }))],
    ['server.loadModel(name, { config: "x" })', () => server.loadModel('identity_fp32', bad({ config: 'x' }))],
    ['server.loadModel(name, { files: 3 })', () => server.loadModel('identity_fp32', bad({ config: {}, files: 3 }))],
    [
      'server.loadModel(name, { files: { path: 42 } })',
      () =>
        server.loadModel('identity_fp32', {
          config: { backend: 'identity', max_batch_size: 0, input: [], output: [] },
          files: { '1/x': bad(42) },
        }),
    ],
    ['server.unloadModel(undefined)', () => server.unloadModel(bad(undefined))],
    ['server.unloadModel(name, { wait: "yes" })', () => server.unloadModel('identity_fp32', bad({ wait: 'yes' }))],
    ['server.unloadModel(name, [])', () => server.unloadModel('identity_fp32', bad([]))],
    ['server.unloadModel(name, { timeoutMs: -1 })', () => server.unloadModel('identity_fp32', { timeoutMs: -1 })],
    ['outputs: { OUTPUT0: { data: 5 } }', () => model.infer(bad({ ...good(), outputs: { OUTPUT0: { data: 5 } } }))],
    ['outputs: { OUTPUT0: 5 }', () => model.infer(bad({ ...good(), outputs: { OUTPUT0: 5 } }))],
    ['server.modelIndex("x")', () => server.modelIndex(bad('x'))],
    ['server.modelIndex({ readyOnly: 1 })', () => server.modelIndex(bad({ readyOnly: 1 }))],
    ['server.registerModelRepository(5)', () => server.registerModelRepository(bad(5))],
    ['server.registerModelRepository(path, { a: 1 })', () => server.registerModelRepository(scratch, bad({ a: 1 }))],
    ['server.registerModelRepository(path\\0)', () => server.registerModelRepository(`${scratch}\u0000`)],
    ['server.unregisterModelRepository(null)', () => server.unregisterModelRepository(bad(null))],
    ['server.infer(name, undefined)', () => server.infer('identity_fp32', bad(undefined))],
    ['server.infer(undefined, request)', () => server.infer(bad(undefined), good())],
    ['server.stop("now")', () => server.stop(bad('now'))],
    ['server.stop({ timeoutMs: -1 })', () => server.stop({ timeoutMs: -1 })],
    ['server.stop({ timeoutMs: NaN })', () => server.stop({ timeoutMs: NaN })],
    ['server.stop({ timeout: 1 })', () => server.stop(bad({ timeout: 1 }))],
    // model.infer: the request
    ['model.infer(undefined)', () => model.infer(bad(undefined))],
    ['model.infer(null)', () => model.infer(bad(null))],
    ['model.infer("x")', () => model.infer(bad('x'))],
    ['model.infer({})', () => model.infer(bad({}))],
    ['model.infer({ inputs: [] })', () => model.infer(bad({ inputs: [] }))],
    ['model.infer({ unknown field })', () => model.infer(bad({ ...good(), timeout: 5 }))],
    ['signal: {}', () => model.infer(bad({ ...good(), signal: {} }))],
    ['signal: posing object', () => model.infer(bad({ ...good(), signal: posingSignal }))],
    ['timeoutMs: NaN', () => model.infer({ ...good(), timeoutMs: NaN })],
    ['timeoutMs: -5', () => model.infer({ ...good(), timeoutMs: -5 })],
    ['timeoutMs: Infinity', () => model.infer({ ...good(), timeoutMs: Infinity })],
    ['timeoutMs: 2^40', () => model.infer({ ...good(), timeoutMs: 2 ** 40 })],
    ['priority: 1.5', () => model.infer({ ...good(), priority: 1.5 })],
    ['priority: -1', () => model.infer({ ...good(), priority: -1 })],
    ['priority: "1"', () => model.infer(bad({ ...good(), priority: '1' }))],
    ['id: 42', () => model.infer(bad({ ...good(), id: 42 }))],
    ['id with NUL', () => model.infer({ ...good(), id: 'a\u0000b' })],
    ['outputs: "OUTPUT0"', () => model.infer(bad({ ...good(), outputs: 'OUTPUT0' }))],
    ['outputs: [1]', () => model.infer(bad({ ...good(), outputs: [1] }))],
    ['outputs: unknown name', () => model.infer({ ...good(), outputs: ['NOPE'] })],
    ['parameters: []', () => model.infer(bad({ ...good(), parameters: [] }))],
    ['parameters: { x: {} }', () => model.infer(bad({ ...good(), parameters: { x: {} } }))],
    ['parameters: { x: NaN }', () => model.infer({ ...good(), parameters: { x: NaN } })],
    ['parameters: { x: 1n }', () => model.infer(bad({ ...good(), parameters: { x: 1n } }))],
    ['parameters: key with NUL', () => model.infer({ ...good(), parameters: { 'a\u0000': 1 } })],
    ['sequence: 5', () => model.infer(bad({ ...good(), sequence: 5 }))],
    ['sequence.id: -1', () => model.infer({ ...good(), sequence: { id: -1 } })],
    ['sequence.id: 1.5', () => model.infer({ ...good(), sequence: { id: 1.5 } })],
    ['sequence.id: 2^64 (bigint)', () => model.infer({ ...good(), sequence: { id: 2n ** 64n } })],
    ['sequence.id: ""', () => model.infer({ ...good(), sequence: { id: '' } })],
    ['sequence.start: "yes"', () => model.infer(bad({ ...good(), sequence: { id: 1, start: 'yes' } }))],
    ['modelVersion: 1.5', () => model.infer({ ...good(), modelVersion: 1.5 })],
    // model.infer: the inputs
    ['input: undefined', () => model.infer(bad({ inputs: { INPUT0: undefined } }))],
    ['input: null', () => model.infer(bad({ inputs: { INPUT0: null } }))],
    ['input: a number', () => model.infer(bad({ inputs: { INPUT0: 3 } }))],
    ['input: a string', () => model.infer(bad({ inputs: { INPUT0: 'abc' } }))],
    ['input: posing tensor', () => model.infer(bad({ inputs: { INPUT0: posingTensor } }))],
    ['input: ArrayBuffer', () => model.infer(bad({ inputs: { INPUT0: new ArrayBuffer(8) } }))],
    ['input: posing Float32Array', () => model.infer(bad({ inputs: { INPUT0: { constructor: Float32Array, length: 2 } } }))],
    ['input: { data: posing Float32Array }', () => model.infer(bad({ inputs: { INPUT0: { shape: [1, 2], data: { constructor: Float32Array, length: 2 } } } }))],
    ['input: DataView', () => model.infer(bad({ inputs: { INPUT0: { shape: [1, 2], data: new DataView(new ArrayBuffer(8)) } } }))],
    ['input: detached buffer', () => model.infer({ inputs: { INPUT0: { shape: [1, 2], data: detached } } })],
    ['input: shape NaN', () => model.infer({ inputs: { INPUT0: { shape: [1, NaN], data: new Float32Array(1) } } })],
    ['input: shape 1.5', () => model.infer({ inputs: { INPUT0: { shape: [1, 1.5], data: new Float32Array(1) } } })],
    ['input: shape -1', () => model.infer({ inputs: { INPUT0: { shape: [1, -1], data: new Float32Array(1) } } })],
    ['input: huge shape', () => model.infer({ inputs: { INPUT0: { shape: [1, 2 ** 52], data: new Float32Array(1) } } })],
    ['input: overflowing shape', () => model.infer({ inputs: { INPUT0: { shape: [2 ** 40, 2 ** 40], data: new Float32Array(1) } } })],
    ['input: shape "1,2"', () => model.infer(bad({ inputs: { INPUT0: { shape: '1,2', data: new Float32Array(2) } } }))],
    ['input: wrong type', () => model.infer({ inputs: { INPUT0: { shape: [1, 2], data: new Int32Array(2) } } })],
    ['input: name with NUL', () => model.infer({ inputs: { 'INPUT0\u0000': new Float32Array(1) } })],
    ['input: datatype "fp32"', () => model.infer(bad({ inputs: { INPUT0: { datatype: 'fp32', shape: [1, 1], data: new Float32Array(1) } } }))],
    ['BYTES element 5', () => server.model('identity_fp32').infer(bad({ inputs: { INPUT0: [5, 'x'] } }))],
    // stream
    ['model.stream(undefined)', stream(undefined)],
    ['model.stream({ signal: {} })', stream({ inputs: { IN: new Int32Array([1]) }, signal: {} })],
    ['model.stream({ inputs: 5 })', stream({ inputs: 5 })],
    // functions of the package
    ['Tensor.from(undefined)', () => Tensor.from(bad(undefined))],
    ['Tensor.from({})', () => Tensor.from(bad({}))],
    ['Tensor.from(data, { shape: [NaN] })', () => Tensor.from(new Float32Array(1), { shape: [NaN] })],
    ['Tensor.from(data, { datatype: "X" })', () => Tensor.from(new Float32Array(1), bad({ datatype: 'X' }))],
    ['Tensor.from(detached)', () => Tensor.from(detached, { shape: [2] })],
    ['encodeBytes([1])', () => encodeBytes(bad([1]))],
    ['encodeBytes(null)', () => encodeBytes(bad(null))],
    ['decodeBytes("x")', () => decodeBytes(bad('x'))],
    ['decodeBytes(truncated)', () => decodeBytes(new Uint8Array([9, 0, 0, 0, 1]))],
    ['float32ToFloat16Bits("1")', () => float32ToFloat16Bits(bad('1'))],
    ['float16BitsToFloat32(1.5)', () => float16BitsToFloat32(1.5)],
    ['float16BitsToFloat32(70000)', () => float16BitsToFloat32(70_000)],
    ['float32ToBfloat16Bits(undefined)', () => float32ToBfloat16Bits(bad(undefined))],
    ['bfloat16BitsToFloat32(-1)', () => bfloat16BitsToFloat32(-1)],
    ['validateModelConfig(null)', () => validateModelConfig(null)],
    ['validateModelConfig("x")', () => validateModelConfig('x')],
    ['checkModelConfig(null)', () => checkModelConfig(bad(null))],
    ['parseModelConfigJson(5)', () => parseModelConfigJson(5)],
    ['parseModelConfig(5)', () => parseModelConfig(bad(5))],
    ['parseModelConfig("{")', () => parseModelConfig('name: {')],
    ['formatModelConfig(null)', () => formatModelConfig(bad(null))],
    ['writeModelRepository(5, {})', () => writeModelRepository(bad(5), {})],
    ['writeModelRepository(dir, null)', () => writeModelRepository(scratch, bad(null))],
    ['writeModelRepository(dir, { m: 5 })', () => writeModelRepository(scratch, bad({ m: 5 }))],
    ['apiVersion("x")', () => apiVersion(bad('x'))],
    ['apiVersion({ libraryPath: 5 })', () => apiVersion(bad({ libraryPath: 5 }))],
    ['librarySearchPaths(5)', () => librarySearchPaths(bad(5))],
  ];
  return table;
}
/* eslint-enable @typescript-eslint/no-explicit-any */

/** The call's outcome: its error, or 'resolved' / 'timed out'. */
async function outcome(call: () => unknown): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise((resolve) => {
    timer = setTimeout(() => resolve('timed out after 1 s'), 1000);
  });
  try {
    return await Promise.race([Promise.resolve().then(call).then(() => 'resolved'), limit]);
  } catch (error) {
    return error;
  } finally {
    clearTimeout(timer);
  }
}

describe('hostile arguments', () => {
  it('every row ends in a TritonError INVALID_ARG that names what was wrong', async () => {
    const wrong: string[] = [];
    for (const [label, call] of rows()) {
      const result = await outcome(call);
      if (!(result instanceof TritonError)) {
        wrong.push(`${label}: ${result instanceof Error ? `${result.name}: ${result.message}` : String(result)}`);
      } else if (result.code !== 'INVALID_ARG' || result.message.length < 10) {
        wrong.push(`${label}: ${result.code} ${result.message}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(server.stopped).toBe(false);
  });

  it('refuses an object posing as a TypedArray itself, before the addon sees it', async () => {
    const model = server.model('identity_fp32');
    const impostor = { constructor: Float32Array, length: 2 };
    const bare = await rejection(model.infer(bad({ inputs: { INPUT0: impostor } })));
    expect(bare.code).toBe('INVALID_ARG');
    expect(bare.message).toMatch(/^input 'INPUT0': expected a Tensor, a TypedArray/);
    const wrapped = await rejection(model.infer(bad({ inputs: { INPUT0: { shape: [1, 2], data: impostor } } })));
    expect(wrapped.code).toBe('INVALID_ARG');
    expect(wrapped.message).toMatch(/^input 'INPUT0': data must be a TypedArray or an array, got an object/);
  });

  it('leaves the server serving and nothing live', async () => {
    const response = await server.model('identity_fp32').infer(good());
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([1, 2]);
    await collectGarbage();
    expect(liveObjects()).toEqual({ requests: 0, responses: 0, outputBuffers: 0, inputReferences: 0, pending: 0 });
  });

  it('starts with the options every row refused', async () => {
    // A sanity check of the table's baseline: the same options, right, work.
    const fine: ServerOptions = { modelRepository: MODELS, modelControlMode: 'explicit', ...QUIET };
    const other = await Server.start(fine);
    await other.stop();
  });
});
