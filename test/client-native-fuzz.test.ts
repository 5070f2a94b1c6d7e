/**
 * The client's native transports against a server that answers with mutated
 * bytes. gRPC: HTTP/2 with bytes flipped, frames cut short, inserted,
 * repeated or lying about their length, messages announcing any size or
 * flag, header floods, resets and GOAWAYs. HTTP/1.1: responses with bytes
 * flipped, cut short, repeated, lying lengths, chunk sizes of any value,
 * header floods and interim responses. All sent in random pieces. Seed 1,
 * each case on a fresh connection. Every call must end (answered, failed, or
 * cancelled at its deadline: 250 ms for gRPC, 100 ms for HTTP) with a well-formed outcome, and the
 * process stays well; test/sanitizers.sh runs this under ASan and UBSan.
 */
import { createServer, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { random } from '../bench/chaos-workload.js';
import { NativeGrpcConnection, nativeGrpcChannelClass } from '../lib/client/native-grpc.js';
import { NativeHttpExchange, nativeHttpChannelClass } from '../lib/client/native-http.js';
import { TritonError } from '../lib/errors.js';
import { FLAG, FRAME, frame, grpcMessage, hpackLiteral, settingsFrame } from './h2-frames.js';

const CASES = 1000;
const PATH = '/inference.GRPCInferenceService/ServerLive';

/** What a case sends: its bytes in pieces, and whether the server then hangs up. */
interface Answer {
  pieces: Buffer[];
  hangUp: boolean;
}

/** `bytes` in random pieces, so the client reads the answer across reads. */
function inPieces(bytes: Buffer, pick: (n: number) => number): Buffer[] {
  const pieces: Buffer[] = [];
  for (let at = 0; at < bytes.length; ) {
    const size = 1 + pick(Math.max(1, bytes.length - at));
    pieces.push(bytes.subarray(at, at + size));
    at += size;
  }
  return pieces;
}

/** Writes an answer's pieces a tick apart, then hangs up where it says so. */
function send(socket: Socket, { pieces, hangUp }: Answer): void {
  void (async () => {
    for (const piece of pieces) {
      if (socket.destroyed) return;
      socket.write(piece);
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (hangUp) socket.end();
  })();
}

/** A TCP server on a free port that hands each connection to `serve`; close() ends them all. */
async function fuzzingServer(serve: (socket: Socket) => void): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.setNoDelay(true);
    serve(socket);
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    port: (server.address() as { port: number }).port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((done) => server.close(() => done()));
    },
  };
}

/** How a call ended, or 'hung' where it had not within 3 s (its own deadline is far shorter). */
async function settled<T>(call: Promise<T>): Promise<{ value: T } | { error: unknown } | 'hung'> {
  let guard: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => {
    guard = setTimeout(() => resolve('hung'), 3000);
  });
  const outcome = await Promise.race([call.then((value) => ({ value }), (error: unknown) => ({ error })), hung]);
  clearTimeout(guard);
  return outcome;
}

/** A proper answer to stream `s`: headers, a ServerLiveResponse { live: true } (gzip'd where `compressed`), trailers. */
function answer(s: number, compressed: boolean): Buffer[] {
  const encoding = compressed ? [hpackLiteral('grpc-encoding', 'gzip')] : [];
  const live = Buffer.from([0x08, 0x01]);
  return [
    frame(FRAME.headers, FLAG.endHeaders, s, Buffer.concat([hpackLiteral(':status', '200'), hpackLiteral('content-type', 'application/grpc'), ...encoding])),
    frame(FRAME.data, 0, s, compressed ? grpcMessage(gzipSync(live), 1) : grpcMessage(live)),
    frame(FRAME.headers, FLAG.endHeaders | FLAG.endStream, s, Buffer.concat([hpackLiteral('grpc-status', '0'), hpackLiteral('grpc-message', '')])),
  ];
}

