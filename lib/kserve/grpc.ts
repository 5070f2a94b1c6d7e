/**
 * KServe v2 gRPC (`inference.GRPCInferenceService`) over the public
 * Server/Model API, on `node:http2`. ModelInfer and ModelStreamInfer use the
 * hand-written codec of lib/kserve/infer-wire.ts (tensors read as views of
 * the received message, written once into the response); the other methods
 * use @grpc/proto-loader's codecs of this package's .proto files (an
 * optional peer dependency, imported only when gRPC is asked for). Measured
 * with perf_analyzer, @grpc/grpc-js's server spent most of the time of a
 * small call in its own call stack: see docs/kserve.md.
 */
import { Buffer } from 'node:buffer';
import http2, { type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo, Socket } from 'node:net';
import { promisify } from 'node:util';
import { deflate, gunzip, gzip, inflate } from 'node:zlib';
import { TritonError, type TritonErrorCode } from '../errors.js';
import type { InferenceRequest, InferenceResponse } from '../surface.js';
import type { Server } from '../server.js';
import { bytesTensor, encodeBytes, numbersToStorage, type TensorInit } from '../tensor.js';
import { type DataType } from '../data-types.js';
import {
  checkDatatype,
  checkShape,
  requestFromParts,
  tensorBytes,
  tensorFromBytes,
  type DecodedRequest,
  type OutputRequest,
  type ParameterValue,
  type ResponseData,
} from './codec.js';
import { Deframer, frame, framePrefixed, parseGrpcTimeout, percentEncode, STATUS } from './grpc-framing.js';
import { loadOptions } from './http.js';
import {
  bytesContentsWire,
  checkMessageParts,
  contentsOf,
  decodeModelInferRequest,
  type ContentsField,
  encodeModelInferResponse,
  encodeModelStreamInferResponse,
  type WireOutputTensor,
  type WireReceivedRequest,
  type WireSentResponse,
} from './infer-wire.js';
import type { ResolvedProtocolOptions } from './options.js';
import { classify } from '../classification.js';
import { loadInferenceMessages, type MessageCodec } from './proto.js';
import { nativeEngineHere, openNativeListener, type NativeListener, type NativeListenerSettings } from './native-http.js';
import { engineFor } from './native-tls.js';
import { bigintsAsStrings, Tracker, tritonErrorCode } from './shared.js';
import type { SharedMemoryInput } from '../shared-memory.js';
import {
  checkSharedMemoryOutput,
  grpcCudaSharedMemoryRegister,
  grpcCudaSharedMemoryStatus,
  grpcCudaSharedMemoryUnregister,
  grpcSystemSharedMemoryRegister,
  grpcSystemSharedMemoryStatus,
  grpcSystemSharedMemoryUnregister,
  SHARED_MEMORY_EXTENSION,
  sharedMemoryInput,
  sharedMemoryParameters,
} from './shared-memory.js';

/** The gRPC status code (numeric) Triton's gRPC front end uses for each error code. */
export function grpcStatus(code: TritonErrorCode): number {
  const table: Record<TritonErrorCode, number> = {
    UNKNOWN: STATUS.UNKNOWN,
    INTERNAL: STATUS.INTERNAL,
    NOT_FOUND: STATUS.NOT_FOUND,
    INVALID_ARG: STATUS.INVALID_ARGUMENT,
    UNAVAILABLE: STATUS.UNAVAILABLE,
    UNSUPPORTED: STATUS.UNIMPLEMENTED,
    ALREADY_EXISTS: STATUS.ALREADY_EXISTS,
    CANCELLED: STATUS.CANCELLED,
  };
  return table[code];
}

/** The gRPC listener of `serveKServe`. */
export interface GrpcFrontend {
  /** The HTTP/2 server underneath. */
  server: http2.Http2Server | http2.Http2SecureServer;
  /** The interface it is bound to (the `host` option, default `127.0.0.1`). */
  host: string;
  /** The port bound (useful with port 0). */
  port: number;
  /** Requests being handled now (by JS). */
  readonly inFlight: number;
  /**
   * Who reads the connections (the `engine` option). With `native`, `server`
   * is the HTTP/2 server that answers the calls the addon passes on: it does
   * not listen itself.
   */
  engine: 'node' | 'native';
  /** ModelInfer calls the native engine answered without JS so far (0 with `node`). */
  readonly answeredNatively: number;
  /** Refuses new calls (UNAVAILABLE), lets those in flight finish, then closes every connection. */
  close(): Promise<void>;
}

export interface GrpcListenOptions {
  port: number;
  host: string;
  tls?: Record<string, unknown> | undefined;
  credentials?: unknown;
  maxReceiveMessageBytes?: number | undefined;
  maxConcurrentStreams: number;
  maxHeaderListBytes: number;
  maxConnectionBytes?: number | undefined;
  responseCompression: 'none' | 'gzip' | 'deflate';
  engine?: 'node' | 'native' | undefined;
}

/** `InferParameter` as proto-loader gives it (oneofs: true): the admin methods' parameters. */
interface WireParameter {
  parameter_choice?: string;
  bool_param?: boolean;
  int64_param?: string;
  string_param?: string;
  double_param?: number;
  uint64_param?: string;
}

