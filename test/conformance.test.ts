/**
 * One suite of the surface in-process and remote share (`InferenceServer` /
 * `InferenceModel`), run against the same Triton: the in-process `Server`,
 * and the remote `Client` over gRPC and over HTTP to `serveKServe` in front
 * of that server, plain and over TLS, with each transport. A difference
 * between them is a bug.
 */
import { afterAll, beforeAll, describe, expect, expectTypeOf, it, vi } from 'vitest';
import { Tensor, type InferenceModel, type InferenceServer, type Model, type ModelConfigInput, type Server } from '../lib/index.js';
import { Client, RemoteModel } from '../lib/client/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { expectNoRequestsLive, makeCertificates, rejection, startServer, type TestCertificates } from './helpers.js';

let server: Server;
let frontends: KServeFrontends;
/** The same, over TLS (the native engines open it). */
let tlsFrontends: KServeFrontends;
/** The same, compressing its gRPC answers (responseCompression). */
let gzipFrontends: KServeFrontends;
let certificates: TestCertificates;
const clients: Client[] = [];

const MODELS = [
  'identity_fp32', 'identity_fp64', 'identity_fp16', 'identity_bf16', 'identity_bool', 'identity_bytes',
  'identity_int8', 'identity_int16', 'identity_int32', 'identity_int64',
  'identity_uint8', 'identity_uint16', 'identity_uint32', 'identity_uint64',
  'add_sub', 'repeat_int32', 'slow', 'fail',
];

beforeAll(async () => {
  server = await startServer();
  for (const name of MODELS) await server.loadModel(name);
  frontends = await serveKServe(server, { http: { port: 0 }, grpc: { port: 0 }, metrics: { port: 0 }, repositoryControl: true });
  certificates = await makeCertificates();
  const tls = { key: certificates.serverKey, cert: certificates.serverCert };
  tlsFrontends = await serveKServe(server, { http: { port: 0, tls }, grpc: { port: 0, tls }, repositoryControl: true });
  gzipFrontends = await serveKServe(server, { http: { port: 0 }, grpc: { port: 0, responseCompression: 'gzip' }, repositoryControl: true });
}, 60_000);

afterAll(async () => {
  for (const client of clients) await client.close();
  await frontends?.close();
  await tlsFrontends?.close();
  await gzipFrontends?.close();
  await server?.stop();
  await certificates?.remove();
});

interface Variant {
  name: string;
  /** Streams decoupled models (KServe HTTP has no streaming inference). */
  streams: boolean;
  /** A client's abort reaches Triton: not through Triton's own HTTP front end (r25.07), which does not cancel on disconnect. */
  serverSeesAbort: boolean;
  open(): Promise<InferenceServer>;
}

async function connect(target: string, transport: 'native' | 'js' = 'js', compression: 'none' | 'gzip' = 'none'): Promise<Client> {
  const tls = target.startsWith('grpcs:') || target.startsWith('https:') ? { tls: { ca: certificates.ca } } : {};
  const client = await Client.connect(target, { metricsUrl: `http://127.0.0.1:${frontends.metrics!.port}/metrics`, transport, compression, ...tls });
  if (client.transport !== transport) throw new Error(`asked for the ${transport} transport, got ${client.transport}`);
  clients.push(client);
  return client;
}

const variants: Variant[] = [
  { name: 'in-process', streams: true, serverSeesAbort: true, open: async () => server },
  { name: 'remote gRPC (native)', streams: true, serverSeesAbort: true, open: () => connect(`grpc://127.0.0.1:${frontends.grpc!.port}`, 'native') },
  { name: 'remote gRPC (js)', streams: true, serverSeesAbort: true, open: () => connect(`grpc://127.0.0.1:${frontends.grpc!.port}`, 'js') },
  { name: 'remote HTTP (native)', streams: false, serverSeesAbort: true, open: () => connect(`http://127.0.0.1:${frontends.http!.port}`, 'native') },
  { name: 'remote HTTP (js)', streams: false, serverSeesAbort: true, open: () => connect(`http://127.0.0.1:${frontends.http!.port}`, 'js') },
  ...(['native', 'js'] as const).flatMap((transport): Variant[] => [
    { name: `remote gRPC over TLS (${transport})`, streams: true, serverSeesAbort: true, open: () => connect(`grpcs://127.0.0.1:${tlsFrontends.grpc!.port}`, transport) },
    { name: `remote HTTPS (${transport})`, streams: false, serverSeesAbort: true, open: () => connect(`https://127.0.0.1:${tlsFrontends.http!.port}`, transport) },
    // Compressed both ways: requests gzip'd by the client, answers by the server.
    { name: `remote gRPC, gzip (${transport})`, streams: true, serverSeesAbort: true, open: () => connect(`grpc://127.0.0.1:${gzipFrontends.grpc!.port}`, transport, 'gzip') },
    { name: `remote HTTP, gzip (${transport})`, streams: false, serverSeesAbort: true, open: () => connect(`http://127.0.0.1:${gzipFrontends.http!.port}`, transport, 'gzip') },
  ]),
];

