/**
 * The client's native HTTP/1.1 transport (native/client/http-channel.cc)
 * against servers that misbehave: what a response may make it hold is
 * bounded (the body by maxMessageBytes, announced lengths refused before
 * reading, the head by bytes and header count), every framing a server may
 * use is read (Content-Length, chunked with trailers, until the connection
 * ends), protocol faults end calls with clear errors and the next call
 * goes on, connections are reused up to the pool's size, and a cancelled
 * call closes its connection.
 */
import { createServer, type Socket } from 'node:net';
import { deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { Client } from '../lib/client/index.js';
import { rejection } from './helpers.js';

interface Request {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * A keep-alive HTTP/1.1 server that answers the health routes properly and
 * leaves every other request to `misbehave`, which writes to the socket what
 * it likes. Counts the connections it took.
 */
async function rawServer(misbehave: (request: Request, socket: Socket) => void): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = buffered.subarray(0, end).toString('latin1').split('\r\n');
        const [method, path] = lines[0]!.split(' ') as [string, string];
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
        }
        const length = Number(headers['content-length'] ?? 0);
        if (buffered.length < end + 4 + length) return;
        const body = buffered.subarray(end + 4, end + 4 + length);
        buffered = buffered.subarray(end + 4 + length);
        if (path.startsWith('/v2/health/')) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
        else misbehave({ method, path, headers, body }, socket);
      }
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    port: (server.address() as { port: number }).port,
    connections: () => connections,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((done) => server.close(() => done()));
    },
  };
}

const METADATA = JSON.stringify({ name: 'raw', version: '1', extensions: ['a'] });

function ok(body: string, headers = ''): string {
  return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers}\r\n${body}`;
}

/** Runs `body` with a native HTTP client of a server that misbehaves as told; closes both. */
async function against(
  misbehave: (request: Request, socket: Socket) => void,
  body: (client: Client, server: { connections: () => number }) => Promise<void>,
  options: Parameters<typeof Client.connect>[1] = {},
): Promise<void> {
  const server = await rawServer(misbehave);
  const client = await Client.connect(`http://127.0.0.1:${server.port}`, { transport: 'native', retry: { attempts: 1 }, ...options });
  expect(client.transport).toBe('native');
  try {
    await body(client, server);
  } finally {
    await client.close();
    await server.close();
  }
}