function fromWireParameters(parameters: Record<string, WireParameter> | undefined): Record<string, ParameterValue> {
  const out: Record<string, ParameterValue> = {};
  for (const [key, value] of Object.entries(parameters ?? {})) {
    const choice = value.parameter_choice as keyof WireParameter | undefined;
    if (choice === undefined) continue;
    const v = value[choice];
    out[key] = choice === 'int64_param' || choice === 'uint64_param' ? Number(v) : (v as ParameterValue);
  }
  return out;
}

const CONTENTS_FIELD: Readonly<Record<DataType, ContentsField | undefined>> = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  FP16: undefined,
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
  BF16: undefined,
};

function parseVersion(text: string): number {
  if (text === '' || text === undefined) return -1;
  if (!/^\d+$/.test(text)) throw new TritonError('INVALID_ARG', `failed to parse model version '${text}'`);
  return Number(text);
}

/** Decodes a `ModelInferRequest`: raw contents as views over the received message. */
export function decodeGrpcInferRequest(message: WireReceivedRequest): DecodedRequest & { emptyFinal: boolean } {
  const raw = message.raw_input_contents;
  // Inputs in shared memory have no raw contents: the others take them in order (as Triton).
  const inShm = message.inputs.filter((input) => input.parameters?.shared_memory_region !== undefined).length;
  let rawIndex = 0;
  if (raw.length > 0 && raw.length !== message.inputs.length - inShm) {
    throw new TritonError(
      'INVALID_ARG',
      `expected ${message.inputs.length} raw_input_contents, one per input, got ${raw.length}`,
    );
  }
  const inputs: Record<string, TensorInit | SharedMemoryInput> = {};
  message.inputs.forEach((input) => {
    const what = `input '${input.name}'`;
    const datatype = checkDatatype(input.datatype, what);
    const shape = checkShape(input.shape, what);
    const parameters = input.parameters;
    const range = sharedMemoryParameters(parameters, input.name);
    if (range !== undefined) {
      if (input.contents !== undefined && Object.values(input.contents.counts).some((n) => n > 0)) {
        throw new TritonError(
          'INVALID_ARG',
          `unexpected 'content' provided when using shared memory for input tensor '${input.name}' for model '${message.model_name}'`,
        );
      }
      inputs[input.name] = sharedMemoryInput(datatype, shape, range);
      return;
    }
    const bytes = raw[rawIndex++];
    if (bytes !== undefined) {
      inputs[input.name] = tensorFromBytes(input.name, datatype, shape, bytes);
      return;
    }
    const field = CONTENTS_FIELD[datatype];
    const count = shape.reduce((a, b) => a * b, 1);
    const received = field === undefined ? undefined : input.contents?.counts[field];
    if (field === undefined || received === undefined || (received === 0 && count !== 0)) {
      throw new TritonError('INVALID_ARG', `${what} has no data: give raw_input_contents or contents.${field ?? '(raw only for ' + datatype + ')'}`);
    }
    // Counted before read: contents the shape does not declare are never made.
    if (received !== count) {
      throw new TritonError('INVALID_ARG', `unable to parse 'data' of ${what}: expected ${count} elements for shape [${shape.join(',')}], got ${received}`);
    }
    if (datatype === 'BYTES') {
      inputs[input.name] = bytesTensor(input.name, shape, bytesContentsWire(input.contents!));
      return;
    }
    const values = contentsOf(input.contents!, field);
    // int_contents and uint_contents carry 8 and 16-bit integers too: checked as they narrow.
    const narrow = datatype === 'INT8' || datatype === 'INT16' || datatype === 'UINT8' || datatype === 'UINT16';
    const data = narrow ? numbersToStorage(what, values as Int32Array | Uint32Array, datatype) : values;
    inputs[input.name] = { datatype, shape, data: data as TensorInit['data'] };
  });
  const parameters = { ...message.parameters };
  const emptyFinal = parameters.triton_enable_empty_final_response;
  if (emptyFinal !== undefined && typeof emptyFinal !== 'boolean') {
    throw new TritonError('INVALID_ARG', "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.");
  }
  delete parameters.triton_enable_empty_final_response;
  const outputs: OutputRequest[] | undefined =
    message.outputs.length === 0
      ? undefined
      : message.outputs.map((output) => {
          const p = output.parameters;
          const k = p.classification;
          if (k !== undefined && !(Number.isInteger(k) && (k as number) > 0)) {
            throw new TritonError('INVALID_ARG', `'classification' of output '${output.name}' must be a positive integer`);
          }
          checkSharedMemoryOutput(p);
          const sharedMemory = sharedMemoryParameters(p, output.name);
          return { name: output.name, binary: true, classification: k as number | undefined, sharedMemory };
        });
  return { ...requestFromParts(message.id, parameters, inputs, outputs), emptyFinal: emptyFinal === true };
}