/** Case `index`'s answer to stream `s`. */
function mutated(index: number, s: number): Answer {
  const next = random(1_000_003 * (index + 1));
  const pick = (n: number): number => Math.floor(next() * n);
  // Odd cases answer compressed, to a client that takes it (the native transport inflates it).
  let frames = answer(s, index % 2 === 1);
  const mutations = 1 + pick(3);
  for (let m = 0; m < mutations; m++) {
    switch (pick(9)) {
      case 0: {
        // Bytes flipped anywhere, frame headers included.
        const bytes = Buffer.concat(frames);
        for (let i = pick(8) + 1; i > 0; i--) bytes[pick(bytes.length)] = pick(256);
        frames = [bytes];
        break;
      }
      case 1:
        frames = [Buffer.concat(frames).subarray(0, pick(Buffer.concat(frames).length))];
        break;
      case 2: {
        const payload = Buffer.from(Array.from({ length: pick(64) }, () => pick(256)));
        frames.splice(pick(frames.length + 1), 0, frame(pick(10), pick(256), pick(2) === 0 ? s : pick(8), payload));
        break;
      }
      case 3: {
        // A message announcing any size, with any flag.
        const prefix = Buffer.alloc(5);
        prefix[0] = pick(3);
        prefix.writeUInt32BE(pick(2) === 0 ? pick(100) : Math.floor(next() * 0xffffffff), 1);
        frames[1] = frame(FRAME.data, pick(2), s, Buffer.concat([prefix, Buffer.alloc(pick(40))]));
        break;
      }
      case 4: {
        const flood = Array.from({ length: 100 + pick(200) }, (_, i) => hpackLiteral(`x-h${i}`, 'v'.repeat(pick(300))));
        frames[0] = frame(FRAME.headers, FLAG.endHeaders, s, Buffer.concat([hpackLiteral(':status', '200'), ...flood]));
        break;
      }
      case 5: {
        const code = Buffer.alloc(4);
        code.writeUInt32BE(pick(14));
        frames.splice(pick(frames.length + 1), 0, frame(FRAME.rstStream, 0, s, code));
        break;
      }
      case 6: {
        const payload = Buffer.alloc(8);
        payload.writeUInt32BE(pick(2) === 0 ? 0 : s, 0);
        payload.writeUInt32BE(pick(14), 4);
        frames.splice(pick(frames.length + 1), 0, frame(FRAME.goaway, 0, 0, payload));
        break;
      }
      case 7: {
        // A frame whose length field lies.
        const i = pick(frames.length);
        const copy = Buffer.from(frames[i]!);
        if (copy.length >= 3) copy.writeUIntBE(pick(1 << 24), 0, 3);
        frames[i] = copy;
        break;
      }
      default:
        frames = [...frames, ...frames];
    }
  }
  const bytes = Buffer.concat(frames);
  return { pieces: inPieces(bytes, pick), hangUp: pick(3) === 0 };
}

/** A server that answers each call of case `current()` as that case says. */
function fuzzServer(current: () => number): Promise<{ port: number; close(): Promise<void> }> {
  return fuzzingServer((socket) => {
    socket.write(settingsFrame([]));
    let buffered = Buffer.alloc(0);
    let prefaceSeen = false;
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (!prefaceSeen) {
        if (buffered.length < 24) return;
        buffered = buffered.subarray(24);
        prefaceSeen = true;
      }
      while (buffered.length >= 9) {
        const length = buffered.readUIntBE(0, 3);
        if (buffered.length < 9 + length) break;
        const type = buffered[3]!;
        const flags = buffered[4]!;
        const stream = buffered.readUInt32BE(5) & 0x7fffffff;
        buffered = buffered.subarray(9 + length);
        if (type === FRAME.settings && (flags & FLAG.ack) === 0) socket.write(frame(FRAME.settings, FLAG.ack, 0));
        if (type === FRAME.headers) send(socket, mutated(current(), stream));
      }
    });
  });
}

