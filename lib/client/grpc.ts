/**
 * The gRPC transport: one @grpc/grpc-js channel to one target (an address,
 * or a `dns:///` name that grpc-js resolves and balances round-robin).
 * Tensors travel as `raw_input_contents` / `raw_output_contents`; outputs are
 * views over the received message.
 */
import type * as GrpcJs from '@grpc/grpc-js';
import { TritonError, type TritonErrorCode } from '../errors.js';
import type { ModelMetadata, TensorMetadata } from '../model.js';
import { parseStatistics, type ModelStatistics } from '../observability/statistics.js';
import type { ModelIndexEntry, ServerMetadata } from '../server.js';
import { DATA_TYPE_INFO, outputTensor, type Tensor } from '../tensor.js';
import { checkDatatype } from '../kserve/codec.js';
import { decodeModelInferResponse, decodeModelStreamInferResponse, encodeModelInferRequest, type WireInferResponse } from '../kserve/infer-wire.js';
import { loadGrpcService } from '../kserve/proto.js';

const MODEL_INFER = '/inference.GRPCInferenceService/ModelInfer';
const MODEL_STREAM_INFER = '/inference.GRPCInferenceService/ModelStreamInfer';
/** The messages are already bytes (lib/kserve/infer-wire.ts): grpc-js passes them through. */
const passBytes = (bytes: Buffer): Buffer => bytes;
import type { ResolvedClientOptions } from './options.js';
import {
  ConnectionError,
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

type UnaryMethod = (
  request: unknown,
  metadata: GrpcJs.Metadata,
  options: GrpcJs.CallOptions,
  callback: (error: GrpcJs.ServiceError | null, response?: unknown) => void,
) => GrpcJs.ClientUnaryCall;

type GrpcClient = GrpcJs.Client & Record<string, UnaryMethod> & {
  ModelStreamInfer(metadata: GrpcJs.Metadata, options: GrpcJs.CallOptions): GrpcJs.ClientDuplexStream<unknown, unknown>;
};

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
const STATUS_UNAVAILABLE = 14;
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

function encodeRequest(request: EncodedRequest, extra?: Record<string, WireParameterValue>): Buffer {
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
  });
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
  /** grpc-js target: `host:port` or `dns:///name:port`. */
  target: string;
  /** Named in errors: `grpc://host:port`. */
  endpoint: string;
  tls: boolean;
  /** Balance over every address the target resolves to. */
  roundRobin: boolean;
}

/** Loads grpc-js; then makes a transport per target. */
export async function grpcTransports(options: ResolvedClientOptions): Promise<(where: GrpcTarget) => Transport> {
  const { grpc, service } = await loadGrpcService('the gRPC client (grpc:// targets)');
  return (where) => new GrpcTransport(grpc, service, where, options);
}

class GrpcTransport implements Transport {
  readonly endpoint: string;
  readonly streaming = true;
  readonly #grpc: typeof GrpcJs;
  readonly #client: GrpcClient;
  readonly #headers: Record<string, string>;