/** Encodes a response as a `ModelInferResponse` with raw_output_contents. */
export function encodeGrpcInferResponse(
  response: ResponseData,
  decoded: DecodedRequest,
  batched: boolean,
  extra: Record<string, ParameterValue> = {},
): WireSentResponse {
  const requested = new Map((decoded.outputs ?? []).map((output) => [output.name, output]));
  const outputs: WireOutputTensor[] = [];
  const raw: Uint8Array[] = [];
  for (const tensor of Object.values(response.outputs)) {
    const k = requested.get(tensor.name)?.classification;
    if (k !== undefined) {
      const classes = classify(tensor, k, batched);
      outputs.push({ name: tensor.name, datatype: 'BYTES', shape: classes.shape });
      raw.push(encodeBytes(classes.strings));
    } else {
      outputs.push({ name: tensor.name, datatype: tensor.datatype, shape: tensor.shape });
      raw.push(tensorBytes(tensor));
    }
  }
  // Written into shared memory: name, datatype, shape and empty contents (as Triton).
  for (const output of Object.values(response.sharedMemoryOutputs ?? {})) {
    outputs.push({ name: output.name, datatype: output.datatype, shape: output.shape });
    raw.push(new Uint8Array(0));
  }
  return {
    model_name: response.model.name,
    model_version: String(response.model.version),
    id: response.id,
    parameters: { ...response.parameters, ...extra },
    outputs,
    raw_output_contents: raw,
  };
}

/** An error that carries its own gRPC status (e.g. PERMISSION_DENIED, which no Triton code maps to). */
class CallError extends Error {
  constructor(
    readonly grpcCode: number,
    message: string,
  ) {
    super(message);
  }
}

function statusOf(error: unknown): { code: number; message: string } {
  if (error instanceof CallError) return { code: error.grpcCode, message: error.message };
  const code = tritonErrorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  return { code: code === undefined ? STATUS.INTERNAL : grpcStatus(code), message };
}

const SERVICE_PREFIX = '/inference.GRPCInferenceService/';
const ACCEPT_ENCODING = 'identity,deflate,gzip';
/** Request headers that are transport, not the caller's metadata. */
const TRANSPORT_HEADERS = new Set(['content-type', 'te', 'grpc-timeout', 'grpc-encoding', 'grpc-accept-encoding', 'user-agent']);
// HTTP/2's default flow-control windows (64 KiB per stream and per connection) hold 16 concurrent
// 64 KiB requests to one window's worth per round trip: open them wide, as gRPC's C++ server does.
const STREAM_WINDOW_BYTES = 16 * 1024 * 1024;
const CONNECTION_WINDOW_BYTES = 64 * 1024 * 1024;

function acceptsEncoding(header: string | string[] | undefined, encoding: string): boolean {
  return String(header ?? '').split(',').some((name) => name.trim() === encoding);
}

/**
 * Bytes of answers written to a connection's streams that have not gone out
 * yet: a client that never opens its flow-control window holds them. Past
 * the connection's budget it gets no new call (as the native engine).
 */
const unsentBytes = new WeakMap<http2.Http2Session, number>();

/** Counts `bytes` as unsent on the stream's session; the callback they are written with uncounts them. */
function holdUnsent(stream: ServerHttp2Stream, bytes: number, then?: (error?: Error | null) => void): (error?: Error | null) => void {
  const session = stream.session;
  if (session === undefined) return (error) => then?.(error);
  unsentBytes.set(session, (unsentBytes.get(session) ?? 0) + bytes);
  return (error) => {
    unsentBytes.set(session, (unsentBytes.get(session) ?? 0) - bytes);
    then?.(error);
  };
}

/** The longest delay setTimeout takes (2^31 - 1 ms); a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);
const gzipAsync = promisify(gzip);
const deflateAsync = promisify(deflate);

/**
 * AbortControllers of calls that ended unaborted, for the next calls:
 * making an AbortSignal (an EventTarget) and listening to it cost about a
 * tenth of a small call's JS. A call gives its controller back only once
 * its inference has settled, so no request still listens to it.
 */
class ControllerPool {
  readonly #free: AbortController[] = [];

  take(): AbortController {
    return this.#free.pop() ?? new AbortController();
  }

  give(controller: AbortController): void {
    if (!controller.signal.aborted && this.#free.length < 1024) this.#free.push(controller);
  }
}

/**
 * Memory for large encoded responses, reused once a response is written.
 * Each response of a 64 KiB tensor would otherwise be a new 64 KiB buffer
 * outside V8's heap, and that memory's growth is what starts V8's full
 * collections: measured with perf_analyzer, several per second.
 */
class ResponseBuffers {
  static readonly SMALLEST = 16 * 1024;
  readonly #free: ArrayBuffer[] = [];

  /** `size` bytes; a small size comes from Node's own pool. */
  readonly take = (size: number): Buffer => {
    if (size < ResponseBuffers.SMALLEST) return Buffer.allocUnsafe(size);
    let memory = this.#free.pop();
    if (memory === undefined || memory.byteLength < size) memory = Buffer.allocUnsafeSlow(2 ** Math.ceil(Math.log2(size))).buffer;
    return Buffer.from(memory, 0, size);
  };

  /** `buffer` (from take()) is written: its memory may serve the next response. */
  give(buffer: Buffer): void {
    if (buffer.length >= ResponseBuffers.SMALLEST && this.#free.length < 64) this.#free.push(buffer.buffer as ArrayBuffer);
  }
}

/**
 * One gRPC call on an HTTP/2 stream: its messages in, its messages and
 * status out, exactly once. Cancellation (RST_STREAM) and the deadline
 * (`grpc-timeout`) abort `signal`.
 */
class Call {
  readonly signal: AbortSignal;
  readonly #controller: AbortController;
  /** Set once no request listens to `signal` any more: it may serve another call. */
  #signalFree = false;
  #headersSent = false;
  #ended = false;
  #timer: NodeJS.Timeout | undefined;
  /** The response compression both sides accept, or undefined. */
  readonly #compression: 'gzip' | 'deflate' | undefined;