describe('the native gRPC transport against a fuzzing server', () => {
  it(`ends every call of ${CASES} mutated answers (seed 1) with a well-formed outcome`, async () => {
    const channel = nativeGrpcChannelClass();
    if (typeof channel === 'string') throw new Error(channel);
    let index = 0;
    const server = await fuzzServer(() => index);
    const outcomes = { answered: 0, failed: 0, cancelled: 0 };
    const malformed: string[] = [];
    try {
      for (; index < CASES; index++) {
        const connection = new NativeGrpcConnection(channel, { host: '127.0.0.1', port: server.port, connectTimeoutMs: 1000, keepAliveMs: 60_000, maxMessageBytes: 1024 * 1024, compress: index % 2 === 1 });
        const outcome = await settled(connection.unary(PATH, Buffer.alloc(0), {}, undefined, AbortSignal.timeout(250)));
        connection.close();
        if (outcome === 'hung') {
          malformed.push(`case ${index}: the call did not end`);
        } else if ('value' in outcome) {
          if (!Buffer.isBuffer(outcome.value)) malformed.push(`case ${index}: answered with ${typeof outcome.value}`);
          else outcomes.answered++;
        } else {
          const end = (outcome.error as { grpc?: { code: unknown; message: unknown } }).grpc;
          if (end === undefined || typeof end.code !== 'number' || typeof end.message !== 'string') malformed.push(`case ${index}: ${String(outcome.error)}`);
          else if (end.code === 1) outcomes.cancelled++;
          else outcomes.failed++;
        }
      }
      expect(malformed).toEqual([]);
      // The mutations reach every outcome, so the cases test what they are meant to.
      expect(outcomes.answered).toBeGreaterThan(0);
      expect(outcomes.failed).toBeGreaterThan(0);
      expect(outcomes.cancelled).toBeGreaterThan(0);
      expect(outcomes.answered + outcomes.failed + outcomes.cancelled).toBe(CASES);
    } finally {
      await server.close();
    }
  }, 120_000);
});

/** Case `index`'s HTTP/1.1 answer. */
function mutatedHttp(index: number): Answer {
  const next = random(7_000_003 * (index + 1));
  const pick = (n: number): number => Math.floor(next() * n);
  // Odd cases answer gzip'd, to a client that asked for it (the native transport inflates it).
  const compressed = index % 2 === 1;
  const body = compressed ? gzipSync('{"live":true}').toString('latin1') : '{"live":true}';
  let head = ['HTTP/1.1 200 OK', 'Content-Type: application/json', `Content-Length: ${body.length}`, ...(compressed ? ['Content-Encoding: gzip'] : [])];
  let tail = body;
  const mutations = 1 + pick(3);
  const edits: Array<(bytes: Buffer) => Buffer> = [];
  for (let m = 0; m < mutations; m++) {
    switch (pick(9)) {
      case 0:
        // Bytes flipped anywhere.
        edits.push((bytes) => {
          const copy = Buffer.from(bytes);
          for (let i = pick(8) + 1; i > 0; i--) copy[pick(copy.length)] = pick(256);
          return copy;
        });
        break;
      case 1:
        edits.push((bytes) => bytes.subarray(0, pick(bytes.length)));
        break;
      case 2:
        // A length that lies, or none, or two.
        head = head.filter((line) => !line.startsWith('Content-Length'));
        if (pick(3) > 0) head.push(`Content-Length: ${pick(2) === 0 ? pick(40) : Math.floor(next() * 2 ** 40)}`);
        if (pick(3) === 0) head.push(`Content-Length: ${pick(40)}`);
        break;
      case 3: {
        // Chunked, with chunk sizes that may lie.
        head = head.filter((line) => !line.startsWith('Content-Length'));
        head.push('Transfer-Encoding: chunked');
        const size = pick(2) === 0 ? body.length : Math.floor(next() * 2 ** 48);
        tail = `${size.toString(16)}${pick(2) === 0 ? ';ext' : ''}\r\n${body}\r\n${pick(2) === 0 ? '0\r\n\r\n' : ''}`;
        break;
      }
      case 4:
        for (let i = 100 + pick(200); i > 0; i--) head.push(`x-h${i}: ${'v'.repeat(pick(400))}`);
        break;
      case 5:
        head.unshift('HTTP/1.1 100 Continue', '');
        break;
      case 6:
        head.push(['Connection: close', 'Content-Encoding: gzip', 'Inference-Header-Content-Length: 99', 'Transfer-Encoding: gzip', ' folded'][pick(5)]!);
        break;
      case 7:
        head[head.findIndex((line) => line.startsWith('HTTP/'))] = ['HTTP/2 200', 'HTTP/1.1 99 X', 'HTTP/1.1 20x', 'ICY 200 OK', 'HTTP/1.1 101 Switching'][pick(5)]!;
        break;
      default:
        edits.push((bytes) => Buffer.concat([bytes, bytes]));
    }
  }
  let bytes: Buffer = Buffer.from(`${head.join('\r\n')}\r\n\r\n${tail}`, 'latin1');
  for (const edit of edits) bytes = edit(bytes);
  return { pieces: inPieces(bytes, pick), hangUp: pick(3) === 0 };
}

