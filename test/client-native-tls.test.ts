/**
 * TLS in the client's native transports (native/client/tls-session.cc)
 * against servers that do not complete a handshake: a server that speaks
 * no TLS, one that never answers, one that sends noise, one that hangs up
 * after the client's hello. Every connect() must fail promptly with
 * UNAVAILABLE and say why, for gRPC and HTTP alike. And a body that ends
 * with the TLS session (close_notify) is read whole. The working cases
 * (mutual TLS, names, addresses) are in client-faults.test.ts.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../lib/client/index.js';
import { nativeTlsAvailable } from '../lib/client/native-tls.js';
import { rejection } from './helpers.js';

type Behaviour = (socket: Socket) => void;

const behaviours: Record<string, Behaviour> = {
  'answers in plain HTTP': (socket) => socket.once('data', () => socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n')),
  'never answers': () => undefined,
  'sends noise': (socket) => socket.once('data', () => socket.write(randomBytes(4096))),
  'hangs up after the hello': (socket) => socket.once('data', () => socket.destroy()),
};

let port = 0;
let behaviour: Behaviour = () => undefined;
const sockets = new Set<Socket>();
const server = createServer((socket) => {
  sockets.add(socket);
  socket.on('close', () => sockets.delete(socket));
  socket.on('error', () => undefined);
  behaviour(socket);
});

beforeAll(async () => {
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  port = (server.address() as { port: number }).port;
});

afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise<void>((done) => server.close(() => done()));
});

describe('native TLS against a server that does not complete a handshake', () => {
  it('is available where Node exports OpenSSL 3 (Node itself does)', () => {
    expect(nativeTlsAvailable()).toBe(true);
  });

  const cases = Object.keys(behaviours).flatMap((name) => (['grpcs', 'https'] as const).map((scheme) => [scheme, name] as const));
  it.each(cases)('%s: a server that %s fails connect() with UNAVAILABLE', async (scheme, name) => {
    behaviour = behaviours[name]!;
    const started = Date.now();
    const error = await rejection(Client.connect(`${scheme}://127.0.0.1:${port}`, { transport: 'native', connectTimeoutMs: 800, retry: { attempts: 1 } }));
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toContain(`could not connect to Triton at ${scheme}://127.0.0.1:${port}`);
    if (name === 'never answers') expect(error.message).toMatch(/no TLS session within 800 ms|no answer within 800 ms/);
    else expect(error.message).toMatch(/TLS|closed the connection/);
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('native TLS: a response that ends with the session', () => {
  it('reads an HTTP body framed by the end of the TLS session (close_notify), then opens a new session', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'client-tls-end-'));
    const run = promisify(execFile);
    try {
      await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')]);
      const cert = await readFile(join(dir, 'cert.pem'));
      const body = JSON.stringify({ name: 'tls', version: '1', extensions: [] });
      let sessions = 0;
      const tlsServer = createTlsServer({ key: await readFile(join(dir, 'key.pem')), cert, ALPNProtocols: ['http/1.1'] }, (socket) => {
        sessions++;
        socket.on('error', () => undefined);
        let seen = '';
        socket.on('data', (chunk: Buffer) => {
          seen += chunk.toString('latin1');
          if (!seen.includes('\r\n\r\n')) return;
          const live = seen.startsWith('GET /v2/health/');
          seen = '';
          // Health answers keep the session; metadata ends with it.
          if (live) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
          else socket.end(`HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n${body}`);
        });
      });
      await new Promise<void>((done) => tlsServer.listen(0, '127.0.0.1', done));
      const tlsPort = (tlsServer.address() as { port: number }).port;
      const client = await Client.connect(`https://127.0.0.1:${tlsPort}`, { transport: 'native', tls: { ca: cert } });
      try {
        for (let i = 0; i < 3; i++) expect(await client.metadata()).toEqual({ name: 'tls', version: '1', extensions: [] });
        expect(sessions).toBeGreaterThanOrEqual(3);
      } finally {
        await client.close();
        await new Promise<void>((done) => tlsServer.close(() => done()));
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
