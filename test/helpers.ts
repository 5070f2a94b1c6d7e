import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect, vi } from 'vitest';
import { Server, TritonError, liveObjects, type ServerOptions } from '../lib/index.js';

export const REPO_ROOT = resolve(import.meta.dirname, '..');
export const MODELS = resolve(import.meta.dirname, 'models');
/** The test core built as if it were an older Triton (C API 1.24). */
export const OLD_API_LIBRARY = resolve(REPO_ROOT, 'build/testcore/api_1_24/libtritonserver.so');

/** Info logs off: tests read errors, not Triton's progress lines. */
export const QUIET = { log: { info: false } } as const;

export function startServer(options: Partial<ServerOptions> = {}): Promise<Server> {
  return Server.start({ modelRepository: MODELS, modelControlMode: 'explicit', ...QUIET, ...options });
}

/** A temporary model repository holding copies of some test models. */
export async function copyRepository(models: string[]): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), 'tritonserver-node-repo-'));
  for (const model of models) await cp(join(MODELS, model), join(path, model), { recursive: true });
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** Runs a full garbage collection (vitest starts workers with --expose-gc). */
export async function collectGarbage(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Waits, up to `timeoutMs`, until no request or response is live. Triton
 * releases a request after its final response (a Python model's once its
 * execute() has returned), so that can come after the caller has its result.
 */
export async function expectNoRequestsLive(timeoutMs = 5000): Promise<void> {
  await vi.waitFor(
    async () => {
      await collectGarbage();
      expect(liveObjects()).toMatchObject({ requests: 0, responses: 0 });
    },
    { timeout: timeoutMs, interval: 20 },
  );
}

/** The TritonError a promise rejects with (fails the test if it resolves). */
export async function rejection(promise: Promise<unknown>): Promise<TritonError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(TritonError);
    return error as TritonError;
  }
  throw new Error('expected a rejection');
}

/** PEM files of a private CA, a server certificate for 127.0.0.1 and localhost, and a client certificate, made by openssl. */
export interface TestCertificates {
  dir: string;
  ca: Buffer;
  serverKey: Buffer;
  serverCert: Buffer;
  /** serverKey encrypted with the passphrase 'secret'. */
  serverKeyEncrypted: Buffer;
  clientKey: Buffer;
  clientCert: Buffer;
  remove(): Promise<void>;
}

export async function makeCertificates(): Promise<TestCertificates> {
  const run = promisify(execFile);
  const dir = await mkdtemp(join(tmpdir(), 'tls-'));
  const at = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  await openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=test CA', '-keyout', at('ca.key'), '-out', at('ca.pem'));
  for (const [name, subject, ext] of [
    ['server', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost'],
    ['client', '/CN=client', 'extendedKeyUsage=clientAuth'],
  ] as const) {
    await openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', subject, '-keyout', at(`${name}.key`), '-out', at(`${name}.csr`));
    await run('sh', ['-c', `printf '%s\\n' '${ext}' > ${name}.ext`], { cwd: dir });
    await openssl('x509', '-req', '-in', at(`${name}.csr`), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', at(`${name}.ext`), '-out', at(`${name}.pem`));
  }
  await openssl('pkey', '-in', at('server.key'), '-aes256', '-passout', 'pass:secret', '-out', at('server-encrypted.key'));
  return {
    dir,
    ca: await readFile(at('ca.pem')),
    serverKey: await readFile(at('server.key')),
    serverCert: await readFile(at('server.pem')),
    serverKeyEncrypted: await readFile(at('server-encrypted.key')),
    clientKey: await readFile(at('client.key')),
    clientCert: await readFile(at('client.pem')),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