/** A server that answers each request with case `current()`'s bytes. */
function fuzzHttpServer(current: () => number): Promise<{ port: number; close(): Promise<void> }> {
  return fuzzingServer((socket) => {
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      for (let end = buffered.indexOf('\r\n\r\n'); end >= 0; end = buffered.indexOf('\r\n\r\n')) {
        buffered = buffered.slice(end + 4);
        send(socket, mutatedHttp(current()));
      }
    });
  });
}

describe('the native HTTP transport against a fuzzing server', () => {
  it(`ends every request of ${CASES} mutated answers (seed 1) with a well-formed outcome`, async () => {
    const channel = nativeHttpChannelClass();
    if (typeof channel === 'string') throw new Error(channel);
    let index = 0;
    const server = await fuzzHttpServer(() => index);
    const outcomes = { answered: 0, failed: 0, cancelled: 0 };
    const malformed: string[] = [];
    try {
      for (; index < CASES; index++) {
        const exchange = new NativeHttpExchange(channel, `http://127.0.0.1:${server.port}`, { host: '127.0.0.1', port: server.port }, { connectTimeoutMs: 1000, keepAliveMs: 60_000, maxMessageBytes: 1024, connections: 1, compress: index % 2 === 1 });
        // 100 ms: a local server's answer is there well before; what is cut short waits this long.
        const outcome = await settled(exchange.request('GET', '/v2/health/live', {}, undefined, { deadline: undefined, signal: AbortSignal.timeout(100), headers: {} }));
        exchange.close();
        if (outcome === 'hung') {
          malformed.push(`case ${index}: the request did not end`);
        } else if ('value' in outcome) {
          const { status, bytes } = outcome.value;
          if (!(bytes instanceof Uint8Array) || !(status >= 200 && status <= 599) || bytes.byteLength > 1024 + 1024 * 1024) malformed.push(`case ${index}: answered ${status} with ${String(bytes)}`);
          else outcomes.answered++;
        } else if (!(outcome.error instanceof TritonError) || outcome.error.message === '') {
          malformed.push(`case ${index}: ${String(outcome.error)}`);
        } else if (outcome.error.code === 'CANCELLED') {
          outcomes.cancelled++;
        } else {
          outcomes.failed++;
        }
      }
      expect(malformed).toEqual([]);
      expect(outcomes.answered).toBeGreaterThan(0);
      expect(outcomes.failed).toBeGreaterThan(0);
      expect(outcomes.cancelled).toBeGreaterThan(0);
      expect(outcomes.answered + outcomes.failed + outcomes.cancelled).toBe(CASES);
    } finally {
      await server.close();
    }
  }, 120_000);
});
