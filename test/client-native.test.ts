/**
 * The client's native gRPC transport (native/client/grpc-channel.cc) against
 * servers that misbehave: what the network may make it hold is bounded
 * (message sizes, headers), protocol faults end calls with clear errors,
 * GOAWAY moves new calls to a new connection, the server's stream limit
 * queues calls rather than failing them, and a client left open (gRPC or
 * HTTP) neither keeps its process alive nor crashes a worker that ends
 * under it. The HTTP transport's hostile servers: client-native-http.test.ts.
 */
import { execFile } from 'node:child_process';
import { deflateSync, gzipSync } from 'node:zlib';
import http2, { type ServerHttp2Stream } from 'node:http2';
import { createServer as createNetServer, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../lib/index.js';
import { Client } from '../lib/client/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { loadInferenceMessages } from '../lib/kserve/proto.js';
import { grpcMessage } from './h2-frames.js';
import { REPO_ROOT, rejection, startServer } from './helpers.js';

const run = promisify(execFile);
const messages = await loadInferenceMessages('test');

let server: Server;
let frontends: KServeFrontends;

beforeAll(async () => {
  server = await startServer();
  for (const name of ['identity_fp32', 'slow']) await server.loadModel(name);
  frontends = await serveKServe(server, { grpc: { port: 0 }, http: { port: 0 } });
});

afterAll(async () => {
  await frontends?.close();
  await server?.stop();
});

/** Answers the health checks properly; every other method is `misbehave`'s. */
async function h2Server(misbehave: (stream: ServerHttp2Stream, method: string) => void): Promise<{ port: number; sessions: () => number; close(): Promise<void> }> {
  const h2 = http2.createServer();
  const open = new Set<http2.ServerHttp2Session>();
  let sessions = 0;
  h2.on('session', (session) => {
    sessions++;
    open.add(session);
    session.once('close', () => open.delete(session));
  });
  h2.on('stream', (stream, headers) => {
    const method = String(headers[':path']).split('/').pop()!;
    stream.on('error', () => undefined);
    stream.on('data', () => {});
    stream.on('end', () => {
      if (method === 'ServerLive' || method === 'ServerReady') {
        const body = messages[method]!.responseSerialize(method === 'ServerReady' ? { ready: true } : { live: true });
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(grpcMessage(Buffer.from(body)));
        return;
      }
      misbehave(stream, method);
    });
  });
  await new Promise<void>((done) => h2.listen(0, '127.0.0.1', done));
  return {
    port: (h2.address() as { port: number }).port,
    sessions: () => sessions,
    // Node's server waits for a session it sent GOAWAY on, even once its peer has gone.
    close: () => {
      for (const session of open) session.destroy();
      return new Promise<void>((done) => h2.close(() => done()));
    },
  };
}

async function nativeClient(port: number, options: Parameters<typeof Client.connect>[1] = {}): Promise<Client> {
  const client = await Client.connect(`grpc://127.0.0.1:${port}`, { transport: 'native', retry: { attempts: 1 }, ...options });
  expect(client.transport).toBe('native');
  return client;
}

/** Runs `body` with a native client of a server that misbehaves as told; closes both. */
async function against(
  misbehave: (stream: ServerHttp2Stream, method: string) => void,
  body: (client: Client, server: { sessions: () => number }) => Promise<void>,
  options: Parameters<typeof Client.connect>[1] = {},
): Promise<void> {
  const h2 = await h2Server(misbehave);
  const client = await nativeClient(h2.port, options);
  try {
    await body(client, h2);
  } finally {
    await client.close();
    await h2.close();
  }
}

describe('the native gRPC transport against a misbehaving server', () => {
  it('refuses a response message announced past maxMessageBytes before reading it, and the connection serves the next call', async () => {
    await against(
      (stream) => {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
        // 1 GiB announced, 5 bytes sent, and the stream left open.
        const prefix = Buffer.alloc(5);
        prefix.writeUInt32BE(1024 * 1024 * 1024, 1);
        stream.write(Buffer.concat([prefix, Buffer.from('abcde')]));
      },
      async (client, server) => {
        const error = await rejection(client.metadata({ timeoutMs: 5000 }));
        // RESOURCE_EXHAUSTED, which the client reports as the caller's to fix.
        expect(error.code).toBe('INVALID_ARG');
        expect(error.message).toContain('larger than maxMessageBytes (1048576)');
        expect(await client.live()).toBe(true);
        expect(server.sessions()).toBe(1);
      },
      { maxMessageBytes: 1024 * 1024 },
    );
  });

  it('inflates gzip and deflate answers (which it takes without compression of its own); refuses a bomb past maxMessageBytes, corrupt or empty bytes and other encodings, and goes on', async () => {
    const metadata = Buffer.from(messages.ServerMetadata!.responseSerialize({ name: 'raw', version: '1', extensions: [] }));
    let n = 0;
    await against(
      (stream) => {
        n++;
        const [encoding, bytes] = ([
          ['gzip', gzipSync(metadata)],
          ['deflate', deflateSync(metadata)],
          ['gzip', gzipSync(Buffer.alloc(8 * 1024 * 1024))],
          ['gzip', gzipSync(metadata).subarray(0, 12)],
          ['gzip', Buffer.alloc(0)],
          ['snappy', metadata],
        ] as const)[Math.min(n - 1, 5)]!;
        stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-encoding': encoding }, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(grpcMessage(Buffer.from(bytes), 1));
      },
      async (client) => {
        expect((await client.metadata()).name).toBe('raw');
        expect((await client.metadata()).name).toBe('raw');
        const bomb = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(bomb.code).toBe('INVALID_ARG'); // RESOURCE_EXHAUSTED, the caller's to fix
        expect(bomb.message).toContain('larger than maxMessageBytes (1048576) once inflated');
        const cut = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(cut.code).toBe('INTERNAL');
        expect(cut.message).toContain('not a whole gzip stream');
        const empty = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(empty.code).toBe('INTERNAL');
        expect(empty.message).toContain('not a whole gzip stream');
        const other = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(other.code).toBe('INTERNAL');
        expect(other.message).toContain("a compressed message with grpc-encoding 'snappy'");
        expect(await client.live()).toBe(true);
      },
      { maxMessageBytes: 1024 * 1024 },
    );
  });

  it('ends a call whose response has more headers than the limit with INTERNAL', async () => {
    await against(
      (stream) => {
        const headers: Record<string, string> = { ':status': '200', 'content-type': 'application/grpc' };
        for (let i = 0; i < 200; i++) headers[`x-filler-${i}`] = 'x';
        stream.respond(headers, { endStream: false });
      },
      async (client) => {
        const error = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(error.code).toBe('INTERNAL');
        expect(error.message).toContain("the response's headers are past the client's limit");
      },
    );
  });

  it('reads a status sent with the headers alone (trailers-only) and an HTTP error without a gRPC status', async () => {
    await against(
      (stream, method) => {
        if (method === 'ServerMetadata') stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '5', 'grpc-message': 'no%20such%20thing' }, { endStream: true });
        else stream.respond({ ':status': 503 }, { endStream: true });
      },
      async (client) => {
        const missing = await rejection(client.metadata());
        expect(missing.code).toBe('NOT_FOUND');
        expect(missing.message).toContain('no such thing');
        const unavailable = await rejection(client.model('x').metadata());
        expect(unavailable.code).toBe('UNAVAILABLE');
        expect(unavailable.message).toContain('HTTP 503 from a gRPC endpoint');
      },
    );
  });

  it('fails the calls of a connection that does not speak HTTP/2 with UNAVAILABLE', async () => {
    const sockets = new Set<Socket>();
    const tcp = createNetServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    });
    await new Promise<void>((done) => tcp.listen(0, '127.0.0.1', done));
    try {
      const error = await rejection(Client.connect(`grpc://127.0.0.1:${(tcp.address() as { port: number }).port}`, { transport: 'native', connectTimeoutMs: 1000 }));
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.message).toMatch(/HTTP\/2 protocol error|the server closed the connection/);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((done) => tcp.close(() => done()));
    }
  });

  it('after a GOAWAY, new calls go on a new connection and every call is answered', async () => {
    let calls = 0;
    await against(
      (stream) => {
        calls++;
        const body = messages.ServerMetadata!.responseSerialize({ name: 'goaway', version: String(calls), extensions: [] });
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(grpcMessage(Buffer.from(body)));
        // Every third call, the server says it takes no more on this connection.
        if (calls % 3 === 0) stream.session?.goaway();
      },
      async (client, server) => {
        for (let i = 1; i <= 9; i++) expect((await client.metadata()).version).toBe(String(i));
        expect(server.sessions()).toBeGreaterThanOrEqual(3);
      },
    );
  });
});

