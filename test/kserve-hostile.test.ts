/**
 * The KServe front ends against a hostile client (docs/security.md): every
 * byte read from the network has a budget, answers reach the client, and
 * both engines behave alike. Each case is one a client library would never
 * send; where the engines' answers are compared, the `node` engine's is
 * the reference.
 */
import http2 from 'node:http2';
import { connect, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../lib/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { encodeModelInferRequest, type WireInferRequest } from '../lib/kserve/infer-wire.js';
import { expectNoRequestsLive, startServer } from './helpers.js';
import {
  ERROR_CODE,
  errorCodeOf,
  FLAG,
  FRAME,
  frame,
  grpcMessage,
  grpcRequestHeaders,
  hpackIndexed,
  hpackLiteral,
  RawH2,
  SETTING,
} from './h2-frames.js';

const ENGINES = ['native', 'node'] as const;
type Engine = (typeof ENGINES)[number];
const MODEL_INFER = '/inference.GRPCInferenceService/ModelInfer';
const SERVER_LIVE = '/inference.GRPCInferenceService/ServerLive';

let server: Server;
const frontends = new Map<Engine, KServeFrontends>();
const opened: KServeFrontends[] = [];

beforeAll(async () => {
  server = await startServer({ startupModels: ['identity_fp32', 'identity_int8', 'identity_bytes', 'slow'] });
  for (const engine of ENGINES) frontends.set(engine, await serveKServe(server, { http: { port: 0, engine }, grpc: { port: 0, engine } }));
});

afterAll(async () => {
  await Promise.all([...frontends.values(), ...opened].map((f) => f.close()));
  await server?.stop();
});

/** Front ends of their own, with options; closed after the file. */
async function serve(options: Parameters<typeof serveKServe>[1]): Promise<KServeFrontends> {
  const made = await serveKServe(server, options);
  opened.push(made);
  return made;
}

function httpPort(engine: Engine): number {
  return frontends.get(engine)?.http?.port ?? 0;
}

function grpcPort(engine: Engine): number {
  return frontends.get(engine)?.grpc?.port ?? 0;
}

async function open(port: number, allowHalfOpen = false): Promise<Socket> {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  return socket;
}

/** Everything the server sends until it closes (or `timeoutMs`), and whether the socket saw an error. */
function drained(socket: Socket, timeoutMs = 10_000): Promise<{ text: string; error: Error | undefined; closed: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: Error | undefined;
    const timer = setTimeout(() => finish(false), timeoutMs);
    const finish = (closed: boolean): void => {
      clearTimeout(timer);
      resolve({ text: Buffer.concat(chunks).toString('latin1'), error, closed });
    };
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (e) => (error = e));
    socket.once('close', () => finish(true));
  });
}

/** An HTTP/1.1 binary inference request for identity_fp32 with the given JSON header (its tensors' bytes after it). */
function httpInfer(header: string, binary: Buffer = Buffer.alloc(0)): Buffer {
  const body = Buffer.concat([Buffer.from(header), binary]);
  return Buffer.concat([
    Buffer.from(
      `POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: test\r\nInference-Header-Content-Length: ${Buffer.byteLength(header)}\r\nContent-Length: ${body.length}\r\n\r\n`,
    ),
    body,
  ]);
}

/** One HTTP/1.1 exchange over a connection of its own: the status and the body (Content-Length framed). */
async function exchange(port: number, request: Buffer): Promise<{ status: number; body: string }> {
  const socket = await open(port);
  try {
    return await new Promise((resolve, reject) => {
      let received = Buffer.alloc(0);
      const chunks: Buffer[] = [];
      let size = 0;
      let needed = Infinity;
      socket.on('data', (chunk: Buffer) => {
        // Joined only when the answer may be whole: a large answer is not copied once per chunk.
        chunks.push(chunk);
        size += chunk.length;
        if (size < needed && needed !== Infinity) return;
        received = Buffer.concat(chunks);
        chunks.splice(0, chunks.length, received);
        const end = received.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = received.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        needed = end + 4 + length;
        if (received.length < needed) return;
        resolve({ status: Number(head.slice(9, 12)), body: received.subarray(end + 4, needed).toString('latin1') });
      });
      socket.once('error', reject);
      socket.once('close', () => reject(new Error(`the connection closed before an answer: ${received.toString('latin1')}`)));
      socket.write(request);
    });
  } finally {
    socket.destroy();
  }
}

