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

/**
 * A Triton error code: `UNKNOWN`, `INTERNAL`, `NOT_FOUND`, `INVALID_ARG`
 * (bad options, requests or configs), `UNAVAILABLE` (library not found, server
 * stopped, a load or unload the model control mode forbids, an endpoint down),
 * `UNSUPPORTED` (a function newer than the loaded library, several responses to
 * `infer()`), `ALREADY_EXISTS` or `CANCELLED` (aborted signal, timeout).
 */
export type TritonErrorCode = (typeof ERROR_CODES)[number];

/** A model that failed to load, with Triton's reason (from its model index). */
export interface ModelLoadFailure {
  /** The model's name. */
  name: string;
  /** '' when Triton's index gives none. */
  version: string;
  /** Triton's reason, its own text. */
  reason: string;
}

/** Every failure of this package: Triton's own errors and our validation. */
export class TritonError extends Error {
  /** Always `'TritonError'`. */
  override readonly name = 'TritonError';
  /** Triton's error code (or the code of the package's own check). */
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

/** Whether `value` is a {@link TritonError}. */
export function isTritonError(value: unknown): value is TritonError {
  return value instanceof TritonError;
}