/**
 * TRITON_REMOTE_URLS (comma-separated grpc://, grpcs://, http:// and
 * https:// targets) adds the same suite against another server, with both
 * transports, e.g. Triton's own `tritonserver` with test/models in explicit
 * model control mode and its metrics port at TRITON_REMOTE_METRICS_URL; the
 * models are loaded there first. For TLS, NODE_EXTRA_CA_CERTS names the CA.
 */
for (const target of (process.env.TRITON_REMOTE_URLS ?? '').split(',').filter((url) => url !== '')) {
  for (const [transport, compression] of [['native', 'none'], ['js', 'none'], ['native', 'gzip']] as const) {
    variants.push({
      name: `external ${target} (${transport}${compression === 'none' ? '' : `, ${compression}`})`,
      streams: target.startsWith('grpc'),
      serverSeesAbort: target.startsWith('grpc'),
      open: async () => {
        const client = await Client.connect(target, { transport, compression, ...(process.env.TRITON_REMOTE_METRICS_URL ? { metricsUrl: process.env.TRITON_REMOTE_METRICS_URL } : {}) });
        clients.push(client);
        for (const name of MODELS) await client.loadModel(name);
        return client;
      },
    });
  }
}

/** A Python model that reports what it was sent: id, parameters, correlation id, flags, timeout. */
const ECHO_SOURCE = `
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            info = {
                "request_id": request.request_id(),
                "parameters": json.loads(request.parameters()),
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "timeout": request.timeout(),
                "requested": sorted(request.requested_output_names()),
            }
            y = pb_utils.Tensor("Y", (x * 2).astype(np.float32))
            text = pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[y, text], parameters={"seen": len(x)}))
        return responses
`;

const ECHO_CONFIG = {
  backend: 'python',
  max_batch_size: 0,
  input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [-1] }],
  output: [
    { name: 'Y', data_type: 'TYPE_FP32', dims: [-1] },
    { name: 'INFO', data_type: 'TYPE_STRING', dims: [1] },
  ],
  instance_group: [{ kind: 'KIND_CPU', count: 1 }],
} as ModelConfigInput;

const decoder = new TextDecoder();

