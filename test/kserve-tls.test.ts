// TLS in serveKServe, with each engine: the native one opens TLS in the
// addon (native/core/tls-session.cc), the node one in node:https/node:http2.
// Both take Node's TLS options, and grpc-js credentials for gRPC. Mutual TLS
// and its failures are in client-faults.test.ts (both engines too).
import { execFile } from 'node:child_process';
import { connect as connectTcp } from 'node:net';
import { resolve } from 'node:path';
import { connect as connectTls } from 'node:tls';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../lib/index.js';
import { Client } from '../lib/client/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { expectNoRequestsLive, makeCertificates, rejection, startServer, type TestCertificates } from './helpers.js';

const run = promisify(execFile);

let server: Server;
let certificates: TestCertificates;

beforeAll(async () => {
  certificates = await makeCertificates();
  server = await startServer();
  await server.loadModel('identity_fp32');
}, 30_000);

afterAll(async () => {
  await server?.stop();
  await certificates?.remove();
});

type GrpcService = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => grpc.Client & Record<string, unknown>;

function grpcService(): GrpcService {
  const definition = protoLoader.loadSync('inference.proto', { includeDirs: [resolve(import.meta.dirname, '../lib/kserve/proto')], keepCase: true });
  return (grpc.loadPackageDefinition(definition) as unknown as { inference: { GRPCInferenceService: GrpcService } }).inference.GRPCInferenceService;
}

function serverLive(client: grpc.Client & Record<string, unknown>, deadlineMs = 5000): Promise<unknown> {
  return new Promise((resolve, reject) => {
    (client.ServerLive as (r: object, m: grpc.Metadata, o: grpc.CallOptions, cb: (e: Error | null, v: unknown) => void) => void).call(
      client, {}, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (e, v) => (e ? reject(e) : resolve(v)),
    );
  });
}

/** When the server closes a TCP connection that sent `bytes` (or nothing), in ms; what it sent back. */
function closedAfter(port: number, bytes?: string): Promise<{ ms: number; received: string }> {
  return new Promise((done, fail) => {
    const started = Date.now();
    let received = '';
    const socket = connectTcp(port, '127.0.0.1', () => {
      if (bytes !== undefined) socket.write(bytes);
    });
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => done({ ms: Date.now() - started, received }));
    setTimeout(() => fail(new Error('the server never closed the connection')), 20_000).unref();
  });
}

describe.each(['native', 'node'] as const)('TLS, %s engine', (engine) => {
  let frontends: KServeFrontends;

  beforeAll(async () => {
    const { serverKey: key, serverCert: cert } = certificates;
    frontends = await serveKServe(server, {
      http: { port: 0, engine, tls: { key, cert } },
      grpc: { port: 0, engine, credentials: grpc.ServerCredentials.createSsl(null, [{ private_key: key, cert_chain: cert }]) },
    });
    expect(frontends.http?.engine).toBe(engine);
    expect(frontends.grpc?.engine).toBe(engine);
  });

  afterAll(async () => {
    await frontends?.close();
  });

  it('serves HTTPS with the given key and certificate', async () => {
    const url = `https://127.0.0.1:${frontends.http?.port}/v2/health/live`;
    // curl without the sanitizers' runtime that test/sanitizers.sh preloads into this process.
    const { LD_PRELOAD: _, ...env } = process.env;
    const { stdout } = await run('curl', ['-s', '--cacert', `${certificates.dir}/ca.pem`, '-w', '%{http_code}', url], { env, timeout: 10_000 });
    expect(stdout).toBe('200');
    // Without the CA, curl does not trust it.
    await expect(run('curl', ['-s', '-f', url], { env, timeout: 10_000 })).rejects.toThrow();
  });

  it("serves gRPC over TLS with grpc-js credentials, or with Node's TLS options; a plaintext client gets no answer", async () => {
    const { serverKey: key, serverCert: cert, ca } = certificates;
    const own = await serveKServe(server, { grpc: { port: 0, engine, tls: { key, cert } } });
    const Service = grpcService();
    try {
      expect(own.grpc?.engine).toBe(engine);
      for (const port of [frontends.grpc?.port, own.grpc?.port]) {
        // TLS server names are host names (RFC 6066), so verify as localhost.
        const client = new Service(`127.0.0.1:${port}`, grpc.credentials.createSsl(ca), { 'grpc.ssl_target_name_override': 'localhost' });
        try {
          expect(await serverLive(client)).toEqual({ live: true });
        } finally {
          client.close();
        }
        const plain = new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
        const refused = (await serverLive(plain, 2000).catch((error: unknown) => error)) as grpc.ServiceError;
        plain.close();
        expect(refused.code).toBe(grpc.status.UNAVAILABLE);
      }
    } finally {
      await own.close();
    }
  });

  it.each(['https', 'grpcs'] as const)('answers inference over %s, 1 MiB each way, and model metadata (which JS answers)', async (scheme) => {
    const port = scheme === 'https' ? frontends.http?.port : frontends.grpc?.port;
    const listener = scheme === 'https' ? frontends.http : frontends.grpc;
    const before = listener?.answeredNatively ?? 0;
    const client = await Client.connect(`${scheme}://127.0.0.1:${port}`, { tls: { ca: certificates.ca } });
    try {
      const model = client.model('identity_fp32');
      const big = new Float32Array(256 * 1024).map((_, i) => i * 0.5);
      for (let round = 0; round < 3; round++) {
        const response = await model.infer({ inputs: { INPUT0: { shape: [1, big.length], data: big } } });
        expect((response.outputs.OUTPUT0!.data as Float32Array).every((value, i) => value === i * 0.5)).toBe(true);
      }
      const metadata = await model.metadata();
      expect(metadata.name).toBe('identity_fp32');
      expect(metadata.inputs.map((input) => input.name)).toEqual(['INPUT0']);
    } finally {
      await client.close();
    }
    // The native engine answered the inferences itself, over TLS.
    expect((listener?.answeredNatively ?? 0) - before).toBe(engine === 'native' ? 3 : 0);
    await expectNoRequestsLive();
  });
});