const f32 = (values: number[]): Buffer => Buffer.from(new Float32Array(values).buffer);

describe.each(ENGINES)('HTTP, %s engine', (engine) => {
  it('stops reading pipelined requests it has not answered: a flood is held back by TCP', async () => {
    const socket = await open(httpPort(engine));
    socket.pause(); // the flood's answers are never read
    const request = 'GET /v2/health/live HTTP/1.1\r\nHost: test\r\n\r\n';
    const chunk = Buffer.from(request.repeat(Math.floor(65536 / request.length)));
    let accepted = 0;
    const deadline = Date.now() + 3000;
    // Writes as fast as the server takes them, for 3 s or until 64 MiB went in.
    while (Date.now() < deadline && accepted < 64 * 1024 * 1024) {
      const more = socket.write(chunk, () => (accepted += chunk.length));
      if (!more) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), new Promise((resolve) => setTimeout(resolve, 200))]);
    }
    // Kernel buffers hold a few MiB; before this bound the native engine read the whole flood (about 56 MB/s).
    expect(accepted).toBeLessThan(24 * 1024 * 1024);
    // The server still answers, the flooding connection first in order, and others.
    const first = await new Promise<string>((resolve) => {
      socket.once('data', (data: Buffer) => resolve(data.toString('latin1')));
      socket.resume();
    });
    expect(first.startsWith('HTTP/1.1 200 OK')).toBe(true);
    socket.destroy();
    expect((await exchange(httpPort(engine), Buffer.from('GET /v2/health/live HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n'))).status).toBe(200);
  });

  it('answers bytes that cannot begin an HTTP request at once (400), not after headersTimeoutMs', async () => {
    const patient = await serve({ http: { port: 0, engine, headersTimeoutMs: 120_000, requestTimeoutMs: 120_000 } });
    const socket = await open(patient.http?.port ?? 0);
    const answer = drained(socket, 20_000);
    // A TLS ClientHello's first bytes, to a plain listener; no blank line ever follows.
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]));
    const { text, closed } = await answer;
    expect(closed).toBe(true);
    expect(text.startsWith('HTTP/1.1 400 Bad Request')).toBe(true);
  });

  it('keeps the connection of a body refused before its end (it inflates past maxBodyBytes), and answers the next request', async () => {
    const limited = await serve({ http: { port: 0, engine }, maxBodyBytes: 1024 * 1024 });
    const socket = await open(limited.http?.port ?? 0);
    const answers = drained(socket, 20_000);
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
    socket.write(`POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: test\r\nContent-Encoding: gzip\r\nContent-Length: ${bomb.length}\r\n\r\n`);
    socket.write(bomb.subarray(0, bomb.length >> 1));
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.write(bomb.subarray(bomb.length >> 1));
    socket.write('GET /v2/health/live HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n');
    const { text, error } = await answers;
    expect(error).toBeUndefined();
    expect(text.startsWith('HTTP/1.1 400 Bad Request')).toBe(true);
    expect(text).toContain('exceeds the maximum allowed input size of 1048576 bytes');
    expect(text.split('HTTP/1.1 ').length - 1).toBe(2);
    expect(text).toMatch(/HTTP\/1\.1 200 OK[\s\S]*$/);
  });

  it('hands a method Node does not know to Node at once (400), not after its body', async () => {
    const socket = await open(httpPort(engine));
    const answer = drained(socket, 20_000);
    // A Content-Length whose body never comes: only the method says it is not a request.
    socket.write('QOST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: test\r\nContent-Length: 189\r\n\r\n');
    const { text, closed } = await answer;
    expect(closed).toBe(true);
    expect(text.startsWith('HTTP/1.1 400 Bad Request')).toBe(true);
  });

  it('answers an HTTP/1.1 request without Host 400, as Node does', async () => {
    const header = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], parameters: { binary_data_size: 4 } }], parameters: { binary_data_output: true } });
    const withHost = httpInfer(header, f32([1]));
    const withoutHost = Buffer.from(withHost.toString('latin1').replace('Host: test\r\n', ''), 'latin1');
    expect((await exchange(httpPort(engine), withHost)).status).toBe(200);
    expect((await exchange(httpPort(engine), withoutHost)).status).toBe(400);
  });

  it('checks a shape’s element count before it overflows ([2^32, 2^32] is not zero bytes)', async () => {
    const header = JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [4294967296, 4294967296], parameters: { binary_data_size: 0 } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    });
    const before = frontends.get(engine)?.http?.answeredNatively ?? 0;
    const mine = await exchange(httpPort(engine), httpInfer(header));
    const reference = await exchange(httpPort('node'), httpInfer(header));
    expect(mine).toEqual(reference);
    expect(mine.status).toBe(400);
    expect(frontends.get(engine)?.http?.answeredNatively ?? 0).toBe(before);
  });
});