describe.each(variants)('$name', (variant) => {
  let triton: InferenceServer;

  beforeAll(async () => {
    triton = await variant.open();
  });

  it('answers health and metadata', async () => {
    expect(await triton.live()).toBe(true);
    expect(await triton.ready()).toBe(true);
    const metadata = await triton.metadata();
    const own = await server.metadata();
    expect(metadata.name).toBe(own.name);
    expect(metadata.version).toBe(own.version);
    expect(metadata.extensions).toContain('model_repository');
  });

  it('lists the repository and the models loaded', async () => {
    const index = await triton.modelIndex();
    expect(index.find((entry) => entry.name === 'identity_fp32')).toMatchObject({ name: 'identity_fp32', version: '1', state: 'READY' });
    const ready = await triton.modelIndex({ readyOnly: true });
    expect(ready.every((entry) => entry.state === 'READY')).toBe(true);
    expect(ready.map((entry) => entry.name)).toContain('add_sub');
  });

  it('gives model metadata and config as in-process', async () => {
    const model = triton.model('add_sub');
    expect(await model.ready()).toBe(true);
    expect(await model.metadata()).toEqual(await server.model('add_sub').metadata());
    const config = await model.config();
    const own = await server.model('add_sub').config();
    expect(config.name).toBe('add_sub');
    expect(config.max_batch_size).toBe(own.max_batch_size);
    expect(config.input?.map((input) => [input.name, input.data_type, input.dims])).toEqual(own.input?.map((input) => [input.name, input.data_type, input.dims]));
    expect(config.backend).toBe(own.backend);
    expect(await triton.model('no_such_model').ready()).toBe(false);
  });

  it.each([
    ['identity_fp32', new Float32Array([1.5, -2, 3.25, 0])],
    ['identity_fp64', new Float64Array([1e300, -2.5, Math.PI, 0])],
    ['identity_int8', new Int8Array([-128, 127, 0, 5])],
    ['identity_int16', new Int16Array([-32768, 32767, 1, 2])],
    ['identity_int32', new Int32Array([-(2 ** 31), 2 ** 31 - 1, 7, 8])],
    ['identity_int64', new BigInt64Array([-(2n ** 63n), 2n ** 63n - 1n, 9n, 10n])],
    ['identity_uint8', new Uint8Array([0, 255, 1, 2])],
    ['identity_uint16', new Uint16Array([0, 65535, 3, 4])],
    ['identity_uint32', new Uint32Array([0, 2 ** 32 - 1, 5, 6])],
    ['identity_uint64', new BigUint64Array([0n, 2n ** 64n - 1n, 11n, 12n])],
  ])('returns %s data exactly', async (name, data) => {
    const response = await triton.model(name).infer({ inputs: { INPUT0: { shape: [1, 4], data } } });
    const output = response.outputs.OUTPUT0!;
    expect(output.shape).toEqual([1, 4]);
    expect(output.data.constructor).toBe(data.constructor);
    expect(Array.from(output.data as ArrayLike<number | bigint>)).toEqual(Array.from(data as ArrayLike<number | bigint>));
    expect(response.model).toEqual({ name, version: 1 });
    expect(response.final).toBe(true);
  });

  it('returns BOOL, FP16, BF16 and BYTES as in-process', async () => {
    const bool = await triton.model('identity_bool').infer({ inputs: { INPUT0: { shape: [1, 3], data: [true, false, true] } } });
    expect(bool.outputs.OUTPUT0!.toArray()).toEqual([true, false, true]);
    const fp16 = await triton.model('identity_fp16').infer({ inputs: { INPUT0: { shape: [1, 3], data: [0.5, -2, 1024] } } });
    expect(fp16.outputs.OUTPUT0!.datatype).toBe('FP16');
    expect(fp16.outputs.OUTPUT0!.toArray()).toEqual([0.5, -2, 1024]);
    const bf16 = await triton.model('identity_bf16').infer({ inputs: { INPUT0: Tensor.from([1.5, -3], { datatype: 'BF16', shape: [1, 2] }) } });
    expect(bf16.outputs.OUTPUT0!.toArray()).toEqual([1.5, -3]);
    const text = ['héllo', '', 'a\u0000b'];
    const bytes = await triton.model('identity_bytes').infer({ inputs: { INPUT0: { shape: [1, 3], data: text } } });
    expect(bytes.outputs.OUTPUT0!.strings()).toEqual(text);
    const raw = await triton.model('identity_bytes').infer({ inputs: { INPUT0: { shape: [1, 2], data: [new Uint8Array([0, 255]), new Uint8Array([7])] } } });
    expect((raw.outputs.OUTPUT0!.data as Uint8Array[]).map((element) => Array.from(element))).toEqual([[0, 255], [7]]);
  });

  it('returns only the outputs requested, and writes into buffers given for them', async () => {
    const inputs = { INPUT0: new Float32Array([1, 2, 3, 4]), INPUT1: new Float32Array([1, 1, 1, 1]) };
    const one = await triton.model('add_sub').infer({ inputs, outputs: ['OUTPUT1'] });
    expect(Object.keys(one.outputs)).toEqual(['OUTPUT1']);
    expect(Array.from(one.outputs.OUTPUT1!.data as Float32Array)).toEqual([0, 1, 2, 3]);
    const buffer = new Float32Array(4);
    const into = await triton.model('add_sub').infer({ inputs, outputs: { OUTPUT0: { data: buffer } } });
    expect(Array.from(buffer)).toEqual([2, 3, 4, 5]);
    expect((into.outputs.OUTPUT0!.data as Float32Array).buffer).toBe(buffer.buffer);
    const small = await rejection(triton.model('add_sub').infer({ inputs, outputs: { OUTPUT0: { data: new Float32Array(2) } } }));
    expect(small.code).toBe('INVALID_ARG');
  });

  it('classifies an output (Triton classification extension) as top-k "value:index" strings', async () => {
    const response = await triton.model('add_sub').infer({
      inputs: { INPUT0: new Float32Array([1, 5, 3, 2]), INPUT1: new Float32Array([0.5, 0.5, 0.5, 0.5]) },
      outputs: { OUTPUT0: { classification: 2 }, OUTPUT1: {} },
    });
    expect(response.outputs.OUTPUT0!.datatype).toBe('BYTES');
    expect(response.outputs.OUTPUT0!.shape).toEqual([2]);
    expect(response.outputs.OUTPUT0!.strings()).toEqual(['5.500000:1', '3.500000:2']);
    expect(Array.from(response.outputs.OUTPUT1!.data as Float32Array)).toEqual([0.5, 4.5, 2.5, 1.5]);
    const bad = await rejection(triton.model('add_sub').infer({ inputs: { INPUT0: new Float32Array(4), INPUT1: new Float32Array(4) }, outputs: { OUTPUT0: { classification: 0 } } }));
    expect(bad.code).toBe('INVALID_ARG');
  });

  it('sends id, parameters, sequence and timeout through, and gets response parameters back', async () => {
    const name = `echo_${variant.name.replace(/\W/g, '_')}`;
    const model = await triton.loadModel(name, { config: { ...ECHO_CONFIG, name }, files: { '1/model.py': ECHO_SOURCE } });
    try {
      const response = await model.infer({
        id: 'req-ü-7',
        inputs: { X: new Float32Array([1, 2.5]) },
        parameters: { alpha: 'a', n: 3, on: true },
        sequence: { id: 42, start: true, end: true },
        timeoutMs: 20_000,
        priority: 1,
      });
      expect(response.id).toBe('req-ü-7');
      expect(Array.from(response.outputs.Y!.data as Float32Array)).toEqual([2, 5]);
      expect(response.parameters).toEqual({ seen: 2 });
      const info = JSON.parse(decoder.decode((response.outputs.INFO!.data as Uint8Array[])[0]));
      expect(info).toEqual({
        request_id: 'req-ü-7',
        parameters: { alpha: 'a', n: 3, on: true },
        correlation_id: 42,
        flags: 3,
        timeout: 20_000_000,
        requested: ['INFO', 'Y'],
      });
      const text = await model.infer({ inputs: { X: new Float32Array([1]) }, sequence: { id: 'session-9', start: true }, outputs: ['INFO'] });
      const textInfo = JSON.parse(decoder.decode((text.outputs.INFO!.data as Uint8Array[])[0]));
      expect(textInfo).toMatchObject({ correlation_id: 'session-9', flags: 1, requested: ['INFO'] });
      expect(Object.keys(text.outputs)).toEqual(['INFO']);
    } finally {
      await triton.unloadModel(name);
    }
    expect(await triton.model(name).ready()).toBe(false);
    // Real Triton reports the server not ready until a model loaded from memory has finished
    // unloading, which its repository index does not show: wait for it.
    await vi.waitFor(async () => expect(await triton.ready()).toBe(true), { timeout: 10_000, interval: 20 });
  });

  it('unloads and loads models of the repository', async () => {
    await triton.unloadModel('identity_int8');
    expect(await triton.model('identity_int8').ready()).toBe(false);
    const model = await triton.loadModel('identity_int8');
    expect(await model.ready()).toBe(true);
    expect(model.name).toBe('identity_int8');
  });

  it('fails with Triton code and message', async () => {
    const unknown = await rejection(triton.model('no_such_model').infer({ inputs: { INPUT0: new Float32Array([1]) } }));
    expect(unknown.code).toBe('NOT_FOUND');
    expect(unknown.message).toContain("'no_such_model'");
    const failing = await rejection(triton.model('fail').infer({ inputs: { INPUT0: new Float32Array([1]) } }));
    expect(failing.code).toBe('INTERNAL');
    expect(failing.message).toContain('fail model always fails');
    const bad = await rejection(triton.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 2], data: new Float32Array(3) } } }));
    expect(bad.code).toBe('INVALID_ARG');
    if (variant.name !== 'in-process') {
      expect(failing.endpoint).toMatch(/^(grpcs?|https?):\/\/127\.0\.0\.1:\d+$/);
      expect(failing.message).toContain(failing.endpoint!);
    }
  });

  it('times out and aborts as in-process: CANCELLED; Triton cancels the request where its front end can', async () => {
    if (variant.serverSeesAbort) {
      const slow = triton.model('slow');
      const inputs = { INPUT0: new Float32Array([1]), DELAY_MS: new Uint32Array([10_000]) };
      // slow has one instance: a short request after a cancelled 10 s one answers at once only
      // if Triton cancelled that one (the model polls for it), else after the 10 s.
      const short = () => slow.infer({ inputs: { INPUT0: new Float32Array([7]), DELAY_MS: new Uint32Array([1]) } });
      const started = Date.now();
      const timedOut = await rejection(slow.infer({ inputs, timeoutMs: 300 }));
      expect(timedOut.code).toBe('CANCELLED');
      expect(timedOut.message).toContain('timed out after 300 ms');
      expect(Array.from((await short()).outputs.OUTPUT0!.data as Float32Array)).toEqual([7]);
      const controller = new AbortController();
      const pending = slow.infer({ inputs, signal: controller.signal });
      setTimeout(() => controller.abort(), 200);
      const aborted = await rejection(pending);
      expect(aborted.code).toBe('CANCELLED');
      expect(aborted.message).toContain('aborted');
      expect(Array.from((await short()).outputs.OUTPUT0!.data as Float32Array)).toEqual([7]);
      expect(Date.now() - started).toBeLessThan(5000);
      if (!variant.name.startsWith('external')) await expectNoRequestsLive(3000);
    } else {
      // Triton's own HTTP front end does not cancel on disconnect: the client still ends the call at once.
      const slow = triton.model('slow');
      const inputs = { INPUT0: new Float32Array([1]), DELAY_MS: new Uint32Array([2000]) };
      const started = Date.now();
      const timedOut = await rejection(slow.infer({ inputs, timeoutMs: 300 }));
      expect(timedOut.code).toBe('CANCELLED');
      expect(timedOut.message).toContain('timed out after 300 ms');
      expect(Date.now() - started).toBeLessThan(1500);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const aborted = await rejection(slow.infer({ inputs, signal: controller.signal }));
      expect(aborted.code).toBe('CANCELLED');
      expect(Date.now() - started).toBeLessThan(2000);
    }
  });

  it('streams a decoupled model, and leaving the loop early ends the request', async () => {
    const model = triton.model('repeat_int32');
    if (!variant.streams) {
      const refused = await rejection((async () => {
        for await (const _ of model.stream({ inputs: { IN: new Int32Array([1, 2]) } })) void _;
      })());
      expect(refused.code).toBe('UNSUPPORTED');
      expect(refused.message).toContain('grpc://');
      return;
    }
    const values: number[] = [];
    for await (const response of model.stream({ inputs: { IN: new Int32Array([5, 6, 7, 8]) } })) {
      expect(response.outputs.OUT!.shape).toEqual([1]);
      values.push((response.outputs.OUT!.data as Int32Array)[0]!);
    }
    expect(values).toEqual([5, 6, 7, 8]);
    const early: number[] = [];
    for await (const response of model.stream({ inputs: { IN: new Int32Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), DELAY_MS: new Uint32Array([50]) } })) {
      early.push((response.outputs.OUT!.data as Int32Array)[0]!);
      if (early.length === 2) break;
    }
    expect(early).toEqual([1, 2]);
    await expectNoRequestsLive(3000);
  });

  it('streams a model that is not decoupled as one response', async () => {
    const responses = [];
    for await (const response of triton.model('identity_fp32').stream({ inputs: { INPUT0: { shape: [1, 2], data: new Float32Array([3, 4]) } } })) {
      responses.push(response);
    }
    expect(responses).toHaveLength(1);
    expect(Array.from(responses[0]!.outputs.OUTPUT0!.data as Float32Array)).toEqual([3, 4]);
    expect(responses[0]!.final).toBe(true);
  });

  it('reports statistics and metrics', async () => {
    await triton.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([1]) } } });
    const [stats] = await triton.model('identity_fp32').statistics();
    expect(stats!.name).toBe('identity_fp32');
    expect(stats!.inference_count).toBeGreaterThan(0);
    expect(typeof stats!.inference_stats.success.ns).toBe('bigint');
    const all = await triton.statistics();
    expect(all.map((entry) => entry.name)).toContain('identity_fp32');
    const text = await triton.metrics();
    expect(text).toContain('nv_inference_count{model="identity_fp32"');
  });
});

describe('the shared surface', () => {
  it('Server and Client, Model and RemoteModel each satisfy it (checked by tsc)', () => {
    expectTypeOf<Server>().toMatchTypeOf<InferenceServer>();
    expectTypeOf<Client>().toMatchTypeOf<InferenceServer>();
    expectTypeOf<Model>().toMatchTypeOf<InferenceModel>();
    expectTypeOf<RemoteModel>().toMatchTypeOf<InferenceModel>();
    expectTypeOf<Client['model']>().returns.toEqualTypeOf<RemoteModel>();
    expect(clients.every((client) => client instanceof Client)).toBe(true);
  });
});
