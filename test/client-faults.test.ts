/**
 * Remote mode under faults: bad targets, refused and silent servers, one of
 * two endpoints down, a server killed mid-stream, 64 MiB tensors, TLS with a
 * self-signed CA and client certificates, wrong credentials. Each ends in a
 * clear TritonError within its timeout, never a hang.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Server } from '../lib/index.js';
import { Client, type ClientOptions } from '../lib/client/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { MODELS, REPO_ROOT, expectNoRequestsLive, makeCertificates, rejection, startServer, type TestCertificates } from './helpers.js';

const run = promisify(execFile);

let server: Server;
let frontends: KServeFrontends;
const small = { INPUT0: { shape: [1, 2], data: new Float32Array([1, 2]) } };

beforeAll(async () => {
  server = await startServer();
  for (const name of ['identity_fp32', 'identity_uint8', 'repeat_int32', 'slow']) await server.loadModel(name);
  frontends = await serveKServe(server, {
    http: { port: 0 },
    grpc: { port: 0 },
    maxBodyBytes: 80 * 1024 * 1024,
    authorize: ({ headers }) => headers.authorization === undefined || headers.authorization === 'Bearer good',
  });
});

afterAll(async () => {
  await frontends?.close();
  await server?.stop();
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((done) => probe.listen(0, '127.0.0.1', done));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((done) => probe.close(() => done()));
  return port;
}

/** A TCP server that accepts connections and never says a word. */
async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const silent: NetServer = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((done) => silent.listen(0, '127.0.0.1', done));
  return {
    port: (silent.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((done) => silent.close(() => done()));
    },
  };
}

async function timed<T>(promise: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await promise;
  return { value, ms: Date.now() - started };
}

describe('targets', () => {
  it.each([
    ['ftp://host:21', "unsupported scheme 'ftp:'"],
    ['grpc://', 'no host'],
    ['not a url', 'expected grpc://host:port'],
    ['http://host:8000/v2/models', 'a path, query or fragment is not supported'],
    ['http://user:secret@host:8000', "put credentials in the 'headers' option"],
  ])('refuses %s with INVALID_ARG', async (target, message) => {
    const error = await rejection(Client.connect(target));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain(message);
  });

  it('refuses a list that mixes protocols, an empty list and unknown options', async () => {
    expect((await rejection(Client.connect(['grpc://a:8001', 'http://b:8000']))).message).toContain('mix protocols');
    expect((await rejection(Client.connect([]))).code).toBe('INVALID_ARG');
    const options = await rejection(Client.connect('grpc://a:8001', { retries: 3 } as never));
    expect(options.code).toBe('INVALID_ARG');
    expect(options.message).toContain('retries');
  });
});