  constructor(
    readonly stream: ServerHttp2Stream,
    readonly headers: IncomingHttpHeaders,
    compression: 'none' | 'gzip' | 'deflate',
    readonly onEnd: () => void,
    readonly controllers: ControllerPool,
  ) {
    this.#controller = controllers.take();
    this.signal = this.#controller.signal;
    this.#compression = compression !== 'none' && acceptsEncoding(headers['grpc-accept-encoding'], compression) ? compression : undefined;
    stream.once('close', () => {
      if (!this.#ended) {
        this.#controller.abort(new Error('the client cancelled the call'));
        this.#finish();
      }
    });
    stream.on('error', () => undefined); // a reset stream: 'close' follows
    const timeout = parseGrpcTimeout(headers['grpc-timeout']);
    // Past setTimeout's range (about 24.8 days) Node would fire at once: such a deadline never comes.
    if (timeout !== undefined && timeout <= MAX_TIMER_MS) {
      this.#timer = setTimeout(() => {
        this.#controller.abort(new TritonError('CANCELLED', 'Deadline Exceeded'));
        this.fail({ code: STATUS.DEADLINE_EXCEEDED, message: 'Deadline Exceeded' });
      }, timeout);
    }
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** The call's inference has settled: its signal is listened to no more. */
  inferenceSettled(): void {
    this.#signalFree = true;
  }

  /** The caller's metadata, as authorize() sees it. */
  metadata(): Record<string, string | string[] | undefined> {
    const out: Record<string, string | string[] | undefined> = {};
    for (const [name, value] of Object.entries(this.headers)) {
      if (!name.startsWith(':') && !TRANSPORT_HEADERS.has(name)) out[name] = value;
    }
    return out;
  }

  #respond(): void {
    if (this.#headersSent) return;
    this.#headersSent = true;
    const headers: OutgoingHttpHeaders = { ':status': 200, 'content-type': 'application/grpc', 'grpc-accept-encoding': ACCEPT_ENCODING };
    if (this.#compression !== undefined) headers['grpc-encoding'] = this.#compression;
    this.stream.respond(headers, { waitForTrailers: true });
    this.stream.once('wantTrailers', () => {
      const status = this.#status ?? { code: STATUS.OK, message: '' };
      const trailers: OutgoingHttpHeaders = { 'grpc-status': String(status.code) };
      if (status.message !== '') trailers['grpc-message'] = percentEncode(status.message);
      this.stream.sendTrailers(trailers);
      this.#stopClient();
    });
  }

  #status: { code: number; message: string } | undefined;
  /** Writes in order even when some are compressed (asynchronously). */
  #writing: Promise<void> = Promise.resolve();

  /**
   * Sends one message (`message`'s first 5 bytes were left free for the
   * prefix); `last` ends the call with OK after it, in the same write.
   * `written` is called once the message's memory is no longer read (not
   * when the call fails first).
   */
  send(message: Buffer, last = false, written?: () => void): void {
    if (this.#ended || this.stream.closed) return;
    this.#respond();
    const compression = this.#compression;
    if (compression === undefined) {
      const framed = framePrefixed(message);
      if (last) {
        this.#ended = true;
        this.#finish();
        this.stream.end(framed, holdUnsent(this.stream, framed.byteLength, (error) => (error ? undefined : written?.())));
      } else {
        this.stream.write(framed, holdUnsent(this.stream, framed.byteLength));
      }
      return;
    }
    this.#writing = this.#writing.then(async () => {
      const packed = await (compression === 'gzip' ? gzipAsync : deflateAsync)(message.subarray(5));
      written?.();
      const framed = frame(packed, true);
      if (!this.stream.closed) this.stream.write(framed, holdUnsent(this.stream, framed.byteLength));
    });
    if (last) this.end();
  }

  /** Ends the call with OK, after the messages sent. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    void this.#writing.then(() => this.#close({ code: STATUS.OK, message: '' }));
  }

  /** Ends the call with an error status. */
  fail(status: { code: number; message: string }): void {
    if (this.#ended) return;
    this.#ended = true;
    void this.#writing.then(() => this.#close(status));
  }

  #close(status: { code: number; message: string }): void {
    this.#finish();
    if (this.stream.closed || this.stream.destroyed) return;
    if (this.#headersSent) {
      this.#status = status;
      this.stream.end();
      return;
    }
    // Trailers-only: the status in the one HEADERS frame.
    this.#headersSent = true;
    const headers: OutgoingHttpHeaders = {
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-accept-encoding': ACCEPT_ENCODING,
      'grpc-status': String(status.code),
    };
    if (status.message !== '') headers['grpc-message'] = percentEncode(status.message);
    this.stream.respond(headers, { endStream: true });
    this.#stopClient();
  }

  /**
   * The status is sent: a client still sending (a stream that failed) is
   * told to stop with RST_STREAM NO_ERROR, as gRPC servers do, so neither
   * the stream nor its connection waits for a half-close that may never come.
   */
  #stopClient(): void {
    if (!this.stream.readableEnded && !this.stream.closed) this.stream.close(http2.constants.NGHTTP2_NO_ERROR);
  }

