/**
 * The gRPC transport: KServe v2's `GRPCInferenceService` to one address over
 * `node:http2` (lib/client/h2.ts). Inference messages go through this
 * package's own protobuf codec (lib/kserve/infer-wire.ts): tensors as
 * `raw_input_contents` / `raw_output_contents`, outputs as views of the
 * received message; the other messages through @grpc/proto-loader's.
 */
import { TritonError, type TritonErrorCode } from '../errors.js';
import type { ModelMetadata, TensorMetadata, ModelIndexEntry, ServerMetadata } from '../surface.js';
import { parseStatistics, type ModelStatistics } from '../observability/statistics.js';
import { outputTensor, type Tensor } from '../tensor.js';
import { DATA_TYPE_INFO } from '../data-types.js';
import { checkDatatype } from '../kserve/codec.js';
import { decodeModelInferResponse, decodeModelStreamInferResponse, encodeModelInferRequest, type WireInferResponse } from '../kserve/infer-wire.js';
import { loadInferenceMessages, type MessageCodec } from '../kserve/proto.js';
import { GrpcConnection, STATUS, type CallEnd, type GrpcChannel } from './h2.js';
import { NativeGrpcConnection, nativeGrpcChannelClass } from './native-grpc.js';
import { nativeTlsSettings } from './native-tls.js';
import type { NativeGrpcChannelClass } from '../native.js';

const SERVICE = '/inference.GRPCInferenceService/';
import type { ResolvedClientOptions } from './options.js';
import {
  ConnectionError,
  nativeChannelFor,
  PermissionError,
  serverError,
  versionNumber,
  versionText,
  type Call,
  type DecodedResponse,
  type EncodedRequest,
  type LoadParameters,
  type StreamHandle,
  type StreamSink,
  type Transport,
  type WireParameterValue,
} from './transport.js';

/** gRPC status (numeric) → Triton's error code, the inverse of Triton's front end. */
const CODE_OF_STATUS: Readonly<Record<number, TritonErrorCode>> = {
  1: 'CANCELLED',
  2: 'UNKNOWN',
  3: 'INVALID_ARG',
  4: 'CANCELLED',
  5: 'NOT_FOUND',
  6: 'ALREADY_EXISTS',
  // Too large a message: the caller's to fix (maxMessageBytes or a smaller tensor).
  8: 'INVALID_ARG',
  12: 'UNSUPPORTED',
  13: 'INTERNAL',
  14: 'UNAVAILABLE',
};
const STATUS_PERMISSION_DENIED = 7;
const STATUS_UNAUTHENTICATED = 16;

function tensorMetadata(tensors: Array<{ name: string; datatype: string; shape: string[] }>): TensorMetadata[] {
  return tensors.map((t) => ({ name: t.name, datatype: checkDatatype(t.datatype, `tensor '${t.name}'`), shape: t.shape.map(Number) }));
}

