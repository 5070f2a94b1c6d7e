/**
 * What only remote mode has: its own metrics, an OpenTelemetry span whose
 * traceparent reaches the server, gzip both ways, retries, `dns:///` targets
 * and per-call headers. The shared surface is in conformance.test.ts.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import { gunzipSync, gzipSync } from 'node:zlib';
import { context, trace as otelTrace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMetricsText, type Server } from '../lib/index.js';
import { Client, metricsHandler } from '../lib/client/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { rejection, startServer } from './helpers.js';

let server: Server;
let frontends: KServeFrontends;
/** Headers of each call the front ends saw, by protocol. */
const seen: Array<{ protocol: string; method: string; headers: Record<string, unknown> }> = [];
const small = { INPUT0: { shape: [1, 2], data: new Float32Array([1, 2]) } };
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  server = await startServer();
  for (const name of ['identity_fp32', 'fail']) await server.loadModel(name);
  frontends = await serveKServe(server, {
    http: { port: 0 },
    grpc: { port: 0 },
    metrics: { port: 0 },
    authorize: ({ protocol, method, headers }) => {
      seen.push({ protocol, method, headers: { ...headers } });
      return true;
    },
  });
});

afterAll(async () => {
  await frontends?.close();
  await server?.stop();
  context.disable();
});

const targets = () => ({ grpc: `grpc://127.0.0.1:${frontends.grpc!.port}`, http: `http://127.0.0.1:${frontends.http!.port}` });

describe.each(['grpc', 'http'] as const)('%s', (protocol) => {
  it('counts requests, failures and latency by model and endpoint, served by metricsHandler beside Triton’s', async () => {
    const client = await Client.connect(targets()[protocol], { metricsUrl: `http://127.0.0.1:${frontends.metrics!.port}/metrics` });
    try {
      const metrics = client.packageMetrics();
      for (let i = 0; i < 3; i++) await client.model('identity_fp32').infer({ inputs: small });
      await rejection(client.model('fail').infer({ inputs: { INPUT0: new Float32Array([1]) } }));
      const handler = metricsHandler(client, { packageMetrics: true });
      const listener = createServer((req, res) => void handler(req, res));
      await new Promise<void>((done) => listener.listen(0, '127.0.0.1', done));
      try {
        const text = await (await fetch(`http://127.0.0.1:${(listener.address() as { port: number }).port}/metrics`)).text();
        const families = new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family]));
        const endpoint = targets()[protocol];
        expect(families.get('tritonserver_node_client_requests_total')?.metrics).toEqual([{ labels: { model: 'identity_fp32', endpoint }, value: '3' }]);
        expect(families.get('tritonserver_node_client_failures_total')?.metrics).toEqual([{ labels: { model: 'fail', endpoint, code: 'INTERNAL' }, value: '1' }]);
        expect(families.get('tritonserver_node_client_request_duration_seconds')?.type).toBe('HISTOGRAM');
        // That parser drops a histogram's labels: the package's own parser reads the series.
        const count = parseMetricsText(text).find(
          (sample) => sample.name === 'tritonserver_node_client_request_duration_seconds_count' && sample.labels.model === 'identity_fp32',
        );
        expect(count).toMatchObject({ labels: { model: 'identity_fp32', endpoint }, value: 3 });
        // Triton's own families come in the same scrape.
        expect(families.has('nv_inference_request_success')).toBe(true);
        expect(metrics.text()).toContain('tritonserver_node_client_retries_total');
      } finally {
        listener.close();
      }
    } finally {
      await client.close();
    }
  });

  it('sends a span’s traceparent with the request and ends the span with the outcome', async () => {
    exporter.reset();
    const client = await Client.connect(targets()[protocol]);
    try {
      const tracer = provider.getTracer('test');
      const parent = tracer.startSpan('POST /predict');
      seen.length = 0;
      await context.with(otelTrace.setSpan(context.active(), parent), () => client.model('identity_fp32').infer({ inputs: small, trace: { tracer } }));
      await rejection(context.with(otelTrace.setSpan(context.active(), parent), () => client.model('fail').infer({ inputs: { INPUT0: new Float32Array([1]) }, trace: { tracer } })));
      parent.end();
      const spans = exporter.getFinishedSpans();
      const calls = spans.filter((span) => span.name.startsWith('triton.infer'));
      expect(calls.map((span) => span.name)).toEqual(['triton.infer identity_fp32', 'triton.infer fail']);
      for (const span of calls) {
        expect(span.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
        expect(span.spanContext().traceId).toBe(parent.spanContext().traceId);
      }
      expect(calls[1]!.status.code).toBe(2);
      // A request aborted before it starts still ends its span, as a failure.
      const controller = new AbortController();
      controller.abort();
      expect((await rejection(client.model('identity_fp32').infer({ inputs: small, signal: controller.signal, trace: { tracer } }))).code).toBe('CANCELLED');
      const aborted = exporter.getFinishedSpans().filter((span) => span.name === 'triton.infer identity_fp32');
      expect(aborted).toHaveLength(2);
      expect(aborted[1]!.status.code).toBe(2);
      const infers = seen.filter((call) => call.method === 'ModelInfer' || (call.method === 'POST' && call.protocol === 'http'));
      const sent = infers.map((call) => call.headers.traceparent);
      expect(sent).toContain(`00-${calls[0]!.spanContext().traceId}-${calls[0]!.spanContext().spanId}-01`);
    } finally {
      await client.close();
    }
  });

  it('sends the client’s and the call’s headers', async () => {
    const client = await Client.connect(targets()[protocol], { headers: { 'x-team': 'search' } });
    try {
      seen.length = 0;
      await client.model('identity_fp32').infer({ inputs: small, headers: { 'x-request': 'r1' } });
      await client.metadata({ headers: { 'x-request': 'r2' } });
      const sent = seen.filter((call) => call.headers['x-request'] !== undefined).map((call) => [call.headers['x-team'], call.headers['x-request']]);
      expect(sent).toEqual([['search', 'r1'], ['search', 'r2']]);
      const bad = await rejection(client.metadata({ headers: { 'bad header': 'x' } }));
      expect(bad.code).toBe('INVALID_ARG');
      // A value that would break the header line, and option keys no method knows, are refused before anything is sent.
      const split = await rejection(client.model('identity_fp32').infer({ inputs: small, headers: { 'x-request': 'a\r\nx-evil: 1' } }));
      expect(split.code).toBe('INVALID_ARG');
      expect(split.message).toContain('request.headers["x-request"]');
      const unknown = await rejection(client.live({ timeout: 5 } as never));
      expect(unknown.code).toBe('INVALID_ARG');
      expect(unknown.message).toContain('timeout');
      expect(client.healthyEndpoints).toEqual([targets()[protocol]]);
    } finally {
      await client.close();
    }
  });

  it('reaches every address of a dns:/// name', async () => {
    const port = protocol === 'grpc' ? frontends.grpc!.port : frontends.http!.port;
    const client = await Client.connect(`dns:///localhost:${port}`, { protocol, connectTimeoutMs: 3000 });
    try {
      const response = await client.model('identity_fp32').infer({ inputs: small });
      expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([1, 2]);
      expect(client.protocol).toBe(protocol);
      // One endpoint per address the name resolved to.
      const scheme = protocol === 'grpc' ? 'grpc' : 'http';
      expect(client.endpoints.length).toBeGreaterThan(0);
      for (const endpoint of client.endpoints) expect(endpoint).toMatch(new RegExp(`^${scheme}://(127\\.0\\.0\\.1|\\[::1\\]):${port}$`));
    } finally {
      await client.close();
    }
  });
});