  #finished = false;
  #finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#ended = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#signalFree) this.controllers.give(this.#controller);
    this.onEnd();
  }

  /** Reads the request messages (decompressed), `limit` bytes at most each. */
  read(limit: number, onMessage: (message: Buffer) => void, onEnd: () => void): void {
    const encoding = String(this.headers['grpc-encoding'] ?? 'identity');
    const inflate = async (message: Buffer): Promise<Buffer> => {
      if (encoding !== 'gzip' && encoding !== 'deflate') {
        throw new CallError(STATUS.UNIMPLEMENTED, `a compressed message with grpc-encoding '${encoding}', which this server does not take (it takes ${ACCEPT_ENCODING})`);
      }
      try {
        // Inflated with the limit applied to the inflated size: a zip bomb costs at most `limit` bytes.
        return await (encoding === 'gzip' ? gunzipAsync : inflateAsync)(message, { maxOutputLength: limit });
      } catch (error) {
        const code = (error as { code?: string }).code;
        if (code === 'ERR_BUFFER_TOO_LARGE') throw new CallError(STATUS.RESOURCE_EXHAUSTED, `Received message larger than max (inflated past ${limit} bytes)`);
        throw new CallError(STATUS.INTERNAL, `could not decompress a ${encoding} message: ${(error as Error).message}`);
      }
    };
    /** Messages waiting behind one being inflated, in order; undefined when none is (the usual case: delivered at once). */
    let inflating: Promise<void> | undefined;
    const deliver = (message: Buffer, compressed: boolean): void => {
      if (!compressed && inflating === undefined) {
        if (!this.#ended) onMessage(message);
        return;
      }
      const current: Promise<void> = (inflating ?? Promise.resolve())
        .then(async () => {
          if (this.#ended) return;
          const plain = compressed ? await inflate(message) : message;
          if (!this.#ended) onMessage(plain);
        })
        // A message that cannot be read ends the call, whether or not the client has finished sending.
        .catch((error: unknown) => this.fail(statusOf(error)))
        .then(() => {
          if (inflating === current) inflating = undefined;
        });
      inflating = current;
    };
    const deframer = new Deframer(limit, deliver);
    this.stream.on('data', (chunk: Buffer) => {
      if (this.#ended) return;
      const fault = deframer.push(chunk);
      if (fault === undefined) return;
      this.fail(
        'tooLarge' in fault
          ? { code: STATUS.RESOURCE_EXHAUSTED, message: `Received message larger than max (${fault.tooLarge} vs. ${limit})` }
          : { code: STATUS.INTERNAL, message: `a message's compressed flag is ${fault.badFlag}: only 0 and 1 are defined` },
      );
    });
    const finish = (): void => {
      if (this.#ended) return;
      if (deframer.pending > 0) this.fail({ code: STATUS.INTERNAL, message: 'the request ended inside a message' });
      else onEnd();
    };
    this.stream.once('end', () => {
      if (inflating === undefined) finish();
      else void inflating.then(finish);
    });
  }
}

/** grpc-js `ServerCredentials` as Node's TLS options (their public `_get…` accessors). */
function credentialsAsTls(credentials: unknown): Record<string, unknown> | undefined {
  if (credentials === undefined || credentials === null) return undefined;
  const c = credentials as { _isSecure?: () => boolean; _getSecureContextOptions?: () => object | null; _getConstructorOptions?: () => object | null };
  if (typeof c._isSecure !== 'function') throw new TritonError('INVALID_ARG', "gRPC 'credentials' must be a ServerCredentials of @grpc/grpc-js; or give Node's TLS options as 'tls'");
  if (!c._isSecure()) return undefined;
  return { ...(c._getConstructorOptions?.() ?? {}), ...(c._getSecureContextOptions?.() ?? {}) };
}

/** What one connection may take of the server, with the defaults of the options (lib/kserve/options.ts). */
function connectionBudget(listen: GrpcListenOptions, limit: number): { maxConcurrentStreams: number; maxHeaderListBytes: number; maxConnectionBytes: number } {
  return {
    maxConcurrentStreams: listen.maxConcurrentStreams,
    maxHeaderListBytes: listen.maxHeaderListBytes,
    // Room for a largest message both ways, twice.
    maxConnectionBytes: listen.maxConnectionBytes ?? Math.max(64 * 1024 * 1024, 4 * limit),
  };
}

/**
 * The admin methods (everything but inference) over proto-loader's codecs:
 * request object in, response object out.
 */
function adminMethods(server: Server, options: ResolvedProtocolOptions): Record<string, (request: never) => Promise<unknown>> {
  const requireRepositoryControl = (): void => {
    if (!options.repositoryControl) {
      throw new CallError(STATUS.PERMISSION_DENIED, 'This API is restricted: repository control is disabled on this server (repositoryControl: false)');
    }
  };
  return {
    ServerLive: async () => ({ live: await server.live() }),
    ServerReady: async () => ({ ready: await server.ready() }),
    ModelReady: async (request: { name: string; version: string }) => ({
      ready: await server.model(request.name, parseVersion(request.version)).ready(),
    }),
    ServerMetadata: async () => {
      const metadata = await server.metadata();
      return {
        ...metadata,
        extensions: [
          ...metadata.extensions.filter((name) => !['system_shared_memory', 'cuda_shared_memory', 'logging'].includes(name)),
          SHARED_MEMORY_EXTENSION,
        ],
      };
    },
    ModelMetadata: (request: { name: string; version: string }) => server.model(request.name, parseVersion(request.version)).metadata(),
    ModelConfig: async (request: { name: string; version: string }) => ({
      config: await server.model(request.name, parseVersion(request.version)).config(),
    }),
    ModelStatistics: async (request: { name: string; version: string }) => {
      if (request.name === '') {
        const ready = await server.modelIndex({ readyOnly: true });
        const names = [...new Set(ready.map((entry) => entry.name))];
        const stats = await Promise.all(names.map((name) => server.model(name).statistics()));
        return { model_stats: bigintsAsStrings(stats.flat()) };
      }
      return { model_stats: bigintsAsStrings(await server.model(request.name, parseVersion(request.version)).statistics()) };
    },
    RepositoryIndex: async (request: { repository_name: string; ready: boolean }) => {
      requireRepositoryControl();
      if (request.repository_name !== '') throw new TritonError('UNSUPPORTED', "'repository_name' specification is not supported");
      return { models: await server.modelIndex({ readyOnly: request.ready }) };
    },
    RepositoryModelLoad: async (request: { repository_name: string; model_name: string; parameters: Record<string, WireParameter & { bytes_param?: Buffer }> }) => {
      requireRepositoryControl();
      if (request.repository_name !== '') throw new TritonError('UNSUPPORTED', "'repository_name' specification is not supported");
      const entries = Object.entries(request.parameters ?? {}).map(([key, value]): [string, unknown] => {
        const choice = value.parameter_choice as keyof typeof value | undefined;
        const v = choice === undefined ? undefined : value[choice];
        // gRPC carries file contents as bytes_param; HTTP as base64 text.
        return [key, key.startsWith('file:') && typeof v === 'string' ? Buffer.from(v) : v];
      });
      await server.loadModel(request.model_name, loadOptions(request.model_name, entries));
      return {};
    },
    RepositoryModelUnload: async (request: { repository_name: string; model_name: string; parameters: Record<string, WireParameter> }) => {
      requireRepositoryControl();
      if (request.repository_name !== '') throw new TritonError('UNSUPPORTED', "'repository_name' specification is not supported");
      const dependents = fromWireParameters(request.parameters).unload_dependents;
      await server.unloadModel(request.model_name, { unloadDependents: dependents === true, wait: false });
      return {};
    },
    SystemSharedMemoryStatus: (request: { name?: string }) => grpcSystemSharedMemoryStatus(server, request),
    SystemSharedMemoryRegister: (request: { name?: string; key?: string; offset?: string; byte_size?: string }) => grpcSystemSharedMemoryRegister(server, request),
    SystemSharedMemoryUnregister: (request: { name?: string }) => grpcSystemSharedMemoryUnregister(server, request),
    CudaSharedMemoryStatus: (request: { name?: string }) => grpcCudaSharedMemoryStatus(request),
    CudaSharedMemoryRegister: (request: { name?: string }) => grpcCudaSharedMemoryRegister(request),
    CudaSharedMemoryUnregister: () => grpcCudaSharedMemoryUnregister(),
  };
}

/** The service's calls: authorization, the admin methods and the two inference methods, over `Call`s. */
class GrpcService {
  readonly tracker = new Tracker();
  readonly controllers = new ControllerPool();
  /** Ends each open ModelStreamInfer stream (once its requests are done). */
  readonly streams = new Set<() => void>();
  readonly admin: Record<string, (request: never) => Promise<unknown>>;
  readonly #responseBuffers = new ResponseBuffers();

  constructor(
    readonly server: Server,
    readonly options: ResolvedProtocolOptions,
    readonly messages: Awaited<ReturnType<typeof loadInferenceMessages>>,
    /** The largest message a call may send. */
    readonly limit: number,
  ) {
    this.admin = adminMethods(server, options);
  }

  async guard(call: Call, method: string): Promise<void> {
    if (this.tracker.closing) throw new TritonError('UNAVAILABLE', 'the server is shutting down');
    const authorize = this.options.authorize;
    if (authorize === undefined) return;
    let allowed = false;
    try {
      allowed = await authorize({ protocol: 'grpc', method, path: `${SERVICE_PREFIX}${method}`, headers: call.metadata() as Record<string, string> });
    } catch {
      allowed = false;
    }
    if (!allowed) throw new CallError(STATUS.PERMISSION_DENIED, 'the request was not authorized');
  }

  #withTimeout(request: InferenceRequest): InferenceRequest {
    const cap = this.options.inferTimeoutMs;
    if (cap !== undefined && (request.timeoutMs === undefined || request.timeoutMs > cap)) request.timeoutMs = cap;
    return request;
  }

  async #isBatched(name: string, version: number, decoded: DecodedRequest): Promise<boolean> {
    if (!(decoded.outputs ?? []).some((output) => output.classification !== undefined)) return false;
    return ((await this.server.model(name, version).config()).max_batch_size ?? 0) > 0;
  }

  /** One call on a new stream: the method from its path, its one message read, or the stream's messages. */
  serve(call: Call, path: string): void {
    const method = path.startsWith(SERVICE_PREFIX) ? path.slice(SERVICE_PREFIX.length) : '';
    if (method === 'ModelStreamInfer') {
      this.#modelStreamInfer(call);
      return;
    }
    if (method !== 'ModelInfer' && !(method in this.admin)) {
      call.fail({ code: STATUS.UNIMPLEMENTED, message: `The server does not implement the method ${path}` });
      return;
    }
    let request: Buffer | undefined;
    let count = 0;
    call.read(
      this.limit,
      (message) => {
        request = message;
        count++;
      },
      () => {
        if (count !== 1 || request === undefined) {
          call.fail({ code: STATUS.UNIMPLEMENTED, message: `a unary call takes exactly one message, got ${count}` });
        } else if (method === 'ModelInfer') {
          this.#modelInfer(call, request);
        } else {
          this.#runAdmin(call, method, request);
        }
      },
    );
  }

  #runAdmin(call: Call, method: string, message: Buffer): void {
    const codec = this.messages[method] as MessageCodec;
    this.guard(call, method)
      .then(() => (this.admin[method] as (request: unknown) => Promise<unknown>)(decodeAdmin(method, codec, message)))
      .then(
        (response) => {
          const body = codec.responseSerialize(response as object);
          const out = Buffer.allocUnsafe(5 + body.length);
          body.copy(out, 5);
          call.send(out, true);
        },
        (error: unknown) => call.fail(statusOf(error)),
      );
  }

  #modelInfer(call: Call, message: Buffer): void {
    const run = async (): Promise<Buffer> => {
      const wire = decodeWire(message);
      const decoded = decodeGrpcInferRequest(wire);
      const version = parseVersion(wire.model_version);
      const model = this.server.model(wire.model_name, version);
      const request = this.#withTimeout(decoded.request);
      request.signal = call.signal;
      const classifying = decoded.outputs?.some((output) => output.classification !== undefined) ?? false;
      let response: InferenceResponse;
      try {
        response = await model.infer(request);
      } finally {
        call.inferenceSettled();
      }
      const batched = classifying && (await this.#isBatched(wire.model_name, version, decoded));
      const out = encodeModelInferResponse(encodeGrpcInferResponse(response, decoded, batched), 5, this.#responseBuffers.take);
      response.dispose();
      return out;
    };
    // Without an authorize hook nothing is awaited before the request is read.
    (this.options.authorize === undefined && !this.tracker.closing ? run() : this.guard(call, 'ModelInfer').then(run))
      .then(
        (out) => call.send(out, true, () => this.#responseBuffers.give(out)),
        (error: unknown) => call.fail(statusOf(error)),
      );
  }

  #modelStreamInfer(call: Call): void {
    // Each message counts as a request in flight; the stream itself is
    // ended by close() once its requests are done.
    let inFlight = 0;
    let ended = false;
    const finish = (): void => {
      if (ended && inFlight === 0) {
        this.streams.delete(endStream);
        call.end();
      }
    };
    const endStream = (): void => {
      ended = true;
      finish();
    };
    this.streams.add(endStream);
    call.stream.once('close', () => this.streams.delete(endStream));
    call.read(
      this.limit,
      (message) => {
        const done = this.tracker.begin();
        inFlight++;
        void this.#streamMessage(call, message).finally(() => {
          done();
          inFlight--;
          finish();
        });
      },
      endStream,
    );
  }

  /** One request of a ModelStreamInfer stream: its responses, or an error message on the stream. */
  async #streamMessage(call: Call, message: Buffer): Promise<void> {
    let wire: WireReceivedRequest | undefined;
    try {
      await this.guard(call, 'ModelStreamInfer');
      wire = decodeWire(message);
      const decoded = decodeGrpcInferRequest(wire);
      const version = parseVersion(wire.model_version);
      const batched = await this.#isBatched(wire.model_name, version, decoded);
      const model = this.server.model(wire.model_name, version);
      const request = this.#withTimeout(decoded.request);
      request.signal = call.signal;
      let lastFinal = false;
      for await (const response of model.stream(request)) {
        lastFinal = response.final;
        call.send(encodeModelStreamInferResponse('', encodeGrpcInferResponse(response, decoded, batched, { triton_final_response: response.final }), 5));
      }
      if (!lastFinal && decoded.emptyFinal) {
        call.send(
          encodeModelStreamInferResponse(
            '',
            { id: wire.id, model_name: wire.model_name, model_version: wire.model_version, parameters: { triton_final_response: true }, outputs: [], raw_output_contents: [] },
            5,
          ),
        );
      }
    } catch (error) {
      if (error instanceof CallError) call.fail(statusOf(error));
      else if (!call.signal.aborted) {
        const text = error instanceof Error ? error.message : String(error);
        const response = { id: wire?.id ?? '', model_name: wire?.model_name ?? '', model_version: wire?.model_version ?? '', parameters: {}, outputs: [], raw_output_contents: [] };
        call.send(encodeModelStreamInferResponse(text, response, 5));
      }
    }
  }
}

