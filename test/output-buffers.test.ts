/** Caller-provided output buffers: Triton writes outputs straight into the caller's memory. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveObjects, type Server } from '../lib/index.js';
import { collectGarbage, rejection, startServer } from './helpers.js';

let server: Server;
beforeAll(async () => {
  server = await startServer({ startupModels: ['identity_fp32', 'add_sub', 'identity_bytes'] });
});
afterAll(async () => {
  await server.stop();
});

describe('output buffers', () => {
  it('writes an output into the caller’s buffer, with no memory of its own', async () => {
    const before = liveObjects().outputBuffers;
    const out = new Float32Array(16384).fill(-1);
    const input = Float32Array.from({ length: 16384 }, (_, i) => i);
    const response = await server.model('identity_fp32').infer({
      inputs: { INPUT0: { shape: [1, 16384], data: input } },
      outputs: { OUTPUT0: { data: out } },
    });
    const tensor = response.outputs.OUTPUT0!;
    expect(tensor.shape).toEqual([1, 16384]);
    expect((tensor.data as Float32Array).buffer).toBe(out.buffer);
    expect(Array.from(out.subarray(0, 4))).toEqual([0, 1, 2, 3]);
    expect(out[16383]).toBe(16383);
    // Nothing was allocated for it (a 64 KiB output would otherwise be external memory).
    expect(liveObjects().outputBuffers).toBe(before);
  });

  it('reuses one buffer across requests, and mixes given and allocated outputs', async () => {
    const sum = new Float32Array(4);
    for (const k of [1, 2, 3]) {
      const response = await server.model('add_sub').infer({
        inputs: { INPUT0: new Float32Array([k, k, k, k]), INPUT1: new Float32Array([1, 2, 3, 4]) },
        outputs: { OUTPUT0: { data: sum }, OUTPUT1: {} },
      });
      expect(Array.from(sum)).toEqual([k + 1, k + 2, k + 3, k + 4]);
      expect(Array.from(response.outputs.OUTPUT1!.data as Float32Array)).toEqual([k - 1, k - 2, k - 3, k - 4]);
    }
  });

  it('a buffer too small fails the request naming both sizes, or allocates when asked to', async () => {
    const small = new Float32Array(2);
    const request = { inputs: { INPUT0: { shape: [1, 4], data: new Float32Array([1, 2, 3, 4]) } } };
    const error = await rejection(server.model('identity_fp32').infer({ ...request, outputs: { OUTPUT0: { data: small } } }));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain("output 'OUTPUT0' is 16 bytes; the buffer given for it holds 8");
    const response = await server
      .model('identity_fp32')
      .infer({ ...request, outputs: { OUTPUT0: { data: small, ifTooSmall: 'allocate' } } });
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([1, 2, 3, 4]);
    expect((response.outputs.OUTPUT0!.data as Float32Array).buffer).not.toBe(small.buffer);
  });

  it('takes BYTES outputs into a byte buffer', async () => {
    const out = new Uint8Array(64);
    const response = await server.model('identity_bytes').infer({
      inputs: { INPUT0: { shape: [1, 2], data: ['ab', 'cde'] } },
      outputs: { OUTPUT0: { data: out } },
    });
    expect(response.outputs.OUTPUT0!.strings()).toEqual(['ab', 'cde']);
  });

  it('refuses specs of the wrong kind and names of outputs the model lacks', async () => {
    const model = server.model('identity_fp32');
    const inputs = { INPUT0: { shape: [1, 1], data: new Float32Array(1) } };
    expect((await rejection(model.infer({ inputs, outputs: { OUTPUT0: { data: [1, 2] as never } } }))).message).toMatch(/data: expected a TypedArray/);
    expect((await rejection(model.infer({ inputs, outputs: { OUTPUT0: { ifTooSmall: 'grow' as never } } }))).message).toMatch(/ifTooSmall/);
    expect((await rejection(model.infer({ inputs, outputs: { NOPE: {} } }))).message).toMatch(/has no output 'NOPE'/);
    await collectGarbage();
    expect(liveObjects()).toEqual({ requests: 0, responses: 0, outputBuffers: 0, inputReferences: 0, pending: 0 });
  });
});

describe('small outputs', () => {
  // Outputs of 64 bytes or less reach JS in one buffer per drain, copied out.
  it('are each their own memory, even when many responses arrive together', async () => {
    const ks = Array.from({ length: 32 }, (_, k) => k);
    const responses = await Promise.all(
      ks.map((k) =>
        server.model('add_sub').infer({ inputs: { INPUT0: new Float32Array([k, k, k, k]), INPUT1: new Float32Array([1, 2, 3, 4]) } }),
      ),
    );
    for (const k of ks) {
      const sum = responses[k]!.outputs.OUTPUT0!.data as Float32Array;
      const difference = responses[k]!.outputs.OUTPUT1!.data as Float32Array;
      expect(Array.from(sum)).toEqual([k + 1, k + 2, k + 3, k + 4]);
      expect(Array.from(difference)).toEqual([k - 1, k - 2, k - 3, k - 4]);
      expect(sum.buffer.byteLength).toBe(16);
      expect(difference.buffer).not.toBe(sum.buffer);
    }
    (responses[0]!.outputs.OUTPUT0!.data as Float32Array).fill(-7);
    expect(Array.from(responses[1]!.outputs.OUTPUT0!.data as Float32Array)).toEqual([2, 3, 4, 5]);
    // Disposing one response empties its outputs only.
    responses[2]!.dispose();
    expect((responses[2]!.outputs.OUTPUT0!.data as Float32Array).length).toBe(0);
    expect((responses[2]!.outputs.OUTPUT1!.data as Float32Array).length).toBe(0);
    expect(Array.from(responses[3]!.outputs.OUTPUT1!.data as Float32Array)).toEqual([2, 1, 0, -1]);
    const strings = await Promise.all(
      ['a', 'bc', 'def'].map((text) => server.model('identity_bytes').infer({ inputs: { INPUT0: { shape: [1, 1], data: [text] } } })),
    );
    expect(strings.map((response) => response.outputs.OUTPUT0!.strings())).toEqual([['a'], ['bc'], ['def']]);
  });
});

describe('small outputs past a completion’s inline room', () => {
  // Up to 128 bytes of small outputs per response are copied on Triton's
  // thread; three of 64 bytes leave the third in its block, copied on the JS thread.
  it('arrive intact, each its own memory, and their blocks go back', async () => {
    const config = await server.model('identity_fp32').config();
    const io = (prefix: string) => [0, 1, 2].map((i) => ({ name: `${prefix}${i}`, data_type: 'TYPE_FP32' as const, dims: [-1] }));
    await server.unloadModel('identity_fp32');
    await server.loadModel('identity_fp32', { config: { ...config, input: io('INPUT'), output: io('OUTPUT') } });
    try {
      const before = liveObjects().outputBuffers;
      const inputs = Object.fromEntries(
        [0, 1, 2].map((i) => [`INPUT${i}`, { shape: [1, 16], data: Float32Array.from({ length: 16 }, (_, j) => i * 100 + j) }]),
      );
      const responses = await Promise.all(Array.from({ length: 8 }, () => server.model('identity_fp32').infer({ inputs })));
      for (const response of responses) {
        const outs = [0, 1, 2].map((i) => response.outputs[`OUTPUT${i}`]!.data as Float32Array);
        outs.forEach((data, i) => expect(Array.from(data)).toEqual(Array.from({ length: 16 }, (_, j) => i * 100 + j)));
        expect(new Set(outs.map((data) => data.buffer)).size).toBe(3);
      }
      expect(liveObjects().outputBuffers).toBe(before);
    } finally {
      await server.unloadModel('identity_fp32');
      await server.loadModel('identity_fp32');
    }
  });
});

describe('response.dispose()', () => {
  // Node runs the finalizer of a detached external buffer in its next
  // immediate (node_buffer.cc, CallbackInfo::OnBackingStoreFree), not at GC.
  const freed = (): Promise<void> => new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
  const large = { inputs: { INPUT0: { shape: [1, 16384], data: Float32Array.from({ length: 16384 }, (_, i) => i) } } };

  it('frees the memory of a large output at once, without waiting for a garbage collection', async () => {
    const before = liveObjects().outputBuffers;
    const response = await server.model('identity_fp32').infer(large);
    const data = response.outputs.OUTPUT0!.data as Float32Array;
    expect(data[16383]).toBe(16383);
    // Adopted as an external ArrayBuffer: alive while JS holds it.
    expect(liveObjects().outputBuffers).toBe(before + 1);
    response.dispose();
    expect(data.length).toBe(0);
    await freed();
    expect(liveObjects().outputBuffers).toBe(before);
    expect(data.buffer.byteLength).toBe(0);
    response.dispose(); // idempotent
    response[Symbol.dispose]();
    await freed();
    expect(liveObjects().outputBuffers).toBe(before);
  });

  it('empties small (copied) and BYTES outputs too', async () => {
    const small = await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 4], data: new Float32Array([1, 2, 3, 4]) } } });
    const view = small.outputs.OUTPUT0!.data as Float32Array;
    expect(Array.from(view)).toEqual([1, 2, 3, 4]);
    small[Symbol.dispose]();
    expect(view.length).toBe(0);
    const bytes = await server.model('identity_bytes').infer({ inputs: { INPUT0: { shape: [1, 2], data: ['ab', 'cde'] } } });
    expect(bytes.outputs.OUTPUT0!.strings()).toEqual(['ab', 'cde']);
    bytes.dispose();
    // Its bytes are gone: reading them is the runtime's own error, not garbage.
    expect(() => bytes.outputs.OUTPUT0!.strings()).toThrow(/detached/);
  });

  it('leaves outputs written into the caller’s buffers untouched', async () => {
    const out = new Float32Array(16384);
    const response = await server.model('identity_fp32').infer({ ...large, outputs: { OUTPUT0: { data: out } } });
    response.dispose();
    expect(out.length).toBe(16384);
    expect(out[16383]).toBe(16383);
    expect((response.outputs.OUTPUT0!.data as Float32Array)[16383]).toBe(16383);
  });

  it('works on each response of a stream', async () => {
    const before = liveObjects().outputBuffers;
    let seen = 0;
    for await (const response of server.model('identity_fp32').stream(large)) {
      expect((response.outputs.OUTPUT0!.data as Float32Array)[16383]).toBe(16383);
      response.dispose();
      seen++;
    }
    expect(seen).toBe(1);
    await freed();
    expect(liveObjects().outputBuffers).toBe(before);
  });
});