describe('the native gRPC transport against serveKServe', () => {
  it('queues calls past the server’s concurrent stream limit (1000) and answers all 1500', async () => {
    const client = await nativeClient(frontends.grpc!.port);
    try {
      const model = client.model('identity_fp32');
      const responses = await Promise.all(Array.from({ length: 1500 }, (_, i) => model.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([i]) } } })));
      expect(responses.map((r) => (r.outputs.OUTPUT0!.data as Float32Array)[0])).toEqual(Array.from({ length: 1500 }, (_, i) => i));
    } finally {
      await client.close();
    }
  });

  it('refuses a call whose headers pass what an HTTP/2 header block holds, and goes on', async () => {
    const client = await nativeClient(frontends.grpc!.port);
    try {
      const error = await rejection(client.live({ headers: { 'x-big': 'y'.repeat(100_000) } }));
      expect(error.code).toBe('INVALID_ARG');
      expect(error.message).toContain('more than an HTTP/2 header block holds (64 KiB)');
      expect(await client.live()).toBe(true);
    } finally {
      await client.close();
    }
  });

  it.each(['grpc', 'http'] as const)('a connection that fails inside the call that opens it ends that call with UNAVAILABLE (%s)', async (protocol) => {
    // Linux refuses a TCP connect to the broadcast address at once (ENETUNREACH or EACCES),
    // so the call that dials ends before start() returns: under the sanitizers this is the path it checks.
    const error = await rejection(Client.connect(`${protocol}://255.255.255.255:8000`, { transport: 'native', connectTimeoutMs: 1000, retry: { attempts: 1 } }));
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toMatch(/connect E[A-Z]+ 255\.255\.255\.255:8000|no answer within 1000 ms/);
  });

  it('requests that wait for the one connection each go with their own tensors (HTTP)', async () => {
    const client = await Client.connect(`http://127.0.0.1:${frontends.http!.port}`, { transport: 'native', connections: 1 });
    try {
      const slow = client.model('slow');
      // The first holds the connection for a while; the others wait, with their bodies copied (nothing else holds them).
      const calls = Array.from({ length: 6 }, (_, i) =>
        slow.infer({ inputs: { INPUT0: { shape: [4096], data: new Float32Array(4096).fill(i) }, DELAY_MS: new Uint32Array([i === 0 ? 100 : 0]) } }),
      );
      const outputs = await Promise.all(calls);
      outputs.forEach((response, i) => {
        const data = response.outputs.OUTPUT0!.data as Float32Array;
        expect(data.length).toBe(4096);
        expect(data.every((value) => value === i)).toBe(true);
      });
    } finally {
      await client.close();
    }
  });

  it.each(['grpc', 'http'] as const)('a client never closed lets its process exit; a worker ended with a call in flight leaves the process well (%s)', async (protocol) => {
    const target = `${protocol}://127.0.0.1:${protocol === 'grpc' ? frontends.grpc!.port : frontends.http!.port}`;
    const lib = JSON.stringify(resolve(REPO_ROOT, 'lib/client/index.ts'));
    const runTs = JSON.stringify(resolve(REPO_ROOT, 'test/fixtures/run-ts.mjs'));
    const fixture = JSON.stringify(resolve(REPO_ROOT, 'test/fixtures/client-worker.ts'));
    const script = `
      import { Worker } from 'node:worker_threads';
      const { Client } = await import(${lib});
      const client = await Client.connect('${target}', { transport: 'native' });
      const out = await client.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 2], data: new Float32Array([3, 4]) } } });
      const worker = new Worker(${runTs}, { execArgv: [], workerData: { module: ${fixture}, target: '${target}' } });
      const workerTransport = await new Promise((done, fail) => { worker.once('message', done); worker.once('error', fail); });
      await worker.terminate();
      const again = await client.live();
      process.stdout.write(JSON.stringify({ out: Array.from(out.outputs.OUTPUT0.data), workerTransport, again }));
      // No close(): the process must end by itself.
    `;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: REPO_ROOT, timeout: 30_000 });
    expect(JSON.parse(stdout)).toEqual({ out: [3, 4], workerTransport: 'native', again: true });
  });
});