/** Starts the gRPC listener. */
export async function startGrpc(
  server: Server,
  options: ResolvedProtocolOptions,
  listen: GrpcListenOptions,
): Promise<GrpcFrontend> {
  const limit = listen.maxReceiveMessageBytes ?? options.maxBodyBytes;
  const service = new GrpcService(server, options, await loadInferenceMessages('serving KServe gRPC'), limit);
  const { tracker, streams } = service;
  const tls = listen.tls ?? credentialsAsTls(listen.credentials);
  const chosen = engineFor(listen.engine, tls, nativeEngineHere('grpc'));
  const budget = connectionBudget(listen, limit);
  const settings = {
    initialWindowSize: STREAM_WINDOW_BYTES,
    maxFrameSize: 1024 * 1024,
    maxConcurrentStreams: budget.maxConcurrentStreams,
    maxHeaderListSize: budget.maxHeaderListBytes,
  };
  // maxSessionMemory (MB) bounds what one connection may have buffered on Node's side; unsentBytes its answers.
  const maxSessionMemory = Math.ceil(budget.maxConnectionBytes / (1024 * 1024));
  // The native engine opens TLS itself: the JS server behind it reads plaintext.
  const h2 = tls === undefined || chosen.engine === 'native'
    ? http2.createServer({ settings, maxSessionMemory })
    : http2.createSecureServer({ ...(tls as http2.SecureServerOptions), settings, maxSessionMemory, allowHTTP1: false });
  const sessions = new Set<ServerHttp2Session>();

  // Each response is one write: send it now rather than wait for an ACK (Nagle).
  h2.on('connection', (socket: Socket) => socket.setNoDelay(true));
  h2.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    session.on('error', () => undefined); // a broken connection: its streams close
    session.once('remoteSettings', () => session.setLocalWindowSize(CONNECTION_WINDOW_BYTES));
  });
  h2.on('stream', (stream, headers) => {
    if (stream.session !== undefined && (unsentBytes.get(stream.session) ?? 0) > budget.maxConnectionBytes) {
      stream.close(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
      return;
    }
    const path = String(headers[':path'] ?? '');
    const done = tracker.begin();
    const call = new Call(stream, headers, listen.responseCompression, done, service.controllers);
    if (headers[':method'] !== 'POST' || !String(headers['content-type'] ?? '').startsWith('application/grpc')) {
      call.fail({ code: STATUS.UNIMPLEMENTED, message: 'not a gRPC request' });
      return;
    }
    // A stream's own end is not a request: only its messages are counted.
    if (path === `${SERVICE_PREFIX}ModelStreamInfer`) done();
    service.serve(call, path);
  });

  const closeCalls = async (): Promise<void> => {
    await tracker.drain();
    for (const endStream of [...streams]) endStream();
    const closed = new Promise<void>((resolve) => h2.close(() => resolve()));
    // GOAWAY: streams open now finish, new ones go elsewhere.
    for (const session of sessions) session.close();
    await closed;
  };

  const native = chosen.engine === 'node' ? undefined : await listenNativeGrpc(server, h2 as http2.Http2Server, {
    protocol: 'grpc',
    tls: chosen.tls,
    host: listen.host,
    port: listen.port,
    maxBodyBytes: limit,
    ...budget,
    // What JS must see or time itself (authorize, a time cap) goes to it.
    fastPath: options.authorize === undefined && options.inferTimeoutMs === undefined,
    responseCompression: listen.responseCompression,
  });
  if (native !== undefined) {
    return {
      server: h2,
      host: native.host,
      port: native.port,
      engine: 'native',
      get answeredNatively() {
        return native.answeredNatively;
      },
      get inFlight() {
        return tracker.count;
      },
      close: async () => {
        native.drain();
        await closeCalls();
        await native.close();
      },
    };
  }
  const port = await new Promise<number>((resolve, reject) => {
    h2.once('error', reject);
    h2.listen(listen.port, listen.host, () => {
      h2.off('error', reject);
      resolve((h2.address() as AddressInfo).port);
    });
  });
  return {
    server: h2,
    host: listen.host,
    port,
    engine: 'node',
    answeredNatively: 0,
    get inFlight() {
      return tracker.count;
    },
    close: closeCalls,
  };
}

