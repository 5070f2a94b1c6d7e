import { getEventListeners } from 'node:events';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Server, Tensor, liveObjects, type TritonError, type DataType, type InferenceRequest, type InferenceResponse } from '../lib/index.js';
import { collectGarbage, startServer, rejection } from './helpers.js';

let server: Server;

beforeAll(async () => {
  server = await startServer();
  await Promise.all(
    [
      'identity_fp32', 'identity_bool', 'identity_uint8', 'identity_uint16', 'identity_uint32', 'identity_uint64',
      'identity_int8', 'identity_int16', 'identity_int32', 'identity_int64', 'identity_fp16', 'identity_fp64',
      'identity_bf16', 'identity_bytes', 'add_sub', 'repeat_int32', 'repeat_backend', 'slow', 'fail', 'bytes_echo',
    ].map((name) => server.loadModel(name)),
  );
});

afterAll(async () => {
  await server?.stop();
});

function bits16(data: ArrayBufferView): number[] {
  return Array.from(new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2));
}

async function expectNothingLive(): Promise<void> {
  await vi.waitFor(async () => {
    await collectGarbage();
    expect(liveObjects()).toEqual({ requests: 0, responses: 0, outputBuffers: 0, inputReferences: 0, pending: 0 });
  });
}

describe('data types through identity models', () => {
  const cases: Array<[string, DataType, ArrayBufferView | boolean[], (out: Tensor) => unknown, unknown]> = [
    ['identity_bool', 'BOOL', [true, false, true], (t) => Array.from(t.data as Uint8Array), [1, 0, 1]],
    ['identity_uint8', 'UINT8', new Uint8Array([0, 7, 255]), (t) => Array.from(t.data as Uint8Array), [0, 7, 255]],
    ['identity_uint16', 'UINT16', new Uint16Array([0, 1, 65535]), (t) => Array.from(t.data as Uint16Array), [0, 1, 65535]],
    ['identity_uint32', 'UINT32', new Uint32Array([0, 1, 4294967295]), (t) => Array.from(t.data as Uint32Array), [0, 1, 4294967295]],
    ['identity_uint64', 'UINT64', new BigUint64Array([0n, 1n, 2n ** 64n - 1n]), (t) => Array.from(t.data as BigUint64Array), [0n, 1n, 2n ** 64n - 1n]],
    ['identity_int8', 'INT8', new Int8Array([-128, 0, 127]), (t) => Array.from(t.data as Int8Array), [-128, 0, 127]],
    ['identity_int16', 'INT16', new Int16Array([-32768, 0, 32767]), (t) => Array.from(t.data as Int16Array), [-32768, 0, 32767]],
    ['identity_int32', 'INT32', new Int32Array([-2147483648, 0, 2147483647]), (t) => Array.from(t.data as Int32Array), [-2147483648, 0, 2147483647]],
    ['identity_int64', 'INT64', new BigInt64Array([-(2n ** 63n), 0n, 2n ** 63n - 1n]), (t) => Array.from(t.data as BigInt64Array), [-(2n ** 63n), 0n, 2n ** 63n - 1n]],
    // FP16 bits: 1.0, 65504 (max), -0, +Inf, smallest subnormal
    ['identity_fp16', 'FP16', new Uint16Array([0x3c00, 0x7bff, 0x8000, 0x7c00, 0x0001]), (t) => bits16(t.data as ArrayBufferView), [0x3c00, 0x7bff, 0x8000, 0x7c00, 0x0001]],
    // BF16 bits: 1.0, -Inf, quiet NaN
    ['identity_bf16', 'BF16', new Uint16Array([0x3f80, 0xff80, 0x7fc0]), (t) => bits16(t.data as ArrayBufferView), [0x3f80, 0xff80, 0x7fc0]],
    ['identity_fp32', 'FP32', new Float32Array([1.5, -0, Infinity, NaN]), (t) => Array.from(t.data as Float32Array), [1.5, -0, Infinity, NaN]],
    ['identity_fp64', 'FP64', new Float64Array([Math.PI, Number.MAX_VALUE, -Number.MIN_VALUE]), (t) => Array.from(t.data as Float64Array), [Math.PI, Number.MAX_VALUE, -Number.MIN_VALUE]],
  ];

  for (const [model, datatype, data, read, expected] of cases) {
    it(`${datatype} round-trips with exact values`, async () => {
      const length = Array.isArray(data) ? data.length : (data as unknown as { length: number }).length;
      const response = await server.model(model).infer({
        inputs: { INPUT0: { datatype, shape: [1, length], data: data as Uint8Array } },
      });
      const output = response.outputs.OUTPUT0!;
      expect(output.name).toBe('OUTPUT0');
      expect(output.datatype).toBe(datatype);
      expect(output.shape).toEqual([1, length]);
      expect(read(output)).toEqual(expected);
      expect(response.model).toEqual({ name: model, version: 1 });
      expect(response.final).toBe(true);
    });
  }

  it('BYTES round-trips empty strings, multi-byte UTF-8 and binary bytes', async () => {
    const binary = new Uint8Array([0, 255, 0, 1, 128]);
    const response = await server.model('identity_bytes').infer({
      inputs: { INPUT0: { shape: [1, 4], data: ['', 'héllo wörld ✓ 日本 🎉', binary, 'x'] } },
    });
    const output = response.outputs.OUTPUT0!;
    expect(output.datatype).toBe('BYTES');
    expect(output.shape).toEqual([1, 4]);
    const elements = output.data as Uint8Array[];
    expect(elements.map((e) => e.length)).toEqual([0, Buffer.byteLength('héllo wörld ✓ 日本 🎉'), 5, 1]);
    expect(Array.from(elements[2]!)).toEqual([0, 255, 0, 1, 128]);
    expect(output.strings()).toEqual(['', 'héllo wörld ✓ 日本 🎉', new TextDecoder().decode(binary), 'x']);
  });

  it('passes a BYTES Tensor on in its wire form: its elements are never split into views', async () => {
    const first = await server.model('identity_bytes').infer({ inputs: { INPUT0: { shape: [1, 3], data: ['a', '', 'ccc'] } } });
    const tensor = first.outputs.OUTPUT0!;
    const split = vi.spyOn(Tensor.prototype, 'data', 'get');
    try {
      // An output fed to the next model, as a pipeline does: a view per element would cost an object each.
      const second = await server.model('identity_bytes').infer({ inputs: { INPUT0: tensor } });
      expect(split).not.toHaveBeenCalled();
      split.mockRestore();
      expect(second.outputs.OUTPUT0!.strings()).toEqual(['a', '', 'ccc']);
    } finally {
      split.mockRestore();
    }
  });

  it('bytes_echo takes a plain string array', async () => {
    const response = await server.model('bytes_echo').infer({ inputs: { INPUT0: ['a', 'bc', ''] } });
    expect(response.outputs.OUTPUT0!.strings()).toEqual(['a', 'bc', '']);
  });
});