describe.each(['native', 'js'] as const)('gzip (%s transport)', (transport) => {
  it('gRPC: request messages go gzip-compressed (bytes counted on the wire)', async () => {
    // A TCP pass-through to serveKServe's gRPC port that counts what the client sends.
    let sent = 0;
    const proxy = createNetServer((socket) => {
      const upstream = connect(frontends.grpc!.port, '127.0.0.1');
      socket.on('data', (chunk: Buffer) => (sent += chunk.length));
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done));
    const through = `grpc://127.0.0.1:${(proxy.address() as { port: number }).port}`;
    const data = new Float32Array(16384).fill(3);
    const measure = async (compression: 'gzip' | 'none'): Promise<number> => {
      const client = await Client.connect(through, { compression, transport });
      try {
        expect(client.transport).toBe(transport);
        await client.model('identity_fp32').infer({ inputs: small });
        const before = sent;
        const response = await client.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 16384], data } } });
        expect((response.outputs.OUTPUT0!.data as Float32Array).every((v) => v === 3)).toBe(true);
        return sent - before;
      } finally {
        await client.close();
      }
    };
    try {
      expect(await measure('none')).toBeGreaterThan(65536);
      expect(await measure('gzip')).toBeLessThan(65536 / 10);
    } finally {
      proxy.close();
    }
  });

  it('HTTP: request bodies go with Content-Encoding: gzip, gzip responses are read', async () => {
    // A gzip-speaking proxy in front of serveKServe (whose HTTP front end does not decompress):
    // what it records is what the client sent.
    const recorded: Array<{ path: string | undefined; encoding: string | undefined; accept: string | undefined; bytes: number }> = [];
    const proxy: HttpServer = createServer((req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        recorded.push({ path: req.url, encoding: req.headers['content-encoding'], accept: req.headers['accept-encoding'], bytes: raw.length });
        const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
        const headers = { ...req.headers, 'content-length': String(body.length) };
        delete headers['content-encoding'];
        delete headers['accept-encoding'];
        const upstream = httpRequest({ host: '127.0.0.1', port: frontends.http!.port, path: req.url, method: req.method, headers }, (answer) => {
          const parts: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => parts.push(chunk));
          answer.on('end', () => {
            const plain = Buffer.concat(parts);
            const zipped = req.headers['accept-encoding']?.includes('gzip') ? gzipSync(plain) : plain;
            const out = { ...answer.headers, 'content-length': String(zipped.length) } as Record<string, string | string[] | undefined>;
            if (zipped !== plain) out['content-encoding'] = 'gzip';
            res.writeHead(answer.statusCode ?? 500, out).end(zipped);
          });
        });
        upstream.on('error', () => res.destroy());
        upstream.end(body);
      });
    });
    await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done));
    const client = await Client.connect(`http://127.0.0.1:${(proxy.address() as { port: number }).port}`, { compression: 'gzip', transport });
    try {
      const data = new Float32Array(4096).fill(5);
      const response = await client.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 4096], data } } });
      expect((response.outputs.OUTPUT0!.data as Float32Array).every((v) => v === 5)).toBe(true);
      const infer = recorded.find((r) => r.encoding === 'gzip')!;
      expect(infer.accept).toContain('gzip');
      expect(infer.bytes).toBeLessThan(4096 * 4 / 10); // 16 KiB of one value compress well
      const failed = await rejection(client.model('no_such_model').infer({ inputs: small }));
      expect(failed.code).toBe('NOT_FOUND');
      // Only inference bodies: Triton's repository routes refuse a compressed one.
      await client.loadModel('no_such_model', { config: { max_batch_size: 0 } }).catch(() => undefined);
      const load = recorded.find((r) => r.path?.endsWith('/load'));
      expect(load?.bytes).toBeGreaterThan(0);
      expect(load?.encoding).toBeUndefined();
    } finally {
      await client.close();
      proxy.close();
    }
  });
});

