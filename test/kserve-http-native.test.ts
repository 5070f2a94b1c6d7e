import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { liveObjects } from '../lib/index.js';
import { serveKServe } from '../lib/kserve/index.js';
import { expectNoRequestsLive } from './helpers.js';
import { defineHttpSuite, suiteState } from './kserve-http.suite.js';
import { Segment } from './shared-memory-segments.js';

// Every HTTP test again with the native engine: what it does not answer
// itself reaches the same handler, and must come out the same.
defineHttpSuite('native');

/** A binary inference request for identity_fp32, as raw HTTP/1.1 bytes. */
function inferBytes(values: Float32Array, options: { model?: string; id?: string; close?: boolean } = {}): Buffer {
  const header = Buffer.from(
    JSON.stringify({
      ...(options.id === undefined ? {} : { id: options.id }),
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, values.length], parameters: { binary_data_size: values.byteLength } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }),
  );
  const body = Buffer.concat([header, Buffer.from(values.buffer, values.byteOffset, values.byteLength)]);
  const head =
    `POST /v2/models/${options.model ?? 'identity_fp32'}/infer HTTP/1.1\r\nHost: test\r\n` +
    `Inference-Header-Content-Length: ${header.byteLength}\r\nContent-Length: ${body.byteLength}\r\n` +
    (options.close === true ? 'Connection: close\r\n' : '') +
    '\r\n';
  return Buffer.concat([Buffer.from(head), body]);
}

/** Resolves once the socket has closed, also when it closed before the call (a loaded run reads the answer late). */
function closedOf(socket: Socket): Promise<void> {
  return socket.closed ? Promise.resolve() : new Promise((resolve) => socket.once('close', () => resolve()));
}

/** A binary request to the `slow` model (DELAY_MS before it answers `value`), as raw HTTP/1.1 bytes. */
function slowBytes(value: number, delayMs: number): Buffer {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1], parameters: { binary_data_size: 4 } },
        { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], parameters: { binary_data_size: 4 } },
      ],
      parameters: { binary_data_output: true },
    }),
  );
  const body = Buffer.concat([header, Buffer.from(new Float32Array([value]).buffer), Buffer.from(new Uint32Array([delayMs]).buffer)]);
  const head = `POST /v2/models/slow/infer HTTP/1.1\r\nHost: test\r\nInference-Header-Content-Length: ${header.byteLength}\r\nContent-Length: ${body.byteLength}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head), body]);
}

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Reads HTTP/1.1 responses (Content-Length framed) off a socket, in order. */
class ResponseReader {
  #buffered = Buffer.alloc(0);
  #waiting: Array<() => void> = [];
  ended = false;

  constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffered = Buffer.concat([this.#buffered, chunk]);
      this.#waiting.splice(0).forEach((wake) => wake());
    });
    socket.on('close', () => {
      this.ended = true;
      this.#waiting.splice(0).forEach((wake) => wake());
    });
  }

  async next(): Promise<RawResponse> {
    for (;;) {
      const end = this.#buffered.indexOf('\r\n\r\n');
      if (end !== -1) {
        const lines = this.#buffered.subarray(0, end).toString('latin1').split('\r\n');
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
        }
        const length = Number(headers['content-length'] ?? 0);
        if (this.#buffered.byteLength >= end + 4 + length) {
          const body = Buffer.from(this.#buffered.subarray(end + 4, end + 4 + length));
          this.#buffered = this.#buffered.subarray(end + 4 + length);
          return { status: Number(lines[0]?.split(' ')[1]), headers, body };
        }
      }
      if (this.ended) throw new Error(`the connection closed (${this.#buffered.byteLength} bytes unread)`);
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    }
  }
}

function open(port: number): Promise<{ socket: Socket; reader: ResponseReader }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve({ socket, reader: new ResponseReader(socket) }));
    socket.once('error', reject);
  });
}

/** The output tensor of a binary inference response. */
function outputOf(response: RawResponse): { header: { id?: string; outputs: Array<{ name: string; shape: number[] }> }; values: number[] } {
  const length = Number(response.headers['inference-header-content-length']);
  const header = JSON.parse(response.body.subarray(0, length).toString()) as { id?: string; outputs: Array<{ name: string; shape: number[] }> };
  const rest = response.body.subarray(length);
  return { header, values: Array.from(new Float32Array(rest.buffer.slice(rest.byteOffset, rest.byteOffset + rest.byteLength))) };
}