describe('inference', () => {
  it('computes add_sub', async () => {
    const response = await server.infer('add_sub', {
      inputs: {
        INPUT0: { shape: [4], data: new Float32Array([1, 2, 3, 4]) },
        INPUT1: new Float32Array([10, 20, 30, 40]),
      },
      id: 'req-7',
    });
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([11, 22, 33, 44]);
    expect(Array.from(response.outputs.OUTPUT1!.data as Float32Array)).toEqual([-9, -18, -27, -36]);
    expect(response.id).toBe('req-7');
  });

  it('delivers response parameters of each type (the identity backend sets one of each)', async () => {
    for (let round = 0; round < 3; round++) {
      const response = await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([round]) } } });
      expect(response.parameters).toEqual({ param0: 'an example string parameter', param1: 42, param2: false, param3: 123.123 });
      expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([round]);
    }
  });

  it('returns only the requested outputs', async () => {
    const response = await server.model('add_sub').infer({
      inputs: { INPUT0: new Float32Array([1, 1, 1, 1]), INPUT1: new Float32Array([2, 2, 2, 2]) },
      outputs: ['OUTPUT1'],
    });
    expect(Object.keys(response.outputs)).toEqual(['OUTPUT1']);
    expect(Array.from(response.outputs.OUTPUT1!.data as Float32Array)).toEqual([-1, -1, -1, -1]);
  });

  it('runs batched requests', async () => {
    const data = Float32Array.from({ length: 24 }, (_, i) => i);
    const response = await server.model('identity_fp32').infer({
      inputs: { INPUT0: Tensor.from(data, { shape: [8, 3] }) },
    });
    expect(response.outputs.OUTPUT0!.shape).toEqual([8, 3]);
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual(Array.from(data));
  });

  it('resolves 2,000 concurrent requests each with its own result', async () => {
    // In a function of its own: a suspended async frame keeps dead values
    // alive, and the outputs must be collectable for the count below.
    await (async () => {
      const model = server.model('identity_fp32');
      const results = await Promise.all(
        Array.from({ length: 2000 }, (_, i) =>
          model.infer({ inputs: { INPUT0: { shape: [1, 2], data: new Float32Array([i, -i]) } }, id: String(i) }),
        ),
      );
      results.forEach((response, i) => {
        expect(response.id).toBe(String(i));
        expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([i, -i]);
      });
    })();
    await expectNothingLive();
  });

  it('passes request parameters and sequence options', async () => {
    const response = await server.model('identity_fp32').infer({
      inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([3]) } },
      parameters: { text: 'x', count: 3, ratio: 0.5, flag: true },
      priority: 0,
    });
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([3]);
  });

  it('a string sequence id: refused past 128 bytes by Triton, and by the identity backend, which reads ids as numbers', async () => {
    const model = server.model('identity_fp32');
    const input = { INPUT0: { shape: [1, 1], data: new Float32Array([1]) } };
    const long = await rejection(model.infer({ inputs: input, sequence: { id: `${'ü'.repeat(64)}a` } }));
    expect(long.code).toBe('UNSUPPORTED');
    expect(long.message).toBe('string correlation ID cannot be longer than 128 characters');
    const [text, numbered] = await Promise.allSettled([
      model.infer({ id: 'r-1', inputs: input, sequence: { id: 'ü'.repeat(64) } }),
      model.infer({ inputs: input, sequence: { id: 7 } }),
    ]);
    expect(text.status).toBe('rejected');
    const refused = (text as PromiseRejectedResult).reason as TritonError;
    expect(refused.code).toBe('INVALID_ARG');
    expect(refused.message).toBe('[request id: r-1] correlation ID in request is not an unsigned int');
    expect(numbered.status).toBe('fulfilled');
  });

  it('arrives as TritonError with the code and message of the model', async () => {
    const error = await rejection(server.model('fail').infer({ inputs: { INPUT0: new Float32Array([1]) } }));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toContain('fail model always fails');
  });
});