describe.each(ENGINES)('HTTP JSON whose structure would cost more than its bytes, %s engine', (engine) => {
  // Each was parsed whole before: 8 MiB cost 240 to 350 MB and most of a second of the JS thread.
  const MiB = 1024 * 1024;
  const zeros = (count: number): string => `0${',0'.repeat(count - 1)}`;
  const cases: Array<[string, () => Buffer, string]> = [
    [
      'an 8 MiB JSON header of "shape":[0,0,…]',
      () =>
        httpInfer(
          `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[${zeros(4 * MiB)}],"parameters":{"binary_data_size":0}}],"outputs":[{"name":"OUTPUT0"}]}`,
        ),
      '{"error":"failed to parse the request JSON buffer: more than 65536 values outside tensor data"}',
    ],
    [
      'an 8 MiB JSON body whose data far exceeds its shape [1]',
      () => {
        const body = `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[${zeros(4 * MiB)}]}]}`;
        return Buffer.from(`POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: test\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      },
      `{"error":"unable to parse 'data' of input 'INPUT0': expected 1 elements for shape [1], got ${4 * MiB}"}`,
    ],
    [
      'a model load whose config is 8 MiB of "dims":[1,1,…]',
      () => {
        const body = JSON.stringify({ parameters: { config: `{"input":[{"name":"X","data_type":"TYPE_FP32","dims":[${zeros(4 * MiB).replaceAll('0', '1')}]}]}` } });
        return Buffer.from(`POST /v2/repository/models/identity_fp32/load HTTP/1.1\r\nHost: test\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      },
      `{"error":"failed to parse the 'config' of model 'identity_fp32': more than 65536 values outside tensor data"}`,
    ],
  ];
  let control: KServeFrontends;
  beforeAll(async () => {
    control = await serve({ http: { port: 0, engine }, repositoryControl: true });
  });
  it.each(cases)('refuses %s before building it (400), at a bounded cost', async (_, request, expected) => {
    const bytes = request();
    const before = process.memoryUsage.rss();
    const answer = await exchange(control.http?.port ?? 0, bytes);
    expect(answer).toEqual({ status: 400, body: expected });
    // The request itself is 8 MiB, held a few times over (received, as text for the answer's JSON).
    expect(process.memoryUsage.rss() - before).toBeLessThan(100 * MiB);
  });

  it('reads a large JSON tensor whose data matches its shape', async () => {
    const values = Array.from({ length: 50_000 }, (_, i) => (i % 1000) / 8);
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, values.length], data: values }], outputs: [{ name: 'OUTPUT0' }] });
    const answer = await exchange(httpPort(engine), Buffer.from(`POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: test\r\nContent-Length: ${body.length}\r\n\r\n${body}`));
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body) as { outputs: Array<{ data: number[] }> }).outputs[0]!.data).toEqual(values);
  });
});