/** A client of `first` and serveKServe's HTTP endpoint, once both are in its pool. */
async function twoEndpoints(first: string, inference: boolean): Promise<Client> {
  const client = await Client.connect([first, targets().http], { retry: { inference, backoffMs: 1 }, healthCheckIntervalMs: 5 });
  while (client.healthyEndpoints.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
  return client;
}

describe('retries', () => {
  it('repeat calls that a server answers UNAVAILABLE (stopping) on another endpoint; inferences only when asked', async () => {
    // An endpoint that is live but answers every other route 503, as a server that is stopping does.
    const stopping = createServer((req, res) => {
      req.resume();
      if (req.url === '/v2/health/live') res.writeHead(200, { 'content-length': '0' }).end();
      else res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'the server is stopping' }));
    });
    await new Promise<void>((done) => stopping.listen(0, '127.0.0.1', done));
    const down = `http://127.0.0.1:${(stopping.address() as { port: number }).port}`;
    const plain = await twoEndpoints(down, false);
    const opted = await twoEndpoints(down, true);
    try {
      const metadata = await Promise.all(Array.from({ length: 8 }, () => plain.metadata()));
      expect(metadata.every((m) => m.name === 'triton')).toBe(true);
      // Answering 503 does not take an endpoint out of the pool (only a failed connection does).
      expect(plain.healthyEndpoints).toEqual([down, targets().http]);
      const load = (client: Client) => Promise.allSettled(Array.from({ length: 8 }, () => client.model('identity_fp32').infer({ inputs: small })));
      expect((await load(opted)).every((r) => r.status === 'fulfilled')).toBe(true);
      const unasked = (await load(plain)).filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as { code: string; message: string });
      expect(unasked.length).toBeGreaterThan(0);
      for (const failure of unasked) {
        expect(failure.code).toBe('UNAVAILABLE');
        expect(failure.message).toBe(`the server is stopping (${down})`);
      }
    } finally {
      await plain.close();
      await opted.close();
      stopping.close();
    }
  });

  it('repeat an inference whose connection dropped on another endpoint only when asked, never a sequence request', async () => {
    // An endpoint that answers every GET (health, metadata: passed on to serveKServe) but drops
    // each inference's connection: the request was sent, its fate unknown.
    const upstream = frontends.http!.port;
    const dropping = createServer((req, res) => {
      req.socket.on('error', () => undefined);
      if (req.method === 'POST') {
        req.socket.destroy();
        return;
      }
      const forward = httpRequest({ host: '127.0.0.1', port: upstream, path: req.url, method: 'GET', headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 500, answer.headers);
        answer.pipe(res);
      });
      forward.on('error', () => res.destroy());
      forward.end();
    });
    await new Promise<void>((done) => dropping.listen(0, '127.0.0.1', done));
    const drop = `http://127.0.0.1:${(dropping.address() as { port: number }).port}`;
    const load = (client: Client, sequence: boolean) =>
      Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => client.model('identity_fp32').infer({ inputs: small, ...(sequence ? { sequence: { id: i + 1, start: true } } : {}) })),
      );
    const failures = (results: PromiseSettledResult<unknown>[]) =>
      results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as { code: string; endpoint?: string });
    const plain = await twoEndpoints(drop, false);
    const opted = await twoEndpoints(drop, true);
    try {
      const metrics = opted.packageMetrics();
      await opted.model('identity_fp32').metadata();
      expect(failures(await load(opted, false))).toEqual([]);
      expect(metrics.text()).toMatch(new RegExp(`tritonserver_node_client_retries_total\\{endpoint="${drop}"\\} [1-9]`));
      while (opted.healthyEndpoints.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
      const sequenced = failures(await load(opted, true));
      expect(sequenced.length).toBeGreaterThan(0);
      for (const failure of sequenced) expect(failure).toMatchObject({ code: 'UNAVAILABLE', endpoint: drop });
      await plain.model('identity_fp32').metadata();
      const unasked = failures(await load(plain, false));
      expect(unasked.length).toBeGreaterThan(0);
      for (const failure of unasked) expect(failure).toMatchObject({ code: 'UNAVAILABLE', endpoint: drop });
    } finally {
      await plain.close();
      await opted.close();
      dropping.close();
    }
  });
});