// Both protocols with both transports (the addon's, and node:http2's or undici's).
describe.each([
  { protocol: 'grpc', transport: 'native' },
  { protocol: 'grpc', transport: 'js' },
  { protocol: 'http', transport: 'native' },
  { protocol: 'http', transport: 'js' },
] as const)('$protocol ($transport)', ({ protocol, transport }) => {
  const connect = (target: string | string[], options: ClientOptions = {}): Promise<Client> => Client.connect(target, { transport, ...options });
  const url = (port: number) => `${protocol}://127.0.0.1:${port}`;
  const live = () => url(protocol === 'grpc' ? frontends.grpc!.port : frontends.http!.port);

  it('a refused connection fails connect() within connectTimeoutMs with UNAVAILABLE naming the endpoint and the cause', async () => {
    const port = await closedPort();
    const { value: error, ms } = await timed(rejection(connect(url(port), { connectTimeoutMs: 800, healthCheckIntervalMs: 100 })));
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toContain(`could not connect to Triton at ${url(port)}: `);
    expect(error.message).toContain('ECONNREFUSED');
    expect(ms).toBeGreaterThanOrEqual(700);
    expect(ms).toBeLessThan(2500);
  });

  it('a server that accepts and never answers fails connect() after connectTimeoutMs, and is left out beside a live one', async () => {
    const silent = await silentServer();
    try {
      const { value: error, ms } = await timed(rejection(connect(url(silent.port), { connectTimeoutMs: 400 })));
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.message).toContain('no answer within 400 ms');
      expect(ms).toBeLessThan(3000);
      // Beside a live endpoint, the silent one is left out once it fails to answer: every request succeeds.
      const client = await connect([url(silent.port), live()], { connectTimeoutMs: 300, healthCheckIntervalMs: 50 });
      try {
        const { value: responses, ms: took } = await timed(
          Promise.all(Array.from({ length: 6 }, (_, i) => client.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([i]) } } }))),
        );
        expect(responses.map((r) => (r.outputs.OUTPUT0!.data as Float32Array)[0])).toEqual([0, 1, 2, 3, 4, 5]);
        expect(took).toBeLessThan(3000);
      } finally {
        await client.close();
      }
    } finally {
      await silent.close();
    }
  });

  it('with one of two endpoints down, every request succeeds on the other', async () => {
    const down = url(await closedPort());
    const client = await connect([down, live()], { healthCheckIntervalMs: 50 });
    try {
      const responses = await Promise.all(
        Array.from({ length: 40 }, (_, i) => client.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([i]) } } })),
      );
      expect(responses.map((r) => (r.outputs.OUTPUT0!.data as Float32Array)[0])).toEqual(Array.from({ length: 40 }, (_, i) => i));
      expect(client.endpoints).toEqual([down, live()]);
    } finally {
      await client.close();
    }
  });

  it('carries a 60 MiB tensor both ways, and refuses one over maxMessageBytes before sending it', async () => {
    const client = await connect(live(), { maxMessageBytes: 72 * 1024 * 1024 });
    try {
      const data = new Uint8Array(60 * 1024 * 1024);
      for (let i = 0; i < data.length; i += 4096) data[i] = i / 4096;
      const response = await client.model('identity_uint8').infer({ inputs: { INPUT0: { shape: [1, data.length], data } } });
      const out = response.outputs.OUTPUT0!.data as Uint8Array;
      expect(out.length).toBe(data.length);
      expect(Buffer.compare(Buffer.from(out.buffer, out.byteOffset, out.byteLength), Buffer.from(data.buffer))).toBe(0);
      const tooBig = await rejection(client.model('identity_uint8').infer({ inputs: { INPUT0: { shape: [1, 73 * 1024 * 1024], data: new Uint8Array(73 * 1024 * 1024) } } }));
      expect(tooBig.code).toBe('INVALID_ARG');
      expect(tooBig.message).toContain('more than maxMessageBytes (75497472)');
    } finally {
      await client.close();
    }
  });

  it('sends the headers of the client and of the call; wrong credentials are refused', async () => {
    const good = await connect(live(), { headers: { authorization: 'Bearer good' } });
    const bad = await connect(live());
    try {
      expect((await good.model('identity_fp32').infer({ inputs: small })).outputs.OUTPUT0!.size).toBe(2);
      const refused = await rejection(bad.model('identity_fp32').infer({ inputs: small, headers: { authorization: 'Bearer wrong' } }));
      expect(refused.code).toBe('UNAVAILABLE');
      expect(refused.message).toContain('permission denied');
      expect(refused.endpoint).toBe(live());
      const refusedCall = await rejection(bad.metadata({ headers: { authorization: 'Bearer wrong' } }));
      expect(refusedCall.message).toContain('permission denied');
    } finally {
      await good.close();
      await bad.close();
    }
  });

  it('a closed client refuses calls with UNAVAILABLE', async () => {
    const client = await connect(live());
    await client.close();
    await client.close();
    const error = await rejection(client.live());
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toContain('closed');
  });
});

