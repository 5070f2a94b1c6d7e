/** Small pieces both front ends use. */
import type { z } from 'zod';
import { ERROR_CODES, TritonError, type TritonErrorCode } from '../errors.js';

/** Parses options with a zod schema; INVALID_ARG naming each bad field. */
export function parseOptions<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value ?? {});
  if (!result.success) {
    const issues = result.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
    throw new TritonError('INVALID_ARG', `invalid ${what}: ${issues.join('; ')}`);
  }
  return result.data;
}

/** Counts requests in flight so that close() can wait for them. */
export class Tracker {
  #count = 0;
  #closing = false;
  #idle: Array<() => void> = [];

  get count(): number {
    return this.#count;
  }

  get closing(): boolean {
    return this.#closing;
  }

  /** Marks one request started; call the returned function once when it is done. */
  begin(): () => void {
    this.#count++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#count--;
      if (this.#count === 0) for (const resolve of this.#idle.splice(0)) resolve();
    };
  }

  /** Refuses new requests from now on; resolves when none is in flight. */
  drain(): Promise<void> {
    this.#closing = true;
    if (this.#count === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }
}

/**
 * The Triton error code of `error`, recognised by shape rather than by
 * class: the CommonJS build of `tritonserver-node/kserve` carries its own
 * copy of TritonError, and errors from the core must map all the same.
 */
export function tritonErrorCode(error: unknown): TritonErrorCode | undefined {
  if (error instanceof TritonError) return error.code;
  if (error instanceof Error && error.name === 'TritonError') {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code)) return code as TritonErrorCode;
  }
  return undefined;
}

/**
 * Statistics with their bigint durations (lib/observability/statistics.ts)
 * as decimal strings: protobuf's 64-bit fields take those exactly.
 */
export function bigintsAsStrings(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map(bigintsAsStrings);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, bigintsAsStrings(item)]));
  }
  return value;
}