describe('the native HTTP transport against a misbehaving server', () => {
  it('refuses a body announced past maxMessageBytes before reading it, and the next call goes on', async () => {
    let first = true;
    await against(
      (_request, socket) => {
        if (first) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\nabcde');
        else socket.write(ok(METADATA));
        first = false;
      },
      async (client) => {
        const error = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(error.code).toBe('INVALID_ARG');
        expect(error.message).toContain('larger than maxMessageBytes (1048576)');
        expect((await client.metadata()).name).toBe('raw');
      },
      { maxMessageBytes: 1024 * 1024 },
    );
  });

  it('ends a call whose head is past the limits (128 headers, 64 KiB) with INTERNAL', async () => {
    let flood = 0;
    await against(
      (_request, socket) => {
        flood++;
        if (flood === 1) socket.write(`HTTP/1.1 200 OK\r\n${Array.from({ length: 200 }, (_, i) => `x-filler-${i}: x\r\n`).join('')}\r\n`);
        else socket.write(`HTTP/1.1 200 OK\r\nx-long: ${'y'.repeat(100_000)}`);
      },
      async (client) => {
        const many = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(many.code).toBe('INTERNAL');
        expect(many.message).toContain('more than 128 headers');
        const long = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(long.code).toBe('INTERNAL');
        expect(long.message).toContain("head is longer than the client's limit (64 KiB)");
      },
    );
  });

  it('reads chunked bodies (with trailers), bodies that end with the connection, interim 100 responses and HTTP/1.0', async () => {
    let n = 0;
    await against(
      (_request, socket) => {
        n++;
        const half = METADATA.length >> 1;
        if (n === 1) {
          socket.write(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${half.toString(16)};ext=1\r\n${METADATA.slice(0, half)}\r\n`);
          setTimeout(() => socket.write(`${(METADATA.length - half).toString(16)}\r\n${METADATA.slice(half)}\r\n0\r\nx-trailer: 1\r\n\r\n`), 20);
        } else if (n === 2) {
          socket.end(`HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n${METADATA}`);
        } else if (n === 3) {
          socket.write(`HTTP/1.1 100 Continue\r\n\r\n${ok(METADATA)}`);
        } else {
          socket.end(`HTTP/1.0 200 OK\r\nContent-Length: ${METADATA.length}\r\n\r\n${METADATA}`);
        }
      },
      async (client, server) => {
        for (let i = 0; i < 4; i++) expect(await client.metadata({ timeoutMs: 5000 })).toEqual({ name: 'raw', version: '1', extensions: ['a'] });
        // The chunked answer kept its connection; the next closed it, and the one after took a new one.
        expect(server.connections()).toBe(2);
      },
    );
  });

  it('fails a call answered with something other than HTTP, an unasked compressed body, or a connection closed inside a body, and goes on', async () => {
    let n = 0;
    await against(
      (_request, socket) => {
        n++;
        if (n === 1) socket.write('SSH-2.0-OpenSSH_9.6\r\n\r\n');
        else if (n === 2) socket.write(ok('\x1f\x8b garbage', 'Content-Encoding: gzip\r\n'));
        else if (n === 3) socket.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort');
        else socket.write(ok(METADATA));
      },
      async (client) => {
        const notHttp = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(notHttp.code).toBe('INTERNAL');
        expect(notHttp.message).toContain('not an HTTP/1.x response');
        const compressed = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(compressed.code).toBe('INTERNAL');
        expect(compressed.message).toContain('compressed (gzip) although the native transport asked for none');
        const cut = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(cut.code).toBe('UNAVAILABLE');
        expect(cut.message).toContain('the server closed the connection');
        expect((await client.metadata()).name).toBe('raw');
      },
    );
  });

  it('with compression, inflates gzip and deflate answers; refuses a bomb, corrupt bytes and other encodings (request bodies: client.test.ts)', async () => {
    let n = 0;
    const seen: Request[] = [];
    const answer = (bytes: Buffer, encoding: string): string =>
      `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: ${encoding}\r\nContent-Length: ${bytes.length}\r\n\r\n${bytes.toString('latin1')}`;
    await against(
      (request, socket) => {
        n++;
        seen.push(request);
        if (n === 1) socket.write(answer(gzipSync(METADATA), 'gzip'), 'latin1');
        else if (n === 2) socket.write(answer(deflateSync(METADATA), 'deflate'), 'latin1');
        else if (n === 3) socket.write(answer(gzipSync(Buffer.alloc(8 * 1024 * 1024, 32)), 'gzip'), 'latin1');
        else if (n === 4) socket.write(answer(gzipSync(METADATA).subarray(0, 20), 'gzip'), 'latin1');
        else if (n === 5) socket.write(answer(Buffer.from(METADATA), 'br'), 'latin1');
        else socket.write(ok(METADATA));
      },
      async (client) => {
        expect((await client.metadata()).name).toBe('raw');
        expect(seen[0]!.headers['accept-encoding']).toContain('gzip');
        expect((await client.metadata()).name).toBe('raw');
        const bomb = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(bomb.code).toBe('INVALID_ARG'); // RESOURCE_EXHAUSTED, as the JS transport says it
        expect(bomb.message).toContain('larger than maxMessageBytes (1048576) once inflated');
        const cut = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(cut.code).toBe('INTERNAL');
        expect(cut.message).toContain('not a whole gzip stream');
        const brotli = await rejection(client.metadata({ timeoutMs: 5000 }));
        expect(brotli.message).toContain('compressed (br) although the native transport asked for gzip or deflate');
      },
      { compression: 'gzip', maxMessageBytes: 1024 * 1024 },
    );
  });

  it('reuses keep-alive connections, at most `connections` of them, and a cancelled call closes its own', async () => {
    let hang = false;
    await against(
      (_request, socket) => {
        if (hang) return; // never answered
        // Answered late, so that calls pile up past the pool's size.
        setTimeout(() => socket.write(ok(METADATA)), 10);
      },
      async (client, server) => {
        for (let i = 0; i < 20; i++) await client.metadata();
        expect(server.connections()).toBe(1);
        const all = await Promise.all(Array.from({ length: 40 }, () => client.metadata()));
        expect(all.every((m) => m.name === 'raw')).toBe(true);
        expect(server.connections()).toBeLessThanOrEqual(4);
        hang = true;
        const before = server.connections();
        const error = await rejection(client.metadata({ timeoutMs: 200 }));
        expect(error.code).toBe('CANCELLED');
        hang = false;
        expect((await client.metadata()).name).toBe('raw');
        // The cancelled call's connection was closed, so the pool opened no more than one new one.
        expect(server.connections() - before).toBeLessThanOrEqual(1);
      },
      { connections: 4 },
    );
  });

  it('refuses headers that would break the request apart, with INVALID_ARG', async () => {
    await against(
      (_request, socket) => socket.write(ok(METADATA)),
      async (client) => {
        // Line breaks are refused above the transport, for every transport.
        const injected = await rejection(client.metadata({ headers: { 'x-a': 'b\r\nx-evil: 1' } }));
        expect(injected.code).toBe('INVALID_ARG');
        expect(injected.message).toContain('a string value of one line');
        const framing = await rejection(client.metadata({ headers: { 'Content-Length': '5' } }));
        expect(framing.code).toBe('INVALID_ARG');
        expect(framing.message).toContain("header 'Content-Length' is set by the transport");
        const name = await rejection(client.metadata({ headers: { 'bad name': 'x' } }));
        expect(name.code).toBe('INVALID_ARG');
        expect((await client.metadata({ headers: { 'x-ok': 'fine' } })).name).toBe('raw');
      },
    );
  });

  it('drops a connection the server writes to while it is idle, or past a response, and the next call takes a new one', async () => {
    const sockets: Socket[] = [];
    await against(
      (_request, socket) => {
        // The second answer comes with bytes after it, in the same write.
        socket.write(sockets.length === 1 ? `${ok(METADATA)}HTTP/1.1 200 OK\r\n` : ok(METADATA));
        sockets.push(socket);
      },
      async (client, server) => {
        await client.metadata();
        sockets[0]!.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect((await client.metadata()).name).toBe('raw');
        expect(server.connections()).toBe(2);
        expect((await client.metadata()).name).toBe('raw');
        expect(server.connections()).toBe(3);
      },
    );
  });
});