describe('streaming', () => {
  it('yields one response per element of repeat_int32, in order', async () => {
    const values: number[] = [];
    for await (const response of server.model('repeat_int32').stream({ inputs: { IN: new Int32Array([5, 6, 7, 8]) } })) {
      expect(response.outputs.OUT!.shape).toEqual([1]);
      values.push((response.outputs.OUT!.data as Int32Array)[0]!);
    }
    expect(values).toEqual([5, 6, 7, 8]);
  });

  it('cancels when the loop is left early', async () => {
    const values = await (async () => {
      const seen: number[] = [];
      for await (const response of server.model('repeat_int32').stream({
        inputs: { IN: new Int32Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), DELAY_MS: new Uint32Array([20]) },
      })) {
        seen.push((response.outputs.OUT!.data as Int32Array)[0]!);
        if (seen.length === 2) break;
      }
      return seen;
    })();
    expect(values).toEqual([1, 2]);
    await expectNothingLive();
  });

  it('a loop left at its last response, with the bare FINAL already queued, leaves nothing pending', async () => {
    for (let round = 0; round < 5; round++) {
      const stream = server.model('repeat_int32').stream({ inputs: { IN: new Int32Array([1, 2, 3]) } })[Symbol.asyncIterator]();
      const first = await stream.next();
      expect(first.done).toBe(false);
      // Every response and the FINAL flag arrive meanwhile, unread.
      await new Promise((resolve) => setTimeout(resolve, 50));
      await stream.return!(undefined);
    }
    expect(liveObjects().pending).toBe(0);
    await expectNothingLive();
  });

  describe('the iterator', () => {
    const out = (result: IteratorResult<InferenceResponse>): number | 'done' =>
      result.done ? 'done' : (result.value.outputs.OUT!.data as Int32Array)[0]!;

    it('settles next() calls made without waiting in order, then done', async () => {
      const iterator = server.model('repeat_int32').stream({ inputs: { IN: new Int32Array([1, 2, 3]) } })[Symbol.asyncIterator]();
      const results = await Promise.all([iterator.next(), iterator.next(), iterator.next(), iterator.next(), iterator.next()]);
      expect(results.map(out)).toEqual([1, 2, 3, 'done', 'done']);
      expect((await iterator.next()).done).toBe(true);
      await expectNothingLive();
    });

    it('offers the caller only next(), return() and throw()', () => {
      const iterator = server.model('repeat_int32').stream({ inputs: { IN: new Int32Array([1]) } })[Symbol.asyncIterator]();
      expect(Object.keys(iterator)).toEqual([]);
      const methods = Object.getOwnPropertyNames(Object.getPrototypeOf(iterator)).filter((name) => name !== 'constructor');
      expect(methods.sort()).toEqual(['next', 'return', 'throw']);
    });

    it('starts nothing before the first next(), and nothing after return()', async () => {
      const before = (await server.model('repeat_int32').statistics())[0]!.inference_count;
      const iterator = server.model('repeat_int32').stream({ inputs: { IN: new Int32Array([1]) } })[Symbol.asyncIterator]();
      expect(await iterator.return!(undefined)).toEqual({ value: undefined, done: true });
      expect((await iterator.next()).done).toBe(true);
      expect((await server.model('repeat_int32').statistics())[0]!.inference_count).toBe(before);
      expect(liveObjects().pending).toBe(0);
    });

    it('return() while the request is starting cancels it and settles the waiting next() as done', async () => {
      const iterator = server.model('repeat_int32').stream({
        inputs: { IN: new Int32Array([1, 2, 3]), DELAY_MS: new Uint32Array([200]) },
      })[Symbol.asyncIterator]();
      const first = iterator.next();
      await iterator.return!(undefined);
      expect(await first).toEqual({ value: undefined, done: true });
      await vi.waitFor(() => expect(liveObjects().pending).toBe(0), { timeout: 5_000 });
      await expectNothingLive();
    });

    it('an abort while nobody waits fails the next next(), then the stream is done', async () => {
      const controller = new AbortController();
      const iterator = server.model('repeat_int32').stream({
        inputs: { IN: new Int32Array([1, 2, 3]), DELAY_MS: new Uint32Array([50]) },
        signal: controller.signal,
      })[Symbol.asyncIterator]();
      expect(out(await iterator.next())).toBe(1);
      controller.abort('enough');
      const error = await rejection(iterator.next());
      expect(error.code).toBe('CANCELLED');
      expect(error.cause).toBe('enough');
      expect((await iterator.next()).done).toBe(true);
      await expectNothingLive();
    });
  });

  describe('a C++ decoupled backend (repeat_backend)', () => {
    const repeat = (values: number[], delays: number[] = values.map(() => 0)): InferenceRequest => ({
      inputs: { IN: new Int32Array(values), DELAY: new Uint32Array(delays), WAIT: new Uint32Array([0]) },
    });

    it('yields OUT and IDX for each element, then ends at the bare FINAL flag', async () => {
      const seen: Array<[number, number, boolean]> = [];
      for await (const response of server.model('repeat_backend').stream(repeat([7, -3, 2147483647, 0]))) {
        expect(response.outputs.OUT!.datatype).toBe('INT32');
        expect(response.outputs.IDX!.datatype).toBe('UINT32');
        seen.push([(response.outputs.OUT!.data as Int32Array)[0]!, (response.outputs.IDX!.data as Uint32Array)[0]!, response.final]);
      }
      expect(seen).toEqual([
        [7, 0, false],
        [-3, 1, false],
        [2147483647, 2, false],
        [0, 3, false],
      ]);
      await expectNothingLive();
    });

    it('keeps 16 streams of 64 responses apart, each in order', async () => {
      const results = await Promise.all(
        Array.from({ length: 16 }, async (_, s) => {
          const values = Array.from({ length: 64 }, (_, i) => s * 1000 + i);
          const got: number[] = [];
          for await (const response of server.model('repeat_backend').stream(repeat(values))) {
            got.push((response.outputs.OUT!.data as Int32Array)[0]!);
          }
          return [values, got];
        }),
      );
      for (const [values, got] of results) expect(got).toEqual(values);
      await expectNothingLive();
    });

    it('a loop left early drops the responses the backend still sends (it ignores cancellation), leaving nothing live', async () => {
      const seen: number[] = [];
      for await (const response of server.model('repeat_backend').stream(repeat([1, 2, 3, 4, 5], [0, 0, 30, 30, 30]))) {
        seen.push((response.outputs.OUT!.data as Int32Array)[0]!);
        if (seen.length === 2) break;
      }
      expect(seen).toEqual([1, 2]);
      // Its thread keeps sending for ~90 ms; then FINAL, and nothing is left.
      await vi.waitFor(() => expect(liveObjects().pending).toBe(0), { timeout: 5_000 });
      await expectNothingLive();
    });

    it('stop() with streams in flight waits for the backend’s threads (it ignores cancellation): every stream ends complete', async () => {
      const own = await startServer();
      await own.loadModel('repeat_backend');
      const started: Array<Promise<void>> = [];
      const streams = Array.from({ length: 4 }, (_, s) => {
        let first!: () => void;
        started.push(new Promise<void>((resolve) => (first = resolve)));
        return (async () => {
          const got: number[] = [];
          for await (const response of own.model('repeat_backend').stream(repeat([s, 2, 3, 4], [0, 20, 20, 20]))) {
            got.push((response.outputs.OUT!.data as Int32Array)[0]!);
            first();
          }
          return got;
        })();
      });
      await Promise.all(started);
      await own.stop();
      expect(await Promise.all(streams)).toEqual([0, 1, 2, 3].map((s) => [s, 2, 3, 4]));
      await expectNothingLive();
    });

    it('ends without a response when IN is empty', async () => {
      const responses = [];
      for await (const response of server.model('repeat_backend').stream(repeat([]))) responses.push(response);
      expect(responses).toEqual([]);
    });

    it('fails the stream with the backend’s message when IN and DELAY differ in shape', async () => {
      const error = await rejection(
        (async () => {
          for await (const response of server.model('repeat_backend').stream(repeat([1, 2, 3], [0, 0]))) void response;
        })(),
      );
      expect(error.code).toBe('INVALID_ARG');
      expect(error.message).toContain('expected IN and DELAY shape to match, got [3] and [2]');
      await expectNothingLive();
    });

    it('refuses to load a configuration the backend does not take, with its reason', async () => {
      const config = await server.model('repeat_backend').config();
      // Unloaded first: a loaded model whose reload fails in this backend
      // leaves real Triton unable to finish stopping.
      await server.unloadModel('repeat_backend');
      const batched = await rejection(server.loadModel('repeat_backend', { config: { ...config, max_batch_size: 4 } }));
      expect(batched.code).toBe('INVALID_ARG');
      expect(batched.message).toContain('repeat backend only supports models with max_batch_size == 0');
      // Back to the repository's configuration.
      await server.loadModel('repeat_backend');
      const values: number[] = [];
      for await (const response of server.model('repeat_backend').stream(repeat([4, 5]))) values.push((response.outputs.OUT!.data as Int32Array)[0]!);
      expect(values).toEqual([4, 5]);
    });
  });

  it('yields exactly one response for a non-decoupled model', async () => {
    const responses = [];
    for await (const response of server.model('identity_int32').stream({
      inputs: { INPUT0: { shape: [1, 1], data: new Int32Array([9]) } },
    })) {
      responses.push(response);
    }
    expect(responses).toHaveLength(1);
    expect(responses[0]!.final).toBe(true);
  });

  it('infer() accepts a decoupled model that sends one response and refuses several', async () => {
    const one = await server.model('repeat_int32').infer({ inputs: { IN: new Int32Array([42]) } });
    expect(Array.from(one.outputs.OUT!.data as Int32Array)).toEqual([42]);
    const many = await rejection(server.model('repeat_int32').infer({ inputs: { IN: new Int32Array([1, 2]) } }));
    expect(many.code).toBe('UNSUPPORTED');
    expect(many.message).toContain('use model.stream()');
  });
});