describe.each(ENGINES)('BYTES tensors of many small elements, %s engine', (engine) => {
  // An object per element before (a view of each, twice: in and out): 2 M empty elements, 8 MiB, cost 250 to 550 MB.
  const count = 2 * 1024 * 1024;
  const wire = Buffer.alloc(4 * count); // every element empty: a zero length each

  it('keeps a binary BYTES input in its wire form (HTTP)', async () => {
    const header = JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, count], parameters: { binary_data_size: wire.length } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    });
    const body = Buffer.concat([Buffer.from(header), wire]);
    const request = Buffer.concat([
      Buffer.from(`POST /v2/models/identity_bytes/infer HTTP/1.1\r\nHost: test\r\nInference-Header-Content-Length: ${header.length}\r\nContent-Length: ${body.length}\r\n\r\n`),
      body,
    ]);
    const before = process.memoryUsage.rss();
    const answer = await exchange(httpPort(engine), request);
    expect(answer.status).toBe(200);
    const out = Buffer.from(answer.body, 'latin1');
    const headerLength = out.length - wire.length;
    expect(JSON.parse(out.subarray(0, headerLength).toString())).toMatchObject({
      outputs: [{ name: 'OUTPUT0', datatype: 'BYTES', shape: [1, count], parameters: { binary_data_size: wire.length } }],
    });
    expect(out.subarray(headerLength).equals(wire)).toBe(true);
    // The request and the answer are 8 MiB each, held a few times over on their way (the input and output copied by Triton).
    expect(process.memoryUsage.rss() - before).toBeLessThan(128 * 1024 * 1024);
  });

  it('writes gRPC bytes_contents into the wire form without an object per element', async () => {
    const elements = 1024 * 1024;
    const contents = Buffer.alloc(2 * elements, Buffer.from([0x42, 0x00])); // bytes_contents (8), empty
    const input = Buffer.concat([field(0x0a, Buffer.from('INPUT0')), field(0x12, Buffer.from('BYTES')), field(0x1a, Buffer.from([1, 0x80, 0x80, 0x40])), field(0x2a, contents)]);
    const before = process.memoryUsage.rss();
    const answer = await grpcCall(grpcPort(engine), grpcMessage(Buffer.concat([field(0x0a, Buffer.from('identity_bytes')), field(0x2a, input)])));
    expect(statusOf(answer)).toBe('0');
    expect(answer.data.subarray(answer.data.length - 4 * elements).equals(Buffer.alloc(4 * elements))).toBe(true);
    expect(process.memoryUsage.rss() - before).toBeLessThan(100 * 1024 * 1024);
  });
});

describe('HTTP, native engine only', () => {
  it('reads no JSON inference header past 64 KiB itself: JS answers it, as the node engine does', async () => {
    const values = [1, 2.5, -3];
    const tensor = { name: 'INPUT0', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } };
    const output = [{ name: 'OUTPUT0', parameters: { binary_data: true } }];
    const native = frontends.get('native')?.http;
    const small = JSON.stringify({ inputs: [tensor], outputs: output });
    const before = native?.answeredNatively ?? 0;
    const plain = await exchange(httpPort('native'), httpInfer(small, f32(values)));
    expect(plain.status).toBe(200);
    expect(native?.answeredNatively).toBe(before + 1);
    // The same request with 64 KiB of JSON whitespace in its header.
    const padded = `{"inputs":[${JSON.stringify(tensor)}],${' '.repeat(64 * 1024)}"outputs":${JSON.stringify(output)}}`;
    const answer = await exchange(httpPort('native'), httpInfer(padded, f32(values)));
    expect(answer.status).toBe(200);
    expect(Buffer.from(answer.body, 'latin1').subarray(-12).equals(f32(values))).toBe(true);
    expect(native?.answeredNatively).toBe(before + 1);
    // A shape of 100,000 dimensions: the node engine's answer, not a parse tree on the native loop.
    const wide = JSON.stringify({ inputs: [{ ...tensor, shape: new Array<number>(100_000).fill(0) }], outputs: output });
    expect(await exchange(httpPort('native'), httpInfer(wide, f32(values)))).toEqual(await exchange(httpPort('node'), httpInfer(wide, f32(values))));
    expect(native?.answeredNatively).toBe(before + 1);
  });

  it('reads on, half-closed, after answering a body declared past maxBodyBytes, so that the answer arrives', async () => {
    const limited = await serve({ http: { port: 0, engine: 'native' }, maxBodyBytes: 1024 * 1024 });
    // Half-open: the server's FIN does not end the client's sending.
    const socket = await open(limited.http?.port ?? 0, true);
    const answer = drained(socket, 20_000);
    socket.write(`POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: test\r\nContent-Length: ${8 * 1024 * 1024}\r\n\r\n`);
    // The client goes on sending after the answer came: without a lingering close its writes meet a reset.
    let got = '';
    socket.on('data', (chunk: Buffer) => (got += chunk.toString('latin1')));
    const piece = Buffer.alloc(64 * 1024);
    for (let sent = 0; sent < 4 * 1024 * 1024 && !socket.destroyed; sent += piece.length) {
      socket.write(piece);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(got.startsWith('HTTP/1.1 400 Bad Request')).toBe(true);
    socket.end();
    const { text, error, closed } = await answer;
    expect(error).toBeUndefined();
    expect(closed).toBe(true);
    expect(text.startsWith('HTTP/1.1 400 Bad Request')).toBe(true);
    expect(text).toContain('exceeds the maximum allowed input size of 1048576 bytes');
  });
});

