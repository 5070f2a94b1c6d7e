/**
 * Triton's error codes (`TRITONSERVER_Error_Code`), by name. The numeric
 * value of each is its index in this list.
 */
export const ERROR_CODES = [
  'UNKNOWN',
  'INTERNAL',
  'NOT_FOUND',
  'INVALID_ARG',
  'UNAVAILABLE',
  'UNSUPPORTED',
  'ALREADY_EXISTS',
  'CANCELLED',
] as const;

export type TritonErrorCode = (typeof ERROR_CODES)[number];

/** Every failure of this package: Triton's own errors and our validation. */
export class TritonError extends Error {
  override readonly name = 'TritonError';
  readonly code: TritonErrorCode;

  constructor(code: TritonErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export function isTritonError(value: unknown): value is TritonError {
  return value instanceof TritonError;
}