describe('cancellation and timeouts', () => {
  const slow = (delayMs: number, extra: Partial<InferenceRequest> = {}): InferenceRequest => ({
    inputs: { INPUT0: new Float32Array([1, 2]), DELAY_MS: new Uint32Array([delayMs]) },
    ...extra,
  });

  it('rejects a request aborted before it starts', async () => {
    const controller = new AbortController();
    controller.abort(new Error('not wanted'));
    const error = await rejection(server.model('slow').infer(slow(10, { signal: controller.signal })));
    expect(error.code).toBe('CANCELLED');
    expect((error.cause as Error).message).toBe('not wanted');
  });

  it('cancels a request in flight', async () => {
    const controller = new AbortController();
    const pending = server.model('slow').infer(slow(10_000, { signal: controller.signal }));
    setTimeout(() => controller.abort('stop now'), 30);
    const error = await rejection(pending);
    expect(error.code).toBe('CANCELLED');
    expect(error.cause).toBe('stop now');
    await expectNothingLive();
  });

  it('cancels a stream in flight', async () => {
    const controller = new AbortController();
    const seen: number[] = [];
    const error = await rejection(
      (async () => {
        for await (const response of server.model('repeat_int32').stream({
          inputs: { IN: new Int32Array([1, 2, 3, 4, 5, 6]), DELAY_MS: new Uint32Array([30]) },
          signal: controller.signal,
        })) {
          seen.push((response.outputs.OUT!.data as Int32Array)[0]!);
          if (seen.length === 1) controller.abort();
        }
      })(),
    );
    expect(error.code).toBe('CANCELLED');
    expect(seen).toEqual([1]);
    await expectNothingLive();
  });

  it('times out', async () => {
    const error = await rejection(server.model('slow').infer(slow(10_000, { timeoutMs: 50 })));
    expect(error.code).toBe('CANCELLED');
    expect(error.message).toBe('the request timed out after 50 ms');
    await expectNothingLive();
  });

  it('many requests share one signal: one listener on it, every one cancelled by its abort, none left listening', async () => {
    const controller = new AbortController();
    const signal = controller.signal;
    // Requests that finish leave the signal as they found it.
    for (let i = 0; i < 20; i++) await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([i]) } }, signal });
    expect(getEventListeners(signal, 'abort')).toHaveLength(1);
    const pending = Array.from({ length: 5 }, () => server.model('slow').infer(slow(10_000, { signal })));
    while (liveObjects().requests < 5) await new Promise((r) => setTimeout(r, 5));
    expect(getEventListeners(signal, 'abort')).toHaveLength(1);
    controller.abort('shutting down');
    for (const request of pending) {
      const error = await rejection(request);
      expect(error.code).toBe('CANCELLED');
      expect(error.cause).toBe('shutting down');
    }
    await expectNothingLive();
    const after = await rejection(server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([1]) } }, signal }));
    expect(after.message).toContain('aborted before it started');
  });

  it('a request that finishes in time is not affected by its timeout', async () => {
    const response = await server.model('slow').infer(slow(1, { timeoutMs: 5_000 }));
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([1, 2]);
  });
});