/** A ModelInfer message for identity_fp32. */
function inferMessage(request: Partial<WireInferRequest>): Buffer {
  return encodeModelInferRequest({
    model_name: 'identity_fp32',
    model_version: '',
    id: '',
    parameters: {},
    outputs: [],
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], bytes: f32([1, 2]) }],
    ...request,
  });
}

/** The message with the bytes of its id 'id-marker' made invalid UTF-8 (two bytes 0xff 0xfe inside it). */
function notUtf8Id(message: Buffer): Buffer {
  const at = message.indexOf('id-marker');
  const out = Buffer.from(message);
  out[at + 2] = 0xff;
  out[at + 3] = 0xfe;
  return out;
}

interface CallAnswer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  data: Buffer;
}

/** One ModelInfer call with `body` as its DATA (a framed message, or not). */
async function grpcCall(port: number, body: Buffer, headers: http2.OutgoingHttpHeaders = {}): Promise<CallAnswer> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined);
  try {
    const stream = session.request({ ':method': 'POST', ':path': MODEL_INFER, 'content-type': 'application/grpc', te: 'trailers', ...headers });
    stream.end(body);
    return await new Promise<CallAnswer>((resolve, reject) => {
      let headers: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on('response', (h) => (headers = h));
      stream.on('trailers', (t) => (trailers = t));
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', reject);
      stream.on('close', () => resolve({ headers, trailers, data: Buffer.concat(chunks) }));
    });
  } finally {
    session.close();
  }
}

const statusOf = (answer: CallAnswer): unknown => answer.trailers['grpc-status'] ?? answer.headers['grpc-status'];
const messageOf = (answer: CallAnswer): unknown => answer.trailers['grpc-message'] ?? answer.headers['grpc-message'];

/** A ModelInfer call's frames on `stream`: its headers, then its message in DATA frames of 16 KiB at most. */
function callFrames(stream: number, message: Buffer, path = MODEL_INFER): Buffer[] {
  const body = grpcMessage(message);
  const frames = [frame(FRAME.headers, FLAG.endHeaders, stream, grpcRequestHeaders(path))];
  for (let at = 0; at < body.length; at += 16384) {
    const piece = body.subarray(at, at + 16384);
    frames.push(frame(FRAME.data, at + 16384 >= body.length ? FLAG.endStream : 0, stream, piece));
  }
  return frames;
}