describe('the native engine', () => {
  it('answers pipelined requests in order, its own and those JS answers mixed', async () => {
    const { frontends } = suiteState();
    const before = frontends.http?.answeredNatively ?? 0;
    const { socket, reader } = await open(frontends.http?.port ?? 0);
    try {
      // One write: native, JS (metadata), native, JS (unknown model), native.
      socket.write(
        Buffer.concat([
          inferBytes(new Float32Array([1, 2]), { id: 'first' }),
          Buffer.from('GET /v2/models/identity_fp32 HTTP/1.1\r\nHost: test\r\n\r\n'),
          inferBytes(new Float32Array([3, 4, 5]), { id: 'second' }),
          inferBytes(new Float32Array([6]), { model: 'no_such_model' }),
          inferBytes(new Float32Array([7, 8]), { id: 'third' }),
        ]),
      );
      const first = await reader.next();
      expect(first.status).toBe(200);
      expect(outputOf(first)).toMatchObject({ header: { id: 'first', outputs: [{ name: 'OUTPUT0', shape: [1, 2] }] }, values: [1, 2] });
      const metadata = await reader.next();
      expect(metadata.status).toBe(200);
      expect(JSON.parse(metadata.body.toString())).toMatchObject({ name: 'identity_fp32' });
      expect(outputOf(await reader.next())).toMatchObject({ header: { id: 'second' }, values: [3, 4, 5] });
      const unknown = await reader.next();
      expect(unknown.status).toBe(404);
      expect(JSON.parse(unknown.body.toString())).toEqual({ error: "Request for unknown model: 'no_such_model' is not found" });
      expect(outputOf(await reader.next())).toMatchObject({ header: { id: 'third' }, values: [7, 8] });
      expect(frontends.http?.answeredNatively).toBe(before + 3);
    } finally {
      socket.destroy();
    }
  });

  it('gives each of many connections its own 64 KiB answer, byte for byte', async () => {
    const { frontends } = suiteState();
    const before = frontends.http?.answeredNatively ?? 0;
    const connections = await Promise.all(Array.from({ length: 16 }, () => open(frontends.http?.port ?? 0)));
    try {
      for (let round = 0; round < 4; round++) {
        await Promise.all(
          connections.map(async ({ socket, reader }, index) => {
            const values = new Float32Array(16384).map((_, i) => round * 1e6 + index * 1e4 + i);
            socket.write(inferBytes(values));
            const response = await reader.next();
            expect(response.status).toBe(200);
            expect(outputOf(response).values).toEqual(Array.from(values));
          }),
        );
      }
      expect(frontends.http?.answeredNatively).toBe(before + 64);
    } finally {
      for (const { socket } of connections) socket.destroy();
    }
    await expectNoRequestsLive();
  });

  it('closes after answering a request that says Connection: close', async () => {
    const { frontends } = suiteState();
    const { socket, reader } = await open(frontends.http?.port ?? 0);
    socket.write(inferBytes(new Float32Array([9]), { close: true }));
    const response = await reader.next();
    expect(response.headers.connection).toBe('close');
    expect(outputOf(response).values).toEqual([9]);
    await closedOf(socket);
  });

  it('cancels its Triton request when the client hangs up', async () => {
    const { frontends } = suiteState();
    const before = frontends.http?.answeredNatively ?? 0;
    const { socket } = await open(frontends.http?.port ?? 0);
    // 60 s is past the test timeout: only a cancelled request lets the test finish.
    socket.write(slowBytes(1, 60_000));
    // Inside Triton once the addon counts it: no JS request is involved.
    await expect.poll(() => liveObjects().requests, { timeout: 5000, interval: 5 }).toBe(1);
    expect(liveObjects().pending).toBe(0);
    socket.destroy();
    await expectNoRequestsLive(10_000);
    // Cancelled, not answered.
    expect(frontends.http?.answeredNatively).toBe(before);
  });

  it('close() waits for its requests in flight and answers them', async () => {
    const { server } = suiteState();
    const own = await serveKServe(server, { http: { port: 0, engine: 'native' } });
    const { socket, reader } = await open(own.http?.port ?? 0);
    socket.write(slowBytes(5, 200));
    await expect.poll(() => liveObjects().requests, { timeout: 5000, interval: 5 }).toBe(1);
    const closed = own.close();
    const response = await reader.next();
    expect(response.status).toBe(200);
    expect(outputOf(response).values).toEqual([5]);
    await closed;
    // Closed after its answer, and nothing listens any more.
    await closedOf(socket);
    await expect(open(own.http?.port ?? 0)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(own.http?.answeredNatively).toBe(1);
  });

  it('hands what it does not read itself to Node, which refuses it as with the node engine', async () => {
    const { frontends } = suiteState();
    const port = frontends.http?.port ?? 0;
    const cases: Array<[string, number]> = [
      ['GARBAGE\r\n\r\n', 400],
      ['GET /v2/health/ready HTTP/1.1\nHost: t\n\n', 400],
      ['POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
      ['POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab', 400],
      [`GET /v2/health/ready HTTP/1.1\r\nHost: t\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`, 431],
    ];
    for (const [bytes, status] of cases) {
      const { socket, reader } = await open(port);
      socket.write(bytes);
      expect((await reader.next()).status).toBe(status);
      socket.destroy();
    }
  });

  it('answers 408 and closes a connection whose head or body takes too long (headersTimeoutMs, requestTimeoutMs)', async () => {
    const { server } = suiteState();
    const guarded = await serveKServe(server, { http: { port: 0, engine: 'native', headersTimeoutMs: 200, requestTimeoutMs: 800 } });
    try {
      const port = guarded.http?.port ?? 0;
      // A head that never ends.
      const slowHead = await open(port);
      slowHead.socket.write('POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: t\r\n');
      // A body that trickles in: never quiet for long, but never done.
      const slowBody = await open(port);
      slowBody.socket.write('POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{');
      const trickle = setInterval(() => slowBody.socket.write(' '), 100);
      const started = Date.now();
      try {
        expect((await slowHead.reader.next()).status).toBe(408);
        expect((await slowBody.reader.next()).status).toBe(408);
      } finally {
        clearInterval(trickle);
      }
      // The body's clock is its request's, not its last byte's.
      expect(Date.now() - started).toBeGreaterThanOrEqual(700);
      expect(Date.now() - started).toBeLessThan(5000);
      await Promise.all([slowHead, slowBody].map(({ socket }) => closedOf(socket)));
    } finally {
      await guarded.close();
    }
  });

  it('leaves requests to the JS handler when inferTimeoutMs is set: its timer times them out', async () => {
    const { server } = suiteState();
    const limited = await serveKServe(server, { http: { port: 0, engine: 'native' }, inferTimeoutMs: 50 });
    try {
      const { socket, reader } = await open(limited.http?.port ?? 0);
      socket.write(slowBytes(1, 20_000));
      const response = await reader.next();
      expect(response.status).toBe(400);
      expect(JSON.parse(response.body.toString())).toEqual({ error: 'the request timed out after 50 ms' });
      expect(limited.http?.answeredNatively).toBe(0);
      socket.destroy();
    } finally {
      await limited.close();
    }
    await expectNoRequestsLive(10_000);
  });

  it('reads inputs from and writes outputs into system shared memory itself, and leaves what is wrong to JS', async () => {
    const { server, frontends } = suiteState();
    const port = frontends.http?.port ?? 0;
    const segment = new Segment(128, 'native-http');
    try {
      await server.sharedMemory.register('nh_in', { key: segment.key, offset: 0, byteSize: 64 });
      await server.sharedMemory.register('nh_out', { key: segment.key, offset: 64, byteSize: 64 });
      const values = new Float32Array([1.5, -2, 3, 4]);
      segment.write(0, values);
      /** A JSON-only request (no binary part: no Inference-Header-Content-Length), as tritonclient sends it. */
      const request = (output: Record<string, unknown>): string => {
        const body = JSON.stringify({
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], parameters: { shared_memory_region: 'nh_in', shared_memory_byte_size: 16 } }],
          outputs: [{ name: 'OUTPUT0', parameters: output }],
        });
        return `POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      };
      const before = frontends.http?.answeredNatively ?? 0;
      const { socket, reader } = await open(port);
      try {
        socket.write(request({ shared_memory_region: 'nh_out', shared_memory_byte_size: 48, shared_memory_offset: 16 }));
        const answer = await reader.next();
        expect(answer.status).toBe(200);
        expect(answer.headers['content-type']).toBe('application/json');
        expect(JSON.parse(answer.body.toString())).toMatchObject({ outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 4] }] });
        expect(JSON.parse(answer.body.toString()).outputs[0].parameters).toBeUndefined();
        // Written at the region's offset 16, i.e. the segment's byte 64 + 16.
        expect(Array.from(new Float32Array(segment.read(80, 16).slice().buffer))).toEqual(Array.from(values));
        expect(frontends.http?.answeredNatively).toBe(before + 1);

        // An output region too small: Triton's allocator error, with the JS engine's message.
        socket.write(request({ shared_memory_region: 'nh_out', shared_memory_byte_size: 8 }));
        const small = await reader.next();
        expect(small.status).toBe(500);
        expect(JSON.parse(small.body.toString()).error).toContain(
          "shared memory size specified with the request for output 'OUTPUT0' (8 bytes) should be at least 16 bytes to hold the results",
        );
        // A range past the region's end, and a region nobody registered: the JS handler answers, in its words.
        socket.write(request({ shared_memory_region: 'nh_out', shared_memory_byte_size: 64, shared_memory_offset: 16 }));
        const past = await reader.next();
        expect(past.status).toBe(400);
        expect(JSON.parse(past.body.toString())).toEqual({ error: "Invalid offset + byte size for shared memory region: 'nh_out'" });
        socket.write(request({ shared_memory_region: 'nh_missing', shared_memory_byte_size: 64 }));
        const missing = await reader.next();
        expect(missing.status).toBe(404);
        expect(JSON.parse(missing.body.toString()).error).toContain('nh_missing');
        expect(frontends.http?.answeredNatively).toBe(before + 2);
      } finally {
        socket.destroy();
      }
    } finally {
      await server.sharedMemory.unregister();
      segment.unlink();
    }
    await expectNoRequestsLive();
  });

  it('refuses TLS, which it does not serve', async () => {
    const { server } = suiteState();
    await expect(serveKServe(server, { http: { port: 0, engine: 'native', tls: {} } })).rejects.toMatchObject({ code: 'INVALID_ARG' });
  });
});