describe('validation before native code', () => {
  const cases: Array<[string, string, InferenceRequest, RegExp]> = [
    ['unknown input', 'add_sub', { inputs: { INPUT0: new Float32Array(4), INPUT1: new Float32Array(4), EXTRA: new Float32Array(4) } }, /model 'add_sub' has no input 'EXTRA'/],
    ['missing input', 'add_sub', { inputs: { INPUT0: new Float32Array(4) } }, /model 'add_sub' needs input 'INPUT1'/],
    ['dtype mismatch', 'add_sub', { inputs: { INPUT0: new Float64Array(4), INPUT1: new Float32Array(4) } }, /INPUT0.*FP32/],
    ['element count vs shape', 'add_sub', { inputs: { INPUT0: { shape: [4], data: new Float32Array(3) }, INPUT1: new Float32Array(4) } }, /INPUT0/],
    ['shape vs dims', 'add_sub', { inputs: { INPUT0: new Float32Array(5), INPUT1: new Float32Array(4) } }, /input 'INPUT0' of model 'add_sub' has shape \[5\]; the model expects \[4\]/],
    ['rank vs dims', 'identity_fp32', { inputs: { INPUT0: new Float32Array(3) } }, /has shape \[3\]; the model expects \[-1, -1\]/],
    ['batch above max_batch_size', 'identity_fp32', { inputs: { INPUT0: { shape: [9, 1], data: new Float32Array(9) } } }, /batch size 9, above the model's max_batch_size 8/],
    ['BYTES element of the wrong type', 'bytes_echo', { inputs: { INPUT0: ['a', 7 as unknown as string] } }, /INPUT0.*1/],
    ['unknown output', 'add_sub', { inputs: { INPUT0: new Float32Array(4), INPUT1: new Float32Array(4) }, outputs: ['OUTPUT9'] }, /model 'add_sub' has no output 'OUTPUT9'/],
    ['no inputs object', 'add_sub', {} as InferenceRequest, /request.inputs: expected an object, got undefined/],
    ['bad timeout', 'add_sub', { inputs: { INPUT0: new Float32Array(4), INPUT1: new Float32Array(4) }, timeoutMs: -1 }, /timeoutMs/],
  ];
  for (const [what, model, request, message] of cases) {
    it(`rejects ${what} with INVALID_ARG`, async () => {
      const error = await rejection(server.model(model).infer(request));
      expect(error.code).toBe('INVALID_ARG');
      expect(error.message).toMatch(message);
    });
  }

  it('rejects an unknown model with NOT_FOUND', async () => {
    const error = await rejection(server.model('does_not_exist').infer({ inputs: {} }));
    expect(error.code).toBe('NOT_FOUND');
  });

  it('leaves nothing live after all of the above', async () => {
    await expectNothingLive();
  });
});

describe('output memory', () => {
  it('hands large outputs to JS without a copy and frees them when JS drops them', async () => {
    await (async () => {
      const response = await server.model('identity_fp32').infer({
        inputs: { INPUT0: { shape: [1, 4096], data: new Float32Array(4096).fill(2) } },
      });
      // The native buffer is still alive: JS holds it, not a copy.
      expect(liveObjects().outputBuffers).toBe(1);
      expect((response.outputs.OUTPUT0!.data as Float32Array)[4095]).toBe(2);
    })();
    await expectNothingLive();
  });

  it('copies small outputs (≤ 4 KiB), freeing the native buffer at once', async () => {
    const response = await server.model('identity_fp32').infer({
      inputs: { INPUT0: { shape: [1, 1024], data: new Float32Array(1024).fill(3) } },
    });
    expect(liveObjects().outputBuffers).toBe(0);
    expect((response.outputs.OUTPUT0!.data as Float32Array)[1023]).toBe(3);
  });

  it('names every output past the addon’s table of repeated names (80 outputs, small and large), twice over', async () => {
    // The addon names outputs and parameters by index into a table of 64;
    // past it, by their strings. 80 outputs overflow it whatever came before.
    const count = 80;
    const model = await server.loadModel('identity_many', {
      config: {
        name: 'identity_many',
        backend: 'identity',
        max_batch_size: 0,
        input: Array.from({ length: count }, (_, i) => ({ name: `INPUT${i}`, data_type: 'TYPE_FP32' as const, dims: [-1] })),
        output: Array.from({ length: count }, (_, i) => ({ name: `OUTPUT${i}`, data_type: 'TYPE_FP32' as const, dims: [-1] })),
      },
      files: { '1/README.txt': 'identity models need only a version directory' },
    });
    try {
      const reference = await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array(1) } } });
      for (let round = 0; round < 2; round++) {
        // Every fifth output large (its own buffer), the others small (the shared buffer).
        const length = (i: number): number => (i % 5 === 0 ? 4096 : 1 + (i % 16));
        const inputs: InferenceRequest['inputs'] = {};
        for (let i = 0; i < count; i++) {
          inputs[`INPUT${i}`] = { shape: [length(i)], data: new Float32Array(length(i)).fill(i + round / 2) };
        }
        const response = await model.infer({ inputs });
        expect(Object.keys(response.outputs).sort()).toEqual(Array.from({ length: count }, (_, i) => `OUTPUT${i}`).sort());
        for (let i = 0; i < count; i++) {
          const output = response.outputs[`OUTPUT${i}`]!;
          expect(output.name).toBe(`OUTPUT${i}`);
          expect(output.shape).toEqual([length(i)]);
          expect(Array.from(output.data as Float32Array)).toEqual(new Array(length(i)).fill(i + round / 2));
        }
        expect(response.parameters).toEqual(reference.parameters);
        response.dispose();
        expect((response.outputs.OUTPUT0!.data as Float32Array).byteLength).toBe(0);
        expect((response.outputs.OUTPUT1!.data as Float32Array).byteLength).toBe(0);
      }
    } finally {
      await server.unloadModel('identity_many');
    }
    await expectNothingLive();
  });

  it('copies outputs into JS memory with outputCopy', async () => {
    const copying = await startServer({ outputCopy: true, startupModels: ['identity_fp32'] });
    try {
      const data = Float32Array.from({ length: 4096 }, (_, i) => i);
      const response = await copying.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 4096], data } } });
      // The native buffer was freed with the response: nothing held for JS.
      expect(liveObjects().outputBuffers).toBe(0);
      expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual(Array.from(data));
    } finally {
      await copying.stop();
    }
  });

  it('rejects inference after stop with UNAVAILABLE', async () => {
    const other = await startServer({ startupModels: ['identity_fp32'] });
    const model = other.model('identity_fp32');
    await model.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([1]) } } });
    await other.stop();
    const error = await rejection(model.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([1]) } } }));
    expect(error.code).toBe('UNAVAILABLE');
  });
});
