// TLS through Node's own options (https for HTTP, http2 for gRPC), and
// grpc-js credentials for gRPC. The certificate is made by openssl for 127.0.0.1.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../lib/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { startServer } from './helpers.js';

const run = promisify(execFile);

let server: Server;
let frontends: KServeFrontends;
let dir: string;
let cert: Buffer;
let key: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kserve-tls-'));
  await run('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ]);
  key = await readFile(join(dir, 'key.pem'));
  cert = await readFile(join(dir, 'cert.pem'));
  server = await startServer();
  frontends = await serveKServe(server, {
    http: { port: 0, tls: { key, cert } },
    grpc: { port: 0, credentials: grpc.ServerCredentials.createSsl(null, [{ private_key: key, cert_chain: cert }]) },
  });
});

afterAll(async () => {
  await frontends?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('TLS', () => {
  it('serves HTTPS with the given key and certificate', async () => {
    const { stdout } = await run('curl', ['-s', '--cacert', join(dir, 'cert.pem'), '-w', '%{http_code}', `https://127.0.0.1:${frontends.http?.port}/v2/health/live`]);
    expect(stdout).toBe('200');
    await expect(run('curl', ['-s', '-f', `https://127.0.0.1:${frontends.http?.port}/v2/health/live`])).rejects.toThrow();
  });

  it('serves gRPC over TLS with grpc-js credentials, or with Node\'s TLS options', async () => {
    const own = await serveKServe(server, { grpc: { port: 0, tls: { key, cert } } });
    const definition = protoLoader.loadSync('inference.proto', { includeDirs: [resolve(import.meta.dirname, '../lib/kserve/proto')], keepCase: true });
    const Service = (grpc.loadPackageDefinition(definition) as unknown as {
      inference: {
        GRPCInferenceService: new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => grpc.Client &
          Record<string, unknown>;
      };
    }).inference.GRPCInferenceService;
    // TLS server names are host names (RFC 6066), so verify as localhost.
    try {
      for (const port of [frontends.grpc?.port, own.grpc?.port]) {
        const client = new Service(`127.0.0.1:${port}`, grpc.credentials.createSsl(cert), {
          'grpc.ssl_target_name_override': 'localhost',
        });
        try {
          const live = await new Promise((resolve, reject) => {
            (client.ServerLive as (r: object, cb: (e: Error | null, v: unknown) => void) => void).call(client, {}, (e, v) => (e ? reject(e) : resolve(v)));
          });
          expect(live).toEqual({ live: true });
        } finally {
          client.close();
        }
        // A plaintext client gets no answer from a TLS port.
        const plain = new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
        const refused = await new Promise<grpc.ServiceError>((resolve) => {
          (plain.ServerLive as (r: object, m: grpc.Metadata, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null) => void) => void).call(
            plain, {}, new grpc.Metadata(), { deadline: Date.now() + 2000 }, (e) => resolve(e as grpc.ServiceError),
          );
        });
        plain.close();
        expect(refused.code).toBe(grpc.status.UNAVAILABLE);
      }
    } finally {
      await own.close();
    }
  });
});