describe.each(ENGINES)('gRPC, %s engine', (engine) => {
  it('advertises its limits in SETTINGS: concurrent streams and the header list size', async () => {
    const raw = await RawH2.open(grpcPort(engine));
    try {
      const settings = await raw.waitFor((f) => f.type === FRAME.settings && (f.flags & FLAG.ack) === 0, 'SETTINGS');
      const entries = new Map<number, number>();
      for (let at = 0; at + 6 <= settings.payload.length; at += 6) entries.set(settings.payload.readUInt16BE(at), settings.payload.readUInt32BE(at + 2));
      expect(entries.get(SETTING.maxConcurrentStreams)).toBe(1000);
      expect(entries.get(SETTING.maxHeaderListSize)).toBe(16 * 1024);
    } finally {
      raw.close();
    }
  });

  it('resets a call whose headers decode past the limit (an HPACK bomb), and serves the connection on', async () => {
    const raw = await RawH2.open(grpcPort(engine));
    try {
      // One 4,000-byte header put in the table, then referred to 11,000 times by one byte each (44 MB decoded).
      const bomb = Buffer.concat([grpcRequestHeaders(MODEL_INFER), hpackLiteral('x-bomb', 'a'.repeat(4000), true), Buffer.alloc(11_000, hpackIndexed(62))]);
      expect(bomb.length).toBeLessThanOrEqual(16384);
      raw.send(frame(FRAME.headers, FLAG.endHeaders, 1, bomb));
      const reset = await raw.waitFor((f) => f.type === FRAME.rstStream && f.stream === 1, 'RST_STREAM of stream 1');
      expect(errorCodeOf(reset)).toBe(ERROR_CODE.enhanceYourCalm);
      raw.send(...callFrames(3, Buffer.alloc(0), SERVER_LIVE));
      await raw.waitFor((f) => f.type === FRAME.headers && f.stream === 3, 'an answer on stream 3');
    } finally {
      raw.close();
    }
  });

  it('refuses streams past maxConcurrentStreams (REFUSED_STREAM)', async () => {
    const limited = await serve({ grpc: { port: 0, engine, maxConcurrentStreams: 4 } });
    const raw = await RawH2.open(limited.grpc?.port ?? 0);
    try {
      await raw.waitFor((f) => f.type === FRAME.settings && (f.flags & FLAG.ack) !== 0, 'the SETTINGS ack');
      // Five calls opened, none ended: the fifth is one too many.
      for (const stream of [1, 3, 5, 7, 9]) raw.send(frame(FRAME.headers, FLAG.endHeaders, stream, grpcRequestHeaders(MODEL_INFER)));
      // nghttp2 (both engines') ends the connection for it once the limit was acknowledged.
      const refusal = await raw.waitFor((f) => (f.type === FRAME.rstStream && f.stream === 9) || f.type === FRAME.goaway, 'a refusal');
      if (refusal.type === FRAME.rstStream) expect(errorCodeOf(refusal)).toBe(ERROR_CODE.refusedStream);
      else expect(refusal.payload.readUInt32BE(0) & 0x7fffffff).toBeLessThan(9);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(raw.frames.some((f) => f.stream === 9 && f.type === FRAME.headers)).toBe(false);
    } finally {
      raw.close();
    }
  });

  it('takes no new call while its client leaves more than maxConnectionBytes of answers unread', async () => {
    const limited = await serve({ grpc: { port: 0, engine, maxConnectionBytes: 1024 * 1024 } });
    // A window of 0: no answer's DATA can be sent.
    const raw = await RawH2.open(limited.grpc?.port ?? 0, [[SETTING.initialWindowSize, 0]]);
    try {
      await raw.waitFor((f) => f.type === FRAME.windowUpdate && f.stream === 0, "the server's connection window");
      const message = inferMessage({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16384], bytes: Buffer.alloc(65536) }] });
      const outcomes: string[] = [];
      for (let i = 0; i < 32; i++) {
        const stream = 2 * i + 1;
        raw.send(...callFrames(stream, message));
        const first = await raw.waitFor((f) => f.stream === stream && (f.type === FRAME.headers || f.type === FRAME.rstStream), `an answer on stream ${stream}`);
        outcomes.push(first.type === FRAME.headers ? 'answered' : `reset ${errorCodeOf(first)}`);
      }
      const answered = outcomes.filter((o) => o === 'answered').length;
      // 1 MiB holds 16 answers of 64 KiB; later calls are refused until the client reads.
      expect(answered).toBeGreaterThanOrEqual(8);
      expect(answered).toBeLessThanOrEqual(17);
      expect(outcomes.slice(answered)).toEqual(new Array(32 - answered).fill(`reset ${ERROR_CODE.enhanceYourCalm}`));
    } finally {
      raw.close();
    }
    await expectNoRequestsLive();
  });

  it('ends a call whose message has a compressed flag other than 0 or 1 (INTERNAL)', async () => {
    const answer = await grpcCall(grpcPort(engine), grpcMessage(inferMessage({}), 2));
    expect(statusOf(answer)).toBe('13');
    expect(messageOf(answer)).toContain('compressed flag is 2');
    expect(answer.data.length).toBe(0);
  });

  it('takes a deadline past setTimeout’s range as none (600 hours)', async () => {
    const slow = encodeModelInferRequest({
      model_name: 'slow',
      model_version: '',
      id: '',
      parameters: {},
      outputs: [],
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1], bytes: f32([7]) },
        { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], bytes: Buffer.from(new Uint32Array([200]).buffer) },
      ],
    });
    const answer = await grpcCall(grpcPort(engine), grpcMessage(slow), { 'grpc-timeout': '600H' });
    expect(statusOf(answer)).toBe('0');
    expect(answer.data.subarray(-4).equals(f32([7]))).toBe(true);
  });

  it('answers as the node engine does: a request id that is not UTF-8, names with a NUL, a shape that overflows', async () => {
    for (const message of [
      notUtf8Id(inferMessage({ id: 'id-marker' })),
      inferMessage({ model_name: 'identity_fp32\u0000x' }),
      inferMessage({ id: 'a\u0000b' }),
      inferMessage({ inputs: [{ name: 'INPUT0\u0000', datatype: 'FP32', shape: [1, 2], bytes: f32([1, 2]) }] }),
      inferMessage({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [4294967296, 4294967296], bytes: Buffer.alloc(0) }] }),
    ]) {
      const mine = await grpcCall(grpcPort(engine), grpcMessage(message));
      const reference = await grpcCall(grpcPort('node'), grpcMessage(message));
      expect(statusOf(mine)).toBe(statusOf(reference));
      expect(messageOf(mine)).toBe(messageOf(reference));
      expect(mine.data.equals(reference.data)).toBe(true);
    }
  });
});

