/**
 * What one endpoint (a gRPC channel or an HTTP connection pool) does for the
 * client, the same for both protocols: requests in, typed answers out. The
 * pool (pool.ts) picks an endpoint per call; client.ts knows nothing of wire formats.
 */
import { TritonError, type TritonErrorCode } from '../errors.js';
import type { InferenceResponse, ModelMetadata, ModelIndexEntry, ServerMetadata } from '../surface.js';
import type { ModelStatistics } from '../observability/statistics.js';
import type { DataType } from '../data-types.js';
import { nativeCompressionAvailable, nativeTlsAvailable } from './native-tls.js';

/** A request or response parameter value on the wire (bigint: a 64-bit sequence id). */
export type WireParameterValue = string | number | boolean | bigint;

/** One input as bytes: numeric data as it lies in memory, BYTES in Triton's length-prefixed form. */
export interface EncodedInput {
  name: string;
  datatype: DataType;
  shape: readonly number[];
  bytes: Uint8Array;
}

export interface EncodedOutput {
  name: string;
  /** Triton's classification extension: the top k classes. */
  classification: number | undefined;
}

/** An inference request ready for either protocol. */
export interface EncodedRequest {
  model: string;
  /** -1: the server's choice. */
  version: number;
  id: string;
  /** Request parameters, the protocol's own (priority, timeout, sequence_*) included. */
  parameters: Record<string, WireParameterValue>;
  inputs: EncodedInput[];
  /** Undefined: every output. */
  outputs: EncodedOutput[] | undefined;
  /** Sum of the inputs' bytes (checked against the message size limit). */
  byteLength: number;
}

/** A response as it came off the wire, outputs already Tensors. */
export type DecodedResponse = Omit<InferenceResponse, 'dispose' | typeof Symbol.dispose | 'trace'>;

/** Per-call settings every transport method takes. */
export interface Call {
  /** Absolute deadline (Date.now() based), or undefined for none. */
  deadline: number | undefined;
  signal: AbortSignal | undefined;
  headers: Record<string, string>;
}

/** Load parameters: the config as JSON text, model files by relative path. */
export interface LoadParameters {
  config: string | undefined;
  files: Array<[string, Uint8Array]>;
}

/** Receives a stream's responses (decoupled models send any number). */
export interface StreamSink {
  response(response: DecodedResponse): void;
  /** The request failed (the stream ends). */
  error(error: TritonError): void;
  /** The request's last response has arrived. */
  end(): void;
}

/** A running stream request; `cancel()` ends it on the server too. */
export interface StreamHandle {
  cancel(): void;
}

export interface Transport {
  /** e.g. `grpc://10.0.0.7:8001`: named in errors and metrics. */
  readonly endpoint: string;
  /** Whether the server can stream (gRPC); HTTP answers one response per request. */
  readonly streaming: boolean;
  live(call: Call): Promise<boolean>;
  ready(call: Call): Promise<boolean>;
  metadata(call: Call): Promise<ServerMetadata>;
  modelIndex(readyOnly: boolean, call: Call): Promise<ModelIndexEntry[]>;
  loadModel(name: string, parameters: LoadParameters, call: Call): Promise<void>;
  unloadModel(name: string, unloadDependents: boolean, call: Call): Promise<void>;
  modelReady(name: string, version: number, call: Call): Promise<boolean>;
  modelMetadata(name: string, version: number, call: Call): Promise<ModelMetadata>;
  /** The model configuration as Triton's JSON (snake_case). */
  modelConfig(name: string, version: number, call: Call): Promise<unknown>;
  /** '' for every model. */
  statistics(name: string, version: number, call: Call): Promise<ModelStatistics[]>;
  infer(request: EncodedRequest, call: Call): Promise<DecodedResponse>;
  stream(request: EncodedRequest, call: Call, sink: StreamSink): StreamHandle;
  close(): void;
}

/**
 * A failure of the connection itself (refused, reset, TLS, no answer in
 * time), as opposed to the server's answer: the call may be retried on
 * another endpoint, and the endpoint is checked before it is used again.
 */
export class ConnectionError extends TritonError {
  /** False when the request surely never reached the server (e.g. the connection was refused): always safe to retry. */
  readonly sent: boolean;
  override readonly endpoint: string;

  constructor(message: string, endpoint: string, options: { cause?: unknown; sent?: boolean } = {}) {
    super('UNAVAILABLE', `${message} (${endpoint})`, { cause: options.cause });
    this.sent = options.sent ?? true;
    this.endpoint = endpoint;
  }
}

/** The server refused the call's credentials (gRPC PERMISSION_DENIED or UNAUTHENTICATED, HTTP 401 or 403): not retried. */
export class PermissionError extends TritonError {
  override readonly endpoint: string;

  constructor(message: string, endpoint: string) {
    super('UNAVAILABLE', `permission denied: ${message} (${endpoint})`);
    this.endpoint = endpoint;
  }
}

/** The error a server answered with, naming the endpoint. */
export function serverError(code: TritonErrorCode, message: string, endpoint: string, cause?: unknown): TritonError {
  const error = new TritonError(code, `${message} (${endpoint})`, cause === undefined ? undefined : { cause });
  return Object.assign(error, { endpoint });
}

/** The model version as the protocols write it ('' for the server's choice). */
export function versionText(version: number): string {
  return version < 0 ? '' : String(version);
}

/** A response's version field (text on the wire) as the number `InferenceResponse.model.version` carries. */
export function versionNumber(text: string | undefined): number {
  const n = Number(text);
  return text === undefined || text === '' || !Number.isSafeInteger(n) ? -1 : n;
}

/**
 * The addon's channel class (`found`: it, or why it is not here) where the
 * `transport` option asks for it and it can serve these options; undefined
 * where the JS transport takes the calls.
 */
export function nativeChannelFor<T>(options: { transport: 'auto' | 'native' | 'js'; compression: string }, tls: boolean, found: () => T | string): T | undefined {
  if (options.transport === 'js') return undefined;
  const auto = options.transport === 'auto';
  const channel = found();
  if (typeof channel !== 'string' && options.compression !== 'none' && !nativeCompressionAvailable()) {
    if (auto) return undefined;
    throw new TritonError('UNAVAILABLE', "transport 'native' cannot compress here: this runtime exports no zlib to addons (use transport 'js' or 'auto')");
  }
  if (typeof channel !== 'string' && tls && !nativeTlsAvailable()) {
    if (auto) return undefined;
    throw new TritonError('UNAVAILABLE', "transport 'native' cannot do TLS here: this runtime exports no OpenSSL 3 to addons (use transport 'js' or 'auto')");
  }
  if (typeof channel !== 'string') return channel;
  if (auto) return undefined;
  throw new TritonError('UNAVAILABLE', `transport 'native' is not available here: ${channel}`);
}

/** Parameters the protocol sets that the caller did not. */
export const PROTOCOL_RESPONSE_PARAMETERS = new Set(['triton_final_response']);