/** The native engine's listener, whose virtual connections the JS server serves. */
function listenNativeGrpc(
  server: Server,
  h2: http2.Http2Server,
  settings: Pick<NativeListenerSettings, 'protocol' | 'host' | 'port' | 'maxBodyBytes' | 'fastPath' | 'maxConcurrentStreams' | 'maxHeaderListBytes' | 'maxConnectionBytes' | 'tls' | 'responseCompression'>,
): Promise<NativeListener> {
  // Timeouts are Node's HTTP/1.1 ones: the addon keeps none for gRPC, as the JS server.
  return openNativeListener(server, { ...settings, headersTimeoutMs: 0, requestTimeoutMs: 0, keepAliveTimeoutMs: 0 }, (socket) =>
    h2.emit('connection', socket),
  );
}

/** Reads the request of a method other than inference (protobufjs), its size in objects bounded first. */
function decodeAdmin(method: string, codec: MessageCodec, message: Buffer): unknown {
  try {
    checkMessageParts(message);
  } catch (error) {
    throw new TritonError('INVALID_ARG', `failed to parse the ${method} request: ${(error as Error).message}`);
  }
  return codec.requestDeserialize(message);
}

/** Reads a ModelInferRequest, malformed bytes as INVALID_ARG. */
function decodeWire(message: Buffer): WireReceivedRequest {
  try {
    return decodeModelInferRequest(message);
  } catch (error) {
    throw new TritonError('INVALID_ARG', `failed to parse the ModelInferRequest message: ${(error as Error).message}`);
  }
}