  constructor(grpc: typeof GrpcJs, service: GrpcJs.ServiceDefinition, where: GrpcTarget, options: ResolvedClientOptions) {
    this.#grpc = grpc;
    this.endpoint = where.endpoint;
    this.#headers = options.headers;
    const channelOptions: GrpcJs.ChannelOptions = {
      'grpc.max_receive_message_length': options.maxMessageBytes,
      'grpc.max_send_message_length': options.maxMessageBytes,
      'grpc.keepalive_time_ms': options.keepAliveMs,
      'grpc.keepalive_timeout_ms': 20_000,
      // A restarted server is reached within seconds, not after grpc-js's default 2-minute backoff.
      'grpc.initial_reconnect_backoff_ms': 200,
      'grpc.max_reconnect_backoff_ms': 5000,
    };
    if (where.roundRobin) channelOptions['grpc.service_config'] = JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] });
    if (options.compression === 'gzip') channelOptions['grpc.default_compression_algorithm'] = 2;
    if (options.tls?.servername !== undefined) channelOptions['grpc.ssl_target_name_override'] = options.tls.servername;
    const pem = (value: string | Uint8Array | undefined): Buffer | null =>
      value === undefined ? null : Buffer.from(typeof value === 'string' ? Buffer.from(value) : value);
    const credentials = where.tls
      ? grpc.credentials.createSsl(pem(options.tls?.ca), pem(options.tls?.key), pem(options.tls?.cert))
      : grpc.credentials.createInsecure();
    const Client = grpc.makeGenericClientConstructor(service, 'GRPCInferenceService') as unknown as new (
      target: string,
      credentials: GrpcJs.ChannelCredentials,
      options: GrpcJs.ChannelOptions,
    ) => GrpcClient;
    this.#client = new Client(where.target, credentials, channelOptions);
  }

  #metadata(call: Call): GrpcJs.Metadata {
    const metadata = new this.#grpc.Metadata();
    for (const key in this.#headers) metadata.set(key, this.#headers[key]!);
    for (const key in call.headers) metadata.set(key, call.headers[key]!);
    return metadata;
  }

  /** The TritonError for a failed call: connection failures apart, so that the pool can retry them. */
  #error(error: GrpcJs.ServiceError): TritonError {
    const details = error.details || error.message;
    if (error.code === STATUS_UNAVAILABLE && !isServerAnswer(details)) {
      // Waiting for a connection that never came: the request was not sent.
      return new ConnectionError(details, this.endpoint, { cause: error, sent: !/No connection established|Waiting for LB pick/i.test(details) });
    }
    if (error.code === STATUS_PERMISSION_DENIED || error.code === STATUS_UNAUTHENTICATED) {
      return serverError('UNAVAILABLE', `permission denied: ${details}`, this.endpoint, error);
    }
    return serverError(CODE_OF_STATUS[error.code] ?? 'UNKNOWN', details, this.endpoint, error);
  }

  #unary<T>(method: string, request: unknown, call: Call): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const options: GrpcJs.CallOptions = call.deadline === undefined ? {} : { deadline: call.deadline };
      const signal = call.signal;
      let abort: (() => void) | undefined;
      const pending = this.#client[method]!(request, this.#metadata(call), options, (error, response) => {
        if (abort !== undefined) signal!.removeEventListener('abort', abort);
        if (error === null) resolve(response as T);
        else reject(this.#error(error));
      });
      if (signal !== undefined) {
        abort = () => pending.cancel();
        signal.addEventListener('abort', abort, { once: true });
      }
    });
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
  infer(request: EncodedRequest, call: Call): Promise<DecodedResponse> {
    const message = encodeRequest(request);
    return new Promise<DecodedResponse>((resolve, reject) => {
      const options: GrpcJs.CallOptions = call.deadline === undefined ? {} : { deadline: call.deadline };
      const signal = call.signal;
      let abort: (() => void) | undefined;
      const pending = this.#client.makeUnaryRequest<Buffer, Buffer>(MODEL_INFER, passBytes, passBytes, message, this.#metadata(call), options, (error, response) => {
        if (abort !== undefined) signal!.removeEventListener('abort', abort);
        if (error !== null || response === undefined) {
          reject(this.#error(error ?? ({ code: 13, details: 'no response', message: 'no response' } as GrpcJs.ServiceError)));
          return;
        }
        try {
          resolve(decodeResponse(decodeModelInferResponse(response), this.endpoint));
        } catch (failure) {
          reject(failure instanceof TritonError ? failure : serverError('INTERNAL', `malformed ModelInferResponse: ${(failure as Error).message}`, this.endpoint));
        }
      });
      if (signal !== undefined) {
        abort = () => pending.cancel();
        signal.addEventListener('abort', abort, { once: true });
      }
    });
  }

  /**
   * One ModelStreamInfer call per request: cancelling the call is how the
   * server learns to cancel that request (Triton cancels a stream's requests
   * with its call), and HTTP/2 multiplexes the calls over one connection.
   */
  stream(request: EncodedRequest, call: Call, sink: StreamSink): StreamHandle {
    const options: GrpcJs.CallOptions = call.deadline === undefined ? {} : { deadline: call.deadline };
    const duplex = this.#client.makeBidiStreamRequest<Buffer, Buffer>(MODEL_STREAM_INFER, passBytes, passBytes, this.#metadata(call), options);
    let done = false;
    const finish = (): void => {
      done = true;
      duplex.removeAllListeners('data');
    };
    duplex.on('data', (bytes: Buffer) => {
      if (done) return;
      let message: ReturnType<typeof decodeModelStreamInferResponse>;
      try {
        message = decodeModelStreamInferResponse(bytes);
      } catch (failure) {
        finish();
        duplex.cancel();
        sink.error(serverError('INTERNAL', `malformed ModelStreamInferResponse: ${(failure as Error).message}`, this.endpoint));
        return;
      }
      if (message.error_message !== '') {
        finish();
        duplex.cancel();
        sink.error(serverError(errorCodeOfMessage(message.error_message), message.error_message, this.endpoint));
        return;
      }
      const wire = message.infer_response;
      if (wire === null) return;
      let response;
      try {
        response = decodeResponse(wire, this.endpoint);
      } catch (error) {
        finish();
        duplex.cancel();
        sink.error(error as TritonError);
        return;
      }
      const final = response.finalFlag ?? true;
      // With triton_enable_empty_final_response, the end of a decoupled
      // request comes as a response with nothing in it but the flag.
      const emptyFinal = final && wire.outputs.length === 0 && Object.keys(response.parameters).length === 0;
      if (!emptyFinal) {
        const { finalFlag: _, ...rest } = response;
        sink.response({ ...rest, final });
      }
      if (final) {
        finish();
        duplex.end();
        sink.end();
      }
    });
    duplex.on('error', (error: GrpcJs.ServiceError) => {
      if (done) return;
      finish();
      sink.error(this.#error(error));
    });
    duplex.on('end', () => {
      if (done) return;
      finish();
      sink.error(new ConnectionError("the stream ended before the request's final response", this.endpoint));
    });
    duplex.write(encodeRequest(request, { triton_enable_empty_final_response: true }));
    return {
      cancel: () => {
        if (done) return;
        finish();
        duplex.cancel();
      },
    };
  }

  close(): void {
    this.#client.close();
  }
}

/**
 * grpc-js reports a refused or lost connection as UNAVAILABLE, as Triton
 * does for a model that is not ready; Triton's answers say what is
 * unavailable, the transport's name the connection.
 */
function isServerAnswer(details: string): boolean {
  return !/(No connection established|Connection dropped|connect|ECONNREFUSED|ECONNRESET|GOAWAY|RST_STREAM|Socket closed|TLS|handshake|name resolution|DNS|Waiting for LB pick|Deadline)/i.test(details);
}

/** A stream's error message carries no status; Triton's wording tells the common ones. */
function errorCodeOfMessage(message: string): TritonErrorCode {
  if (/is not found|unknown model/i.test(message)) return 'NOT_FOUND';
  if (/cancelled/i.test(message)) return 'CANCELLED';
  if (/(expected|expects|must|invalid|unexpected|batch-size)/i.test(message)) return 'INVALID_ARG';
  if (/not ready|unavailable/i.test(message)) return 'UNAVAILABLE';
  return 'INTERNAL';
}
