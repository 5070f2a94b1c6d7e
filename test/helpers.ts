import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
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