describe("the native engine's TLS", () => {
  it('is the default where the TLS options are ones it serves; node where one is Node\'s alone; asked for then, it says which', async () => {
    const { serverKey: key, serverCert: cert } = certificates;
    const served = await serveKServe(server, { http: { port: 0, tls: { key, cert } }, grpc: { port: 0, tls: { key, cert } } });
    try {
      expect(served.http?.engine).toBe('native');
      expect(served.grpc?.engine).toBe('native');
    } finally {
      await served.close();
    }
    const ciphers = 'ECDHE-RSA-AES128-GCM-SHA256';
    const nodes = await serveKServe(server, { http: { port: 0, tls: { key, cert, ciphers } }, grpc: { port: 0, tls: { key, cert, ciphers } } });
    try {
      expect(nodes.http?.engine).toBe('node');
      expect(nodes.grpc?.engine).toBe('node');
    } finally {
      await nodes.close();
    }
    for (const listener of ['http', 'grpc'] as const) {
      const refused = await rejection(serveKServe(server, { [listener]: { port: 0, engine: 'native', tls: { key, cert, ciphers } } }));
      expect(refused.code).toBe('INVALID_ARG');
      expect(refused.message).toContain("'ciphers' is Node's alone");
      const notPem = await rejection(serveKServe(server, { [listener]: { port: 0, engine: 'native', tls: { key: 'not a key', cert } } }));
      expect(notPem.code).toBe('INVALID_ARG');
      expect(notPem.message).toContain('tls.cert and tls.key do not load');
    }
  });

  it('takes an encrypted key with its passphrase; a wrong passphrase fails with INVALID_ARG', async () => {
    const { serverKeyEncrypted: key, serverCert: cert, ca } = certificates;
    const wrong = await rejection(serveKServe(server, { http: { port: 0, engine: 'native', tls: { key, cert, passphrase: 'wrong' } } }));
    expect(wrong.code).toBe('INVALID_ARG');
    const served = await serveKServe(server, { http: { port: 0, engine: 'native', tls: { key, cert, passphrase: 'secret' } } });
    const client = await Client.connect(`https://127.0.0.1:${served.http?.port}`, { tls: { ca } });
    try {
      expect(await client.live()).toBe(true);
    } finally {
      await client.close();
      await served.close();
    }
  });

  it('with requestCert and rejectUnauthorized false, lets in a client with no certificate (as Node does)', async () => {
    const { serverKey: key, serverCert: cert, ca } = certificates;
    const tls = { key, cert, ca, requestCert: true, rejectUnauthorized: false };
    const served = await serveKServe(server, { http: { port: 0, engine: 'native', tls }, grpc: { port: 0, engine: 'native', tls } });
    try {
      for (const target of [`https://127.0.0.1:${served.http?.port}`, `grpcs://127.0.0.1:${served.grpc?.port}`]) {
        const client = await Client.connect(target, { tls: { ca } });
        try {
          expect(await client.live()).toBe(true);
        } finally {
          await client.close();
        }
      }
    } finally {
      await served.close();
    }
  });

  it('gRPC: a client that offers ALPN without h2 is refused in the handshake; HTTP goes on without ALPN', async () => {
    const { serverKey: key, serverCert: cert, ca } = certificates;
    const served = await serveKServe(server, { http: { port: 0, engine: 'native', tls: { key, cert } }, grpc: { port: 0, engine: 'native', tls: { key, cert } } });
    try {
      const refused = await new Promise<Error>((done) => {
        const socket = connectTls({ port: served.grpc!.port, host: '127.0.0.1', ca, servername: 'localhost', ALPNProtocols: ['http/1.1'] });
        socket.on('secureConnect', () => done(new Error('the handshake completed')));
        socket.on('error', done);
      });
      expect(refused.message).toMatch(/no application protocol|alert/i);
      const answer = await new Promise<string>((done, fail) => {
        const socket = connectTls({ port: served.http!.port, host: '127.0.0.1', ca, servername: 'localhost', ALPNProtocols: ['h2'] }, () => {
          expect(socket.alpnProtocol).toBe(false);
          socket.write('GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
        });
        let text = '';
        socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
        socket.on('end', () => done(text));
        socket.on('error', fail);
      });
      expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    } finally {
      await served.close();
    }
  });

  it('closes a connection that speaks plaintext at once, and one that never completes its handshake after 10 s', async () => {
    const { serverKey: key, serverCert: cert } = certificates;
    const served = await serveKServe(server, { http: { port: 0, engine: 'native', tls: { key, cert } }, grpc: { port: 0, engine: 'native', tls: { key, cert } } });
    try {
      const plaintext = await closedAfter(served.http!.port, 'POST /v2/models/identity_fp32/infer HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}');
      expect(plaintext.ms).toBeLessThan(5000);
      expect(plaintext.received).not.toContain('HTTP/1.1'); // no request was read
      const preface = await closedAfter(served.grpc!.port, 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
      expect(preface.ms).toBeLessThan(5000);
      const [silentHttp, silentGrpc] = await Promise.all([closedAfter(served.http!.port), closedAfter(served.grpc!.port)]);
      for (const silent of [silentHttp, silentGrpc]) {
        expect(silent.ms).toBeGreaterThanOrEqual(9000);
        expect(silent.ms).toBeLessThan(15_000);
        expect(silent.received).toBe('');
      }
    } finally {
      await served.close();
    }
  }, 30_000);
});
