/**
 * The client's native gRPC transport against a server that answers with
 * mutated HTTP/2: bytes flipped, frames cut short, inserted, repeated or
 * lying about their length, messages announcing any size or flag, header
 * floods, resets and GOAWAYs, all sent in random pieces. Seed 1, each case
 * on a fresh connection. Every call must end (answered, failed, or cancelled
 * at its 250 ms deadline) with a well-formed outcome, and the process stays
 * well; test/sanitizers.sh runs this under ASan and UBSan.
 */
import { createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { random } from '../bench/chaos-workload.js';
import { NativeGrpcConnection, nativeGrpcChannelClass } from '../lib/client/native-grpc.js';
import { FLAG, FRAME, frame, grpcMessage, hpackLiteral, settingsFrame } from './h2-frames.js';

const CASES = 1000;
const PATH = '/inference.GRPCInferenceService/ServerLive';

/** A proper answer to stream `s`: headers, a ServerLiveResponse { live: true }, trailers. */
function answer(s: number): Buffer[] {
  return [
    frame(FRAME.headers, FLAG.endHeaders, s, Buffer.concat([hpackLiteral(':status', '200'), hpackLiteral('content-type', 'application/grpc')])),
    frame(FRAME.data, 0, s, grpcMessage(Buffer.from([0x08, 0x01]))),
    frame(FRAME.headers, FLAG.endHeaders | FLAG.endStream, s, Buffer.concat([hpackLiteral('grpc-status', '0'), hpackLiteral('grpc-message', '')])),
  ];
}

/** Case `index`'s answer to stream `s`, and whether the server then hangs up. */
function mutated(index: number, s: number): { pieces: Buffer[]; hangUp: boolean } {
  const next = random(1_000_003 * (index + 1));
  const pick = (n: number): number => Math.floor(next() * n);
  let frames = answer(s);
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
  // Sent in random pieces, so the client reads frames across reads.
  const bytes = Buffer.concat(frames);
  const pieces: Buffer[] = [];
  for (let at = 0; at < bytes.length; ) {
    const size = 1 + pick(Math.max(1, bytes.length - at));
    pieces.push(bytes.subarray(at, at + size));
    at += size;
  }
  return { pieces, hangUp: pick(3) === 0 };
}

/** A server that answers each call of case `current()` as that case says. */
async function fuzzServer(current: () => number): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.setNoDelay(true);
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
        if (type !== FRAME.headers) continue;
        const { pieces, hangUp } = mutated(current(), stream);
        void (async () => {
          for (const piece of pieces) {
            if (socket.destroyed) return;
            socket.write(piece);
            await new Promise((resolve) => setImmediate(resolve));
          }
          if (hangUp) socket.end();
        })();
      }
    });
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
        const connection = new NativeGrpcConnection(channel, { host: '127.0.0.1', port: server.port, connectTimeoutMs: 1000, keepAliveMs: 60_000, maxMessageBytes: 1024 * 1024 });
        const call = connection.unary(PATH, Buffer.alloc(0), {}, undefined, AbortSignal.timeout(250));
        let guard: NodeJS.Timeout | undefined;
        const hung = new Promise<'hung'>((resolve) => {
          guard = setTimeout(() => resolve('hung'), 3000);
        });
        const outcome = await Promise.race([call.then((bytes) => ({ bytes }), (error: unknown) => ({ error })), hung]);
        clearTimeout(guard);
        connection.close();
        if (outcome === 'hung') {
          malformed.push(`case ${index}: the call did not end`);
        } else if ('bytes' in outcome) {
          if (!Buffer.isBuffer(outcome.bytes)) malformed.push(`case ${index}: answered with ${typeof outcome.bytes}`);
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