/** A ModelInferResponse as the package's response: outputs as views over the message's bytes. */
function decodeResponse(message: WireInferResponse, endpoint: string): DecodedResponse & { finalFlag: boolean | undefined } {
  const outputs: Record<string, Tensor> = {};
  const raw = message.raw_output_contents;
  const wireOutputs = message.outputs;
  for (let index = 0; index < wireOutputs.length; index++) {
    const output = wireOutputs[index]!;
    const bytes = raw[index];
    if (bytes === undefined) {
      throw serverError('INTERNAL', `output '${output.name}' came without raw_output_contents`, endpoint);
    }
    const datatype = checkDatatype(output.datatype, `output '${output.name}'`);
    outputs[output.name] = outputTensor(output.name, DATA_TYPE_INFO[datatype].enum, output.shape, bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  const parameters = message.parameters;
  const finalParameter = parameters.triton_final_response;
  if (finalParameter !== undefined) delete parameters.triton_final_response;
  return {
    model: { name: message.model_name, version: versionNumber(message.model_version) },
    id: message.id,
    outputs,
    parameters,
    final: true,
    finalFlag: finalParameter === undefined ? undefined : finalParameter === true,
  };
}

/** gRPC's message header: a compressed flag and a 4-byte length. */
const GRPC_PREFIX = 5;

function encodeRequest(request: EncodedRequest, extra?: Record<string, WireParameterValue>, prefix = 0): Buffer {
  return encodeModelInferRequest({
    model_name: request.model,
    model_version: versionText(request.version),
    id: request.id,
    parameters: extra === undefined ? request.parameters : { ...request.parameters, ...extra },
    inputs: request.inputs,
    outputs: (request.outputs ?? []).map((output) => ({
      name: output.name,
      parameters: output.classification === undefined ? undefined : { classification: output.classification },
    })),
  }, prefix);
}

/** Statistics from proto-loader (64-bit counts as decimal strings) in the package's typed form. */
function statisticsFromWire(value: unknown): unknown {
  if (typeof value === 'string' && /^\d+$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : BigInt(value);
  }
  if (Array.isArray(value)) return value.map(statisticsFromWire);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = key === 'name' || key === 'version' || key === 'type' ? item : statisticsFromWire(item);
    return out;
  }
  return value;
}

export interface GrpcTarget {
  /** Named in errors: `grpc://host:port`. */
  endpoint: string;
  host: string;
  port: number;
  tls: boolean;
  /** The name the server's certificate must carry (a DNS target's name, for its addresses). */
  servername?: string;
}

/**
 * Loads the message codecs and picks the connection (`transport`: the
 * addon's or `node:http2`'s); then makes a transport per address.
 */
export async function grpcTransports(options: ResolvedClientOptions, tls: boolean): Promise<{ make: (where: GrpcTarget) => Transport; native: boolean }> {
  const channel = nativeChannelFor(options, tls, nativeGrpcChannelClass);
  const codecs = await loadInferenceMessages('the gRPC client (grpc:// targets)');
  return { make: (where) => new GrpcTransport(codecs, where, options, channel), native: channel !== undefined };
}

class GrpcTransport implements Transport {
  readonly endpoint: string;
  readonly streaming = true;
  readonly #codecs: Record<string, MessageCodec>;
  readonly #connection: GrpcChannel;
  readonly #headers: Record<string, string>;

  constructor(codecs: Record<string, MessageCodec>, where: GrpcTarget, options: ResolvedClientOptions, native: NativeGrpcChannelClass | undefined) {
    this.#codecs = codecs;
    this.endpoint = where.endpoint;
    this.#headers = lowerCase(options.headers);
    if (native !== undefined) {
      const { connectTimeoutMs, keepAliveMs, maxMessageBytes } = options;
      const tls = where.tls ? nativeTlsSettings(options.tls, where.servername ?? where.host) : undefined;
      this.#connection = new NativeGrpcConnection(native, {
        host: where.host,
        port: where.port,
        connectTimeoutMs,
        keepAliveMs,
        maxMessageBytes,
        compress: options.compression === 'gzip',
        ...(tls === undefined ? {} : { tls }),
      });
      return;
    }
    const host = where.host.includes(':') ? `[${where.host}]` : where.host;
    const servername = options.tls?.servername ?? where.servername;
    this.#connection = new GrpcConnection({
      origin: `${where.tls ? 'https' : 'http'}://${host}:${where.port}`,
      tls: where.tls ? { ...options.tls, ...(servername === undefined ? {} : { servername }) } : undefined,
      connectTimeoutMs: options.connectTimeoutMs,
      keepAliveMs: options.keepAliveMs,
      maxMessageBytes: options.maxMessageBytes,
      compress: options.compression === 'gzip',
    });
  }

  /** The client's headers, plus the call's when it has any (no copy per call otherwise). */
  #metadata(call: Call): Record<string, string> {
    const extra = call.headers;
    return Object.keys(extra).length === 0 ? this.#headers : { ...this.#headers, ...lowerCase(extra) };
  }

  /** The TritonError for a call that ended badly: connection failures apart, so that the pool can retry them. */
  #error(end: CallEnd): TritonError {
    if (end.connection !== undefined) {
      return new ConnectionError(end.message, this.endpoint, { cause: end.connection.cause, sent: end.connection.sent });
    }
    if (end.code === STATUS_PERMISSION_DENIED || end.code === STATUS_UNAUTHENTICATED) {
      return new PermissionError(end.message, this.endpoint);
    }
    return serverError(CODE_OF_STATUS[end.code] ?? 'UNKNOWN', end.message || `gRPC status ${end.code}`, this.endpoint);
  }

  async #call(method: string, message: Buffer, call: Call, framed = false): Promise<Buffer> {
    try {
      return await this.#connection.unary(SERVICE + method, message, this.#metadata(call), call.deadline, call.signal, framed);
    } catch (error) {
      const end = (error as { grpc?: CallEnd }).grpc;
      throw end === undefined ? error : this.#error(end);
    }
  }

  async #unary<T>(method: string, request: object, call: Call): Promise<T> {
    const codec = this.#codecs[method]!;
    const bytes = await this.#call(method, codec.requestSerialize(request), call);
    try {
      return codec.responseDeserialize(bytes) as T;
    } catch (error) {
      throw serverError('INTERNAL', `malformed ${method} response: ${(error as Error).message}`, this.endpoint);
    }
  }
  async live(call: Call): Promise<boolean> {
    return (await this.#unary<{ live: boolean }>('ServerLive', {}, call)).live;
  }

  async ready(call: Call): Promise<boolean> {
    return (await this.#unary<{ ready: boolean }>('ServerReady', {}, call)).ready;
  }

  async metadata(call: Call): Promise<ServerMetadata> {
    const { name, version, extensions } = await this.#unary<ServerMetadata>('ServerMetadata', {}, call);
    return { name, version, extensions };
  }

  async modelIndex(readyOnly: boolean, call: Call): Promise<ModelIndexEntry[]> {
    const { models } = await this.#unary<{ models: Array<Required<ModelIndexEntry>> }>('RepositoryIndex', { repository_name: '', ready: readyOnly }, call);
    // Triton's JSON leaves out what is empty (a model never loaded has no version or state).
    return models.map(({ name, version, state, reason }) => {
      const entry: ModelIndexEntry = { name };
      if (version !== '') entry.version = version;
      if (state !== '') entry.state = state;
      if (reason !== '') entry.reason = reason;
      return entry;
    });
  }

  async loadModel(name: string, parameters: LoadParameters, call: Call): Promise<void> {
    const wire: Record<string, { string_param?: string; bytes_param?: Uint8Array }> = {};
    if (parameters.config !== undefined) wire.config = { string_param: parameters.config };
    for (const [path, bytes] of parameters.files) wire[`file:${path}`] = { bytes_param: bytes };
    await this.#unary('RepositoryModelLoad', { repository_name: '', model_name: name, parameters: wire }, call);
  }

  async unloadModel(name: string, unloadDependents: boolean, call: Call): Promise<void> {
    const parameters = unloadDependents ? { unload_dependents: { bool_param: true } } : {};
    await this.#unary('RepositoryModelUnload', { repository_name: '', model_name: name, parameters }, call);
  }

  async modelReady(name: string, version: number, call: Call): Promise<boolean> {
    return (await this.#unary<{ ready: boolean }>('ModelReady', { name, version: versionText(version) }, call)).ready;
  }

  async modelMetadata(name: string, version: number, call: Call): Promise<ModelMetadata> {
    const m = await this.#unary<{
      name: string;
      versions: string[];
      platform: string;
      inputs: Array<{ name: string; datatype: string; shape: string[] }>;
      outputs: Array<{ name: string; datatype: string; shape: string[] }>;
    }>('ModelMetadata', { name, version: versionText(version) }, call);
    return { name: m.name, versions: m.versions, platform: m.platform, inputs: tensorMetadata(m.inputs), outputs: tensorMetadata(m.outputs) };
  }

  async modelConfig(name: string, version: number, call: Call): Promise<unknown> {
    return (await this.#unary<{ config: unknown }>('ModelConfig', { name, version: versionText(version) }, call)).config;
  }

  async statistics(name: string, version: number, call: Call): Promise<ModelStatistics[]> {
    const message = await this.#unary<unknown>('ModelStatistics', { name, version: versionText(version) }, call);
    return parseStatistics(statisticsFromWire(message));
  }

  /** ModelInfer with this package's own codec (lib/kserve/infer-wire.ts): bytes in, views out. */
  async infer(request: EncodedRequest, call: Call): Promise<DecodedResponse> {
    const bytes = await this.#call('ModelInfer', encodeRequest(request, undefined, GRPC_PREFIX), call, true);
    try {
      return decodeResponse(decodeModelInferResponse(bytes), this.endpoint);
    } catch (failure) {
      throw failure instanceof TritonError ? failure : serverError('INTERNAL', `malformed ModelInferResponse: ${(failure as Error).message}`, this.endpoint);
    }
  }

  /**
   * One ModelStreamInfer call per request: cancelling the call is how the
   * server learns to cancel that request (Triton cancels a stream's requests
   * with its call), and HTTP/2 multiplexes the calls over one connection.
   */
  stream(request: EncodedRequest, call: Call, sink: StreamSink): StreamHandle {
    let done = false;
    const fail = (error: TritonError): void => {
      if (done) return;
      done = true;
      open.cancel();
      sink.error(error);
    };
    const open = this.#connection.start(SERVICE + 'ModelStreamInfer', this.#metadata(call), call.deadline, {
      message: (bytes) => {
        if (done) return;
        let message: ReturnType<typeof decodeModelStreamInferResponse>;
        let response: ReturnType<typeof decodeResponse> | undefined;
        try {
          message = decodeModelStreamInferResponse(bytes);
          if (message.error_message === '' && message.infer_response !== null) response = decodeResponse(message.infer_response, this.endpoint);
        } catch (failure) {
          fail(failure instanceof TritonError ? failure : serverError('INTERNAL', `malformed ModelStreamInferResponse: ${(failure as Error).message}`, this.endpoint));
          return;
        }
        if (message.error_message !== '') {
          fail(serverError(errorCodeOfMessage(message.error_message), message.error_message, this.endpoint));
          return;
        }
        if (response === undefined) return;
        const final = response.finalFlag ?? true;
        // With triton_enable_empty_final_response, the end of a decoupled
        // request comes as a response with nothing in it but the flag.
        const emptyFinal = final && Object.keys(response.outputs).length === 0 && Object.keys(response.parameters).length === 0;
        if (!emptyFinal) {
          const { finalFlag: _, ...rest } = response;
          sink.response({ ...rest, final });
        }
        if (final) {
          done = true;
          open.finish();
          sink.end();
        }
      },
      end: (result) => {
        if (done) return;
        if (result.code === STATUS.OK) {
          fail(new ConnectionError("the stream ended before the request's final response", this.endpoint));
        } else {
          fail(this.#error(result));
        }
      },
    });
    open.send(encodeRequest(request, { triton_enable_empty_final_response: true }), false);
    const signal = call.signal;
    const onAbort = (): void => {
      if (done) return;
      done = true;
      open.cancel();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    return {
      cancel: onAbort,
    };
  }

  close(): void {
    this.#connection.close();
  }
}

/** Header names as HTTP/2 sends them: lower case. */
function lowerCase(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key in headers) out[key.toLowerCase()] = headers[key]!;
  return out;
}

/** A stream's error message carries no status; Triton's wording tells the common ones. */
function errorCodeOfMessage(message: string): TritonErrorCode {
  if (/is not found|unknown model/i.test(message)) return 'NOT_FOUND';
  if (/cancelled/i.test(message)) return 'CANCELLED';
  if (/(expected|expects|must|invalid|unexpected|batch-size)/i.test(message)) return 'INVALID_ARG';
  if (/not ready|unavailable/i.test(message)) return 'UNAVAILABLE';
  return 'INTERNAL';
}