/** A length-delimited protobuf field: its tag, its length as a varint, its bytes. */
function field(tag: number, bytes: Buffer): Buffer {
  const length: number[] = [];
  for (let n = bytes.length; ; n = Math.floor(n / 128)) {
    length.push(n >= 128 ? (n % 128) | 0x80 : n);
    if (n < 128) break;
  }
  return Buffer.concat([Buffer.from([tag, ...length]), bytes]);
}

const MODEL_NAME = field(0x0a, Buffer.from('identity_fp32'));
const MiB = 1024 * 1024;

describe.each(ENGINES)('gRPC messages whose structure would cost more than their bytes, %s engine', (engine) => {
  // Each case was 0.6 to 1.6 GB of JS objects before (a 16 MiB message), answered after seconds of the JS thread.
  const cases: Array<[string, () => Buffer, RegExp]> = [
    [
      '8 M empty raw_input_contents',
      () => Buffer.concat([MODEL_NAME, Buffer.alloc(16 * MiB, Buffer.from([0x3a, 0x00]))]),
      /^failed to parse the ModelInferRequest message: more than 65536 inputs, outputs, raw contents, dimensions and parameters in one request$/,
    ],
    [
      '8 M empty inputs',
      () => Buffer.concat([MODEL_NAME, Buffer.alloc(16 * MiB, Buffer.from([0x2a, 0x00]))]),
      /more than 65536 inputs, outputs, raw contents, dimensions and parameters/,
    ],
    [
      'a shape of 16 M dimensions',
      () => Buffer.concat([MODEL_NAME, field(0x2a, Buffer.concat([field(0x0a, Buffer.from('INPUT0')), field(0x1a, Buffer.alloc(16 * MiB, 1))]))]),
      /more than 65536 inputs, outputs, raw contents, dimensions and parameters/,
    ],
    [
      '16 M bool_contents for shape [1]',
      () =>
        Buffer.concat([
          MODEL_NAME,
          field(
            0x2a,
            Buffer.concat([field(0x0a, Buffer.from('INPUT0')), field(0x12, Buffer.from('BOOL')), Buffer.from([0x1a, 1, 1]), field(0x2a, field(0x0a, Buffer.alloc(16 * MiB, 1)))]),
          ),
        ]),
      /^unable to parse 'data' of input 'INPUT0': expected 1 elements for shape \[1\], got 16777216$/,
    ],
  ];
  it.each(cases)('refuses %s before building it (INVALID_ARGUMENT), at a bounded cost', async (_, message, expected) => {
    const body = grpcMessage(message());
    const before = process.memoryUsage.rss();
    const answer = await grpcCall(grpcPort(engine), body);
    expect(statusOf(answer)).toBe('3');
    expect(decodeURIComponent(String(messageOf(answer)))).toMatch(expected);
    // The message itself is 16 MiB, held a few times over on its way (HTTP/2 frames, the reassembled message).
    expect(process.memoryUsage.rss() - before).toBeLessThan(160 * MiB);
  });

  it('refuses a RepositoryModelLoad of 8 M empty parameters before protobufjs reads it', async () => {
    const body = grpcMessage(Buffer.concat([field(0x12, Buffer.from('identity_fp32')), Buffer.alloc(16 * MiB, Buffer.from([0x1a, 0x00]))]));
    const before = process.memoryUsage.rss();
    const answer = await grpcCall(grpcPort(engine), body, { ':path': '/inference.GRPCInferenceService/RepositoryModelLoad' });
    expect(statusOf(answer)).toBe('3');
    expect(decodeURIComponent(String(messageOf(answer)))).toBe('failed to parse the RepositoryModelLoad request: more than 65536 fields in one request');
    expect(process.memoryUsage.rss() - before).toBeLessThan(160 * MiB);
  });

  it('reads int_contents into INT8, each value checked as it narrows', async () => {
    const call = (varints: number[]): Promise<CallAnswer> => {
      const input = Buffer.concat([
        field(0x0a, Buffer.from('INPUT0')),
        field(0x12, Buffer.from('INT8')),
        Buffer.from([0x1a, 2, 1, 2]), // shape [1, 2]
        field(0x2a, field(0x12, Buffer.from(varints))),
      ]);
      return grpcCall(grpcPort(engine), grpcMessage(Buffer.concat([field(0x0a, Buffer.from('identity_int8')), field(0x2a, input)])));
    };
    const answered = await call([5, 0xf9, 0xff, 0xff, 0xff, 0x0f]); // 5 and -7 (int32 varints)
    expect(statusOf(answered)).toBe('0');
    const raw = answered.data.subarray(answered.data.length - 2);
    expect(Array.from(new Int8Array(raw.buffer, raw.byteOffset, 2))).toEqual([5, -7]);
    const refused = await call([5, 0xac, 0x02]); // 5 and 300
    expect(statusOf(refused)).toBe('3');
    expect(decodeURIComponent(String(messageOf(refused)))).toBe("input 'INPUT0': element 1 (300) is out of range for INT8 (-128..127)");
  });
});

// Node's http2 sends the GOAWAY too but keeps the socket until the client closes it (docs/security.md).
describe('gRPC, native engine only', () => {
  it('closes the connection after a GOAWAY for a protocol error, with a call open', async () => {
    const raw = await RawH2.open(grpcPort('native'));
    try {
      raw.send(frame(FRAME.headers, FLAG.endHeaders, 1, grpcRequestHeaders(MODEL_INFER)));
      // DATA on stream 0 is a connection error.
      raw.send(frame(FRAME.data, 0, 0, Buffer.from('x')));
      const goaway = await raw.waitFor((f) => f.type === FRAME.goaway, 'GOAWAY');
      expect(errorCodeOf(goaway)).toBe(ERROR_CODE.protocolError);
      await raw.waitClosed(5000);
    } finally {
      raw.close();
    }
  });
});