describe('a server killed under the client', () => {
  let child: ChildProcess;
  let ports: { grpc: number; http: number };

  beforeEach(async () => {
    child = spawn(process.execPath, ['--import', 'tsx', resolve(import.meta.dirname, 'fixtures/kserve-process.ts'), MODELS], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    ports = await new Promise((done, fail) => {
      let text = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        if (text.includes('\n')) done(JSON.parse(text.split('\n')[0]!));
      });
      child.once('exit', (code) => fail(new Error(`the server process exited (${code})`)));
    });
  }, 30_000);

  afterEach(() => {
    child?.kill('SIGKILL');
  });

  it.each(['native', 'js'] as const)('a stream rejects promptly with UNAVAILABLE, an infer too, and nothing stays pending (gRPC %s)', async (transport) => {
    const client = await Client.connect(`grpc://127.0.0.1:${ports.grpc}`, { transport });
    const http = await Client.connect(`http://127.0.0.1:${ports.http}`);
    try {
      const seen: number[] = [];
      const streaming = (async () => {
        for await (const response of client.model('repeat_int32').stream({
          inputs: { IN: new Int32Array(Array.from({ length: 100 }, (_, i) => i)), DELAY_MS: new Uint32Array([100]) },
        })) {
          seen.push((response.outputs.OUT!.data as Int32Array)[0]!);
          if (seen.length === 2) child.kill('SIGKILL');
        }
      })();
      const { value: error, ms } = await timed(rejection(streaming));
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.endpoint).toBe(`grpc://127.0.0.1:${ports.grpc}`);
      expect(seen.length).toBeGreaterThanOrEqual(2);
      expect(seen.length).toBeLessThan(10);
      expect(ms).toBeLessThan(3000);
      const after = await rejection(http.model('identity_fp32').infer({ inputs: small, timeoutMs: 5000 }));
      expect(after.code).toBe('UNAVAILABLE');
      expect((await rejection(client.live({ timeoutMs: 5000 }))).code).toBe('UNAVAILABLE');
    } finally {
      await client.close();
      await http.close();
    }
  });
});

