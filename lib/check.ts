/**
 * Argument checks shared by every public entry point: each bad argument
 * becomes `TritonError('INVALID_ARG')` naming the argument, what was
 * expected and what came, before anything native runs. (After sharp's
 * `lib/is.js`: one small set of predicates and one error shape.)
 */
import { TritonError } from './errors.js';

/** A short, readable rendering of any value for messages. */
export function describe(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'bigint':
      return `${value}n`;
    case 'boolean':
    case 'undefined':
      return String(value);
    case 'function':
      return 'a function';
    case 'symbol':
      return 'a symbol';
    default:
      if (value === null) return 'null';
      if (Array.isArray(value)) return `an array of ${value.length}`;
      if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`;
      return `an object (${Object.prototype.toString.call(value).slice(8, -1)})`;
  }
}

/** `name`: expected `expected`, got `actual`. */
export function invalidParameterError(name: string, expected: string, actual: unknown): TritonError {
  return new TritonError('INVALID_ARG', `${name}: expected ${expected}, got ${describe(actual)}`);
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A string Triton can take as a C string: no NUL, which would cut it short. */
export function isCString(value: unknown): value is string {
  return typeof value === 'string' && !value.includes('\u0000');
}

export function checkObject(name: string, value: unknown): asserts value is Record<string, unknown> {
  if (!isObject(value)) throw invalidParameterError(name, 'an object', value);
}

/** An optional options object: undefined, or an object with only `known` keys. */
export function checkOptions(name: string, value: unknown, known: ReadonlySet<string>): Record<string, unknown> {
  if (value === undefined) return {};
  checkObject(name, value);
  checkKnownKeys(name, value, known);
  return value;
}

export function checkKnownKeys(name: string, value: Record<string, unknown>, known: ReadonlySet<string>): void {
  for (const key in value) {
    if (!known.has(key)) {
      const suggestion = closest(key, known);
      throw new TritonError(
        'INVALID_ARG',
        `${name}: unknown field '${key}'${suggestion === undefined ? '' : ` (did you mean '${suggestion}'?)`}; known fields: ${[...known].join(', ')}`,
      );
    }
  }
}

/** A non-empty string without NUL (names, paths, ids that go to C). */
export function checkName(name: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0) throw invalidParameterError(name, 'a non-empty string', value);
  if (!isCString(value)) throw invalidParameterError(name, 'a string without NUL characters', value);
}

export function checkOptionalString(name: string, value: unknown): asserts value is string | undefined {
  if (value !== undefined && !isCString(value)) throw invalidParameterError(name, 'a string without NUL characters', value);
}

export function checkOptionalBoolean(name: string, value: unknown): asserts value is boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') throw invalidParameterError(name, 'a boolean', value);
}

export function checkInteger(name: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): asserts value is number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalidParameterError(name, `an integer from ${min} to ${max}`, value);
  }
}

export function checkPositiveNumber(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw invalidParameterError(name, 'a positive finite number', value);
  }
}

export function checkOptionalFunction(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') throw invalidParameterError(name, 'a function', value);
}

/** A real AbortSignal: anything else would fail later, inside the completion path. */
export function checkOptionalSignal(name: string, value: unknown): asserts value is AbortSignal | undefined {
  if (value !== undefined && !(value instanceof AbortSignal)) throw invalidParameterError(name, 'an AbortSignal', value);
}

/** The known key nearest to `key` (case-insensitive edit distance ≤ 1/3 of its length). */
export function closest(key: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(key.length / 3)) + 1;
  for (const candidate of known) {
    const d = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
