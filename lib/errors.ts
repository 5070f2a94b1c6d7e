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

/** A model that failed to load, with Triton's reason (from its model index). */
export interface ModelLoadFailure {
  name: string;
  /** '' when Triton's index gives none. */
  version: string;
  reason: string;
}

/** Every failure of this package: Triton's own errors and our validation. */
export class TritonError extends Error {
  override readonly name = 'TritonError';
  readonly code: TritonErrorCode;
  /** For load failures (start, loadModel, pollModelRepository): each failed model and why. */
  declare readonly models?: ModelLoadFailure[];
  /** Remote mode (`tritonserver-node/client`): the endpoint that answered or failed, e.g. `grpc://10.0.0.7:8001`. */
  declare readonly endpoint?: string;

  constructor(code: TritonErrorCode, message: string, options?: { cause?: unknown; models?: ModelLoadFailure[] }) {
    super(message, options);
    this.code = code;
    if (options?.models !== undefined) this.models = options.models;
  }
}

export function isTritonError(value: unknown): value is TritonError {
  return value instanceof TritonError;
}