describe('TLS', () => {
  let certificates: TestCertificates;
  // The same mutual TLS served by each engine: the native one opens TLS in the addon, node's in node:https/node:http2.
  const tlsFrontends: Partial<Record<'native' | 'node', KServeFrontends>> = {};
  let ca: Buffer;
  let clientCert: Buffer;
  let clientKey: Buffer;

  beforeAll(async () => {
    certificates = await makeCertificates();
    ({ ca, clientCert, clientKey } = certificates);
    const { serverKey: key, serverCert: cert } = certificates;
    for (const engine of ['native', 'node'] as const) {
      tlsFrontends[engine] = await serveKServe(server, {
        // Mutual TLS: the client must show a certificate of the CA.
        http: { port: 0, engine, tls: { key, cert, ca, requestCert: true, rejectUnauthorized: true } },
        grpc: { port: 0, engine, credentials: grpc.ServerCredentials.createSsl(ca, [{ private_key: key, cert_chain: cert }], true) },
      });
      expect(tlsFrontends[engine]!.http!.engine).toBe(engine);
      expect(tlsFrontends[engine]!.grpc!.engine).toBe(engine);
    }
  }, 30_000);

  afterAll(async () => {
    for (const frontends of Object.values(tlsFrontends)) await frontends?.close();
    await certificates?.remove();
  });

  const targets = (['native', 'node'] as const).flatMap((engine) => [
    [`https, ${engine} engine`, () => `https://127.0.0.1:${tlsFrontends[engine]!.http!.port}`],
    [`grpcs, ${engine} engine`, () => `grpcs://127.0.0.1:${tlsFrontends[engine]!.grpc!.port}`],
  ] as const);
  const cases = targets.flatMap(([name, target]) => (['native', 'js'] as const).map((transport) => [name, transport, target] as const));

  it.each(cases)('%s (%s): mutual TLS with a self-signed CA works; a client without the CA or its certificate fails clearly', async (_, transport, target) => {
    const client = await Client.connect(target(), { transport, tls: { ca, cert: clientCert, key: clientKey, servername: 'localhost' } });
    try {
      expect(client.transport).toBe(transport);
      const response = await client.model('identity_fp32').infer({ inputs: small });
      expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([1, 2]);
      // A tensor of 1 MiB each way: TLS records across many reads and writes.
      const big = new Float32Array(256 * 1024).map((_, i) => i);
      const echoed = await client.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, big.length], data: big } } });
      expect((echoed.outputs.OUTPUT0!.data as Float32Array).every((value, i) => value === i)).toBe(true);
    } finally {
      await client.close();
    }
    const untrusted = await rejection(Client.connect(target(), { transport, connectTimeoutMs: 3000 }));
    expect(untrusted.code).toBe('UNAVAILABLE');
    expect(untrusted.message).toMatch(/could not connect.*(certificate|TLS|self.signed|SSL)/i);
    const noCert = await rejection(Client.connect(target(), { transport, connectTimeoutMs: 3000, tls: { ca, servername: 'localhost' } }));
    expect(noCert.code).toBe('UNAVAILABLE');
  });

  it.each(cases)('%s (%s): a certificate for another name fails; an address in the certificate is checked as an address', async (_, transport, target) => {
    const wrongName = await rejection(Client.connect(target(), { transport, connectTimeoutMs: 3000, tls: { ca, cert: clientCert, key: clientKey, servername: 'elsewhere.example' } }));
    expect(wrongName.code).toBe('UNAVAILABLE');
    expect(wrongName.message).toMatch(/elsewhere\.example|hostname|altname|mismatch/i);
    // No servername: the target's address, 127.0.0.1, which the certificate carries as an IP.
    const byAddress = await Client.connect(target(), { transport, tls: { ca, cert: clientCert, key: clientKey } });
    try {
      expect(await byAddress.live()).toBe(true);
    } finally {
      await byAddress.close();
    }
  });

  it('a native TLS client given a key that is not PEM fails at connect with INVALID_ARG', async () => {
    const error = await rejection(Client.connect(`grpcs://127.0.0.1:${tlsFrontends.native!.grpc!.port}`, { transport: 'native', tls: { ca, cert: clientCert, key: 'not a key' } }));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain('tls.cert and tls.key do not load');
  });
});

it('a client-only program loads no native addon until a client takes the native transport', async () => {
  const script = `
    const loaded = [];
    const dlopen = process.dlopen;
    process.dlopen = (module, file, ...rest) => { loaded.push(file); return dlopen(module, file, ...rest); };
    const ours = () => loaded.filter((file) => !file.includes('node_modules'));
    const { Client } = await import(${JSON.stringify(resolve(REPO_ROOT, 'lib/client/index.ts'))});
    const afterImport = ours();
    const refused = { connectTimeoutMs: 200, retry: { attempts: 1 } };
    await Client.connect('grpc://127.0.0.1:1', { ...refused, transport: 'js' }).catch(() => undefined);
    await Client.connect('http://127.0.0.1:1', { ...refused, transport: 'js' }).catch(() => undefined);
    const afterJs = ours();
    const error = await Client.connect('http://127.0.0.1:1', refused).catch((e) => e);
    const afterHttp = ours();
    await Client.connect('grpc://127.0.0.1:1', refused).catch(() => undefined);
    process.stdout.write(JSON.stringify({ afterImport, afterJs, afterHttp, afterAuto: ours(), code: error.code }));
  `;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: REPO_ROOT, timeout: 20_000 });
  const { afterImport, afterJs, afterHttp, afterAuto, code } = JSON.parse(stdout) as Record<string, unknown>;
  expect(afterImport).toEqual([]);
  expect(afterJs).toEqual([]);
  // An 'auto' client loads the addon once, for either protocol.
  expect(afterHttp).toEqual([expect.stringMatching(/\.node$/)]);
  expect(afterAuto).toEqual(afterHttp);
  expect(code).toBe('UNAVAILABLE');
});

it('leaves no request alive in the in-process server behind the front ends', async () => {
  await expectNoRequestsLive(5000);
});