describe('shared memory over the remote client', () => {
  it('refuses shared memory inputs and outputs, which only the in-process server reads and writes', async () => {
    const client = await Client.connect(targets().grpc);
    try {
      const model = client.model('identity_fp32');
      const input = await rejection(
        model.infer({ inputs: { INPUT0: { datatype: 'FP32', shape: [1, 2], sharedMemory: { region: 'r', byteSize: 8 } } } }),
      );
      expect(input).toMatchObject({ code: 'INVALID_ARG' });
      expect(input.message).toContain('shared memory inputs are read by the in-process server only');
      const output = await rejection(
        model.infer({ inputs: small, outputs: { OUTPUT0: { sharedMemory: { region: 'r', byteSize: 8 } } } }),
      );
      expect(output).toMatchObject({ code: 'INVALID_ARG', message: 'request.outputs.OUTPUT0: shared memory outputs are written by the in-process server only (server.sharedMemory)' });
    } finally {
      await client.close();
    }
  });
});

describe('a gRPC server that sends what cannot be read', () => {
  it('ends the call INTERNAL at once when a compressed message does not inflate, though the server keeps the stream open', async () => {
    const { loadInferenceMessages } = await import('../lib/kserve/proto.js');
    const messages = await loadInferenceMessages('test');
    const h2 = (await import('node:http2')).createServer();
    h2.on('stream', (stream, headers) => {
      const method = String(headers[':path']).split('/').pop() as string;
      stream.on('data', () => {});
      stream.on('end', () => {
        if (method !== 'ServerMetadata') {
          // Health checks and the rest: a proper answer.
          const body = messages[method]!.responseSerialize(method === 'ServerReady' ? { ready: true } : { live: true });
          const frame = Buffer.alloc(5 + body.length);
          frame.writeUInt32BE(body.length, 1);
          body.copy(frame, 5);
          stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
          stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
          stream.end(frame);
          return;
        }
        const corrupt = Buffer.from('not gzip at all');
        const frame = Buffer.alloc(5 + corrupt.length);
        frame[0] = 1;
        frame.writeUInt32BE(corrupt.length, 1);
        corrupt.copy(frame, 5);
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-encoding': 'gzip' });
        stream.write(frame); // and never a status
      });
    });
    await new Promise<void>((done) => h2.listen(0, '127.0.0.1', done));
    const client = await Client.connect(`grpc://127.0.0.1:${(h2.address() as { port: number }).port}`, { retry: { attempts: 1 } });
    try {
      const error = await rejection(client.metadata());
      expect(error.code).toBe('INTERNAL');
      expect(error.message).toContain('could not read a compressed message');
    } finally {
      await client.close();
      await new Promise<void>((done) => h2.close(() => done()));
    }
  });
});
