/**
 * The HTTP/REST transport: KServe v2's routes to one address, over an
 * `HttpExchange` — the addon's keep-alive connections (native-http.ts) or
 * an undici pool (here). Tensors travel in Triton's binary tensor data
 * extension (a JSON header, then the raw bytes); outputs are views over the
 * received body, laid out so that the binary part starts 8-byte aligned.
 */
import { Buffer } from 'node:buffer';
import { promisify } from 'node:util';
import { gunzip, gzip, gzipSync, inflate } from 'node:zlib';
import { stringify as stringifyExact } from 'lossless-json';
import type * as Undici from 'undici';
import { TritonError, type TritonErrorCode } from '../errors.js';
import type { ModelMetadata, ModelIndexEntry, ServerMetadata } from '../surface.js';
import { parseStatisticsJson, type ModelStatistics } from '../observability/statistics.js';
import { outputTensor, type Tensor } from '../tensor.js';
import { DATA_TYPE_INFO } from '../data-types.js';
import { checkDatatype } from '../kserve/codec.js';
import type { ResolvedClientOptions } from './options.js';
import { NativeHttpExchange, nativeHttpChannelClass } from './native-http.js';
import { nativeTlsSettings } from './native-tls.js';
import { authority, type HostPort } from './targets.js';
import {
  ConnectionError,
  nativeChannelFor,
  PermissionError,
  PROTOCOL_RESPONSE_PARAMETERS,
  serverError,
  versionNumber,
  type Call,
  type DecodedResponse,
  type EncodedRequest,
  type LoadParameters,
  type StreamHandle,
  type StreamSink,
  type Transport,
} from './transport.js';

const gzipAsync = promisify(gzip);

/** Bodies up to this size are compressed on the calling thread: a hop to the thread pool costs more. */
const GZIP_SYNC_BYTES = 64 * 1024;

/**
 * A request body gzip'd. zlib sets up about 256 KiB of state for its
 * largest window: a window as large as the body (512 B at least) costs far
 * less for small ones and compresses them as well (as the addon does).
 */
async function gzipBody(body: Buffer): Promise<Buffer> {
  let windowBits = 9;
  while (windowBits < 15 && 2 ** windowBits < body.byteLength) windowBits++;
  const options = { windowBits, memLevel: Math.max(1, Math.min(8, windowBits - 6)) };
  return body.byteLength <= GZIP_SYNC_BYTES ? gzipSync(body, options) : gzipAsync(body, options);
}
const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);

const INFER_HEADER = 'inference-header-content-length';

/** HTTP status → Triton's error code, the inverse of Triton's front end (HttpCodeFromError). */
function codeOfStatus(status: number): TritonErrorCode {
  switch (status) {
    case 404:
      return 'NOT_FOUND';
    case 500:
      return 'INTERNAL';
    case 501:
      return 'UNSUPPORTED';
    case 503:
      return 'UNAVAILABLE';
    case 409:
      return 'ALREADY_EXISTS';
    default:
      return status >= 400 && status < 500 ? 'INVALID_ARG' : 'UNKNOWN';
  }
}

/** Failures to connect at all: the request was never sent. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

let undiciModule: Promise<typeof Undici> | undefined;
function loadUndici(): Promise<typeof Undici> {
  undiciModule ??= import('undici').catch((error: unknown) => {
    undiciModule = undefined;
    throw new TritonError('UNAVAILABLE', 'the HTTP client (http:// and https:// targets) needs the optional peer dependency undici: npm install undici', {
      cause: error,
    });
  });
  return undiciModule;
}

/** A response, read whole: its status, the headers the transport reads, the body. */
export interface HttpAnswer {
  status: number;
  /** Inference-Header-Content-Length: where the JSON header of an inference response ends. */
  headerLength: number | undefined;
  /** Content-Encoding, where the body is compressed. */
  encoding: string | undefined;
  /** The binary part (after `headerLength`) starts 8-byte aligned. */
  bytes: Uint8Array;
}

/**
 * Requests to one address: rejects with a ConnectionError, or CANCELLED when
 * `call.signal` aborts. The body comes in pieces (an inference request's
 * JSON header and each tensor), sent one after another; undefined: none.
 */
export interface HttpExchange {
  request(method: 'GET' | 'POST', path: string, headers: Record<string, string>, body: readonly Uint8Array[] | undefined, call: Call): Promise<HttpAnswer>;
  close(): void;
}

/**
 * Picks the exchange (`transport`: the addon's, or undici's, which must
 * then be installed); then makes a transport per address (`servername`:
 * the DNS name it came from, for TLS).
 */
export async function httpTransports(
  tls: boolean,
  options: ResolvedClientOptions,
): Promise<{ make: (address: HostPort, servername?: string) => Transport; native: boolean }> {
  const channel = nativeChannelFor(options, tls, nativeHttpChannelClass);
  if (channel !== undefined) {
    return {
      make: (address, servername) => {
        const endpoint = `${tls ? 'https' : 'http'}://${authority(address)}`;
        const settings = tls ? nativeTlsSettings(options.tls, servername ?? address.host) : undefined;
        const exchange = new NativeHttpExchange(channel, endpoint, address, { ...options, compress: options.compression === 'gzip' }, settings);
        return new HttpTransport(exchange, endpoint, options);
      },
      native: true,
    };
  }
  const undici = await loadUndici();
  return {
    make: (address, servername) => {
      const endpoint = `${tls ? 'https' : 'http'}://${authority(address)}`;
      return new HttpTransport(new UndiciExchange(undici, endpoint, tls, options, servername), endpoint, options);
    },
    native: false,
  };
}

interface JsonOutput {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: { binary_data_size?: number };
  data?: unknown[];
}

interface JsonResponse {
  id?: string;
  model_name: string;
  model_version?: string;
  parameters?: Record<string, string | number | boolean>;
  outputs?: JsonOutput[];
}

function modelPath(name: string, version: number): string {
  const base = `/v2/models/${encodeURIComponent(name)}`;
  return version < 0 ? base : `${base}/versions/${version}`;
}

function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch {
    // A bigint (a 64-bit sequence id) is written as the exact number.
    return stringifyExact(value) as string;
  }
}

/** The body's bytes in one buffer, the binary part (after `headerLength`) 8-byte aligned. */
async function readBody(body: AsyncIterable<Buffer>, contentLength: number | undefined, headerLength: number): Promise<Uint8Array> {
  if (contentLength === undefined) {
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk);
    return Buffer.concat(chunks);
  }
  const pad = (8 - (headerLength % 8)) % 8;
  const out = new Uint8Array(new ArrayBuffer(pad + contentLength), pad, contentLength);
  let offset = 0;
  for await (const chunk of body) {
    if (offset + chunk.byteLength > contentLength) throw new TritonError('INTERNAL', 'the response body is longer than its Content-Length');
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return offset === contentLength ? out : out.subarray(0, offset);
}

/** undici's keep-alive pool: the `js` transport (and `'auto'`'s where the addon lacks what a call needs). */
class UndiciExchange implements HttpExchange {
  readonly #pool: Undici.Pool;
  readonly #endpoint: string;
  readonly #maxBytes: number;

  constructor(undici: typeof Undici, endpoint: string, tls: boolean, options: ResolvedClientOptions, servername?: string) {
    this.#endpoint = endpoint;
    this.#maxBytes = options.maxMessageBytes;
    const connect: Record<string, unknown> = { timeout: options.connectTimeoutMs, keepAlive: true, keepAliveInitialDelay: options.keepAliveMs };
    if (tls) {
      const t = options.tls;
      if (t?.ca !== undefined) connect.ca = t.ca;
      if (t?.cert !== undefined) connect.cert = t.cert;
      if (t?.key !== undefined) connect.key = t.key;
      const name = t?.servername ?? servername;
      if (name !== undefined) connect.servername = name;
    }
    this.#pool = new undici.Pool(endpoint, {
      connections: options.connections,
      connect,
      // Calls have their own deadlines; undici's 5-minute defaults would cut long inferences.
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: 4000,
      maxResponseSize: options.maxMessageBytes + 1024 * 1024,
    });
  }

  async request(method: 'GET' | 'POST', path: string, headers: Record<string, string>, body: readonly Uint8Array[] | undefined, call: Call): Promise<HttpAnswer> {
    let signal = call.signal;
    if (call.deadline !== undefined) {
      const left = Math.max(0, call.deadline - Date.now());
      const timeout = AbortSignal.timeout(left);
      signal = signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
    }
    try {
      const payload = body === undefined ? null : body.length === 1 ? body[0]! : Buffer.concat(body);
      const response = await this.#pool.request({ path, method, headers, body: payload, signal: signal ?? null });
      const lengthHeader = response.headers[INFER_HEADER];
      const headerLength = typeof lengthHeader === 'string' ? Number(lengthHeader) : undefined;
      const length = response.headers['content-length'];
      const encoding = response.headers['content-encoding'];
      const known = typeof length === 'string' && encoding === undefined ? Number(length) : undefined;
      const bytes = await readBody(response.body as AsyncIterable<Buffer>, known, headerLength ?? 0);
      return { status: response.statusCode, headerLength, encoding: typeof encoding === 'string' ? encoding : undefined, bytes };
    } catch (error) {
      throw this.#error(error, call);
    }
  }

  #error(error: unknown, call: Call): TritonError {
    if (error instanceof TritonError) return error;
    const e = error as { name?: string; code?: string; message?: string };
    if (e.name === 'AbortError' || e.name === 'TimeoutError' || e.code === 'UND_ERR_ABORTED') {
      const timedOut = call.deadline !== undefined && Date.now() >= call.deadline;
      return serverError('CANCELLED', timedOut ? 'the call timed out' : 'the call was cancelled', this.#endpoint, error);
    }
    if (e.code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') {
      return serverError('INVALID_ARG', `the response is larger than maxMessageBytes (${this.#maxBytes})`, this.#endpoint, error);
    }
    const message = e.message ?? String(error);
    const sent = !(e.code !== undefined && NOT_SENT_CODES.has(e.code));
    if (e.code !== undefined && /CERT|TLS|SSL|SELF_SIGNED|ALTNAME/.test(e.code)) {
      return new ConnectionError(`TLS: ${message} [${e.code}]`, this.#endpoint, { cause: error, sent: false });
    }
    return new ConnectionError(e.code === undefined ? message : `${message} [${e.code}]`, this.#endpoint, { cause: error, sent });
  }

  close(): void {
    void this.#pool.destroy().catch(() => undefined);
  }
}

class HttpTransport implements Transport {
  readonly endpoint: string;
  readonly streaming = false;
  readonly #exchange: HttpExchange;
  readonly #headers: Record<string, string>;
  readonly #compress: boolean;

  constructor(exchange: HttpExchange, endpoint: string, options: ResolvedClientOptions) {
    this.#exchange = exchange;
    this.endpoint = endpoint;
    this.#headers = options.headers;
    this.#compress = options.compression === 'gzip';
  }

  /** One request, its response read whole (decompressed); rejects where the connection fails. */
  async #request(method: 'GET' | 'POST', path: string, call: Call, body?: readonly Uint8Array[] | string, extraHeaders?: Record<string, string>): Promise<HttpAnswer> {
    const headers: Record<string, string> = { ...this.#headers, ...call.headers, ...extraHeaders };
    let payload = typeof body === 'string' ? [Buffer.from(body)] : body;
    if (payload !== undefined) {
      headers['content-type'] ??= 'application/json';
      // Triton reads Content-Encoding on inference requests only (its repository routes refuse a compressed body).
      if (this.#compress && path.endsWith('/infer') && payload.some((part) => part.byteLength > 0)) {
        payload = [await gzipBody(Buffer.concat(payload))];
        headers['content-encoding'] = 'gzip';
      }
    }
    if (this.#compress) headers['accept-encoding'] = 'gzip';
    const answer = await this.#exchange.request(method, path, headers, payload, call);
    if (answer.encoding === 'gzip' || answer.encoding === 'deflate') {
      try {
        answer.bytes = answer.encoding === 'gzip' ? await gunzipAsync(answer.bytes) : await inflateAsync(answer.bytes);
      } catch (error) {
        throw new ConnectionError(`could not decompress the response (${answer.encoding}): ${(error as Error).message}`, this.endpoint, { cause: error });
      }
    }
    return answer;
  }

  /** The body; a status >= 400 becomes the server's error. */
  #payload(answer: HttpAnswer): Uint8Array {
    const bytes = answer.bytes;
    if (answer.status >= 400) {
      const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
      let message = text;
      try {
        const parsed = JSON.parse(text) as { error?: unknown };
        if (typeof parsed.error === 'string') message = parsed.error;
      } catch {
        // not JSON: the text as it is
      }
      if (answer.status === 401 || answer.status === 403) {
        throw new PermissionError(`HTTP ${answer.status}: ${message}`, this.endpoint);
      }
      throw serverError(codeOfStatus(answer.status), message || `HTTP ${answer.status}`, this.endpoint);
    }
    return bytes;
  }

  async #json<T>(method: 'GET' | 'POST', path: string, call: Call, body?: unknown): Promise<T | undefined> {
    const bytes = this.#payload(await this.#request(method, path, call, body === undefined ? undefined : jsonText(body)));
    if (bytes.byteLength === 0) return undefined;
    return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')) as T;
  }

  /** A health route: 200 means yes, any other answer no; a failed connection rejects. */
  async #health(path: string, call: Call): Promise<boolean> {
    return (await this.#request('GET', path, call)).status === 200;
  }

  live(call: Call): Promise<boolean> {
    return this.#health('/v2/health/live', call);
  }

  ready(call: Call): Promise<boolean> {
    return this.#health('/v2/health/ready', call);
  }

  async metadata(call: Call): Promise<ServerMetadata> {
    const { name, version, extensions } = (await this.#json<ServerMetadata>('GET', '/v2', call))!;
    return { name, version, extensions };
  }

  async modelIndex(readyOnly: boolean, call: Call): Promise<ModelIndexEntry[]> {
    return (await this.#json<ModelIndexEntry[]>('POST', '/v2/repository/index', call, { ready: readyOnly })) ?? [];
  }

  async loadModel(name: string, parameters: LoadParameters, call: Call): Promise<void> {
    const wire: Record<string, string> = {};
    if (parameters.config !== undefined) wire.config = parameters.config;
    for (const [path, bytes] of parameters.files) wire[`file:${path}`] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
    await this.#json('POST', `/v2/repository/models/${encodeURIComponent(name)}/load`, call, Object.keys(wire).length > 0 ? { parameters: wire } : {});
  }

  async unloadModel(name: string, unloadDependents: boolean, call: Call): Promise<void> {
    const body = unloadDependents ? { parameters: { unload_dependents: true } } : {};
    await this.#json('POST', `/v2/repository/models/${encodeURIComponent(name)}/unload`, call, body);
  }

  modelReady(name: string, version: number, call: Call): Promise<boolean> {
    return this.#health(`${modelPath(name, version)}/ready`, call);
  }

  async modelMetadata(name: string, version: number, call: Call): Promise<ModelMetadata> {
    const m = (await this.#json<ModelMetadata>('GET', modelPath(name, version), call))!;
    for (const tensor of [...m.inputs, ...m.outputs]) checkDatatype(tensor.datatype, `tensor '${tensor.name}'`);
    return { name: m.name, versions: m.versions ?? [], platform: m.platform, inputs: m.inputs, outputs: m.outputs };
  }

  async modelConfig(name: string, version: number, call: Call): Promise<unknown> {
    return this.#json('GET', `${modelPath(name, version)}/config`, call);
  }

  async statistics(name: string, version: number, call: Call): Promise<ModelStatistics[]> {
    const path = name === '' ? '/v2/models/stats' : `${modelPath(name, version)}/stats`;
    const bytes = this.#payload(await this.#request('GET', path, call));
    // 64-bit counters stay exact: parsed as lossless JSON.
    return parseStatisticsJson(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  }

  async infer(request: EncodedRequest, call: Call): Promise<DecodedResponse> {
    const header: Record<string, unknown> = {};
    if (request.id !== '') header.id = request.id;
    header.parameters = { ...request.parameters, binary_data_output: true };
    header.inputs = request.inputs.map((input) => ({
      name: input.name,
      datatype: input.datatype,
      shape: input.shape,
      parameters: { binary_data_size: input.bytes.byteLength },
    }));
    if (request.outputs !== undefined) {
      header.outputs = request.outputs.map((output) => ({
        name: output.name,
        parameters: output.classification === undefined ? { binary_data: true } : { binary_data: true, classification: output.classification },
      }));
    }
    const json = Buffer.from(jsonText(header));
    // The tensors go as they are, after the header: the exchange writes the pieces in order.
    const body = [json, ...request.inputs.map((input) => input.bytes)];
    const answer = await this.#request('POST', `${modelPath(request.model, request.version)}/infer`, call, body, {
      'content-type': 'application/octet-stream',
      [INFER_HEADER]: String(json.byteLength),
    });
    return this.#decode(this.#payload(answer), answer.headerLength);
  }

  #decode(bytes: Uint8Array, headerLength: number | undefined): DecodedResponse {
    const jsonEnd = headerLength ?? bytes.byteLength;
    let message: JsonResponse;
    try {
      message = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, jsonEnd).toString('utf8')) as JsonResponse;
    } catch (error) {
      throw serverError('INTERNAL', `the response header is not JSON: ${(error as Error).message}`, this.endpoint);
    }
    const outputs: Record<string, Tensor> = {};
    let offset = jsonEnd;
    for (const output of message.outputs ?? []) {
      const datatype = checkDatatype(output.datatype, `output '${output.name}'`);
      const size = output.parameters?.binary_data_size;
      if (size === undefined) {
        throw serverError('INTERNAL', `output '${output.name}' came as JSON although binary data was asked for`, this.endpoint);
      }
      if (offset + size > bytes.byteLength) throw serverError('INTERNAL', `output '${output.name}' runs past the end of the response`, this.endpoint);
      outputs[output.name] = outputTensor(output.name, DATA_TYPE_INFO[datatype].enum, output.shape, bytes.buffer, bytes.byteOffset + offset, size);
      offset += size;
    }
    const parameters: Record<string, string | number | boolean> = {};
    for (const key in message.parameters ?? {}) {
      if (!PROTOCOL_RESPONSE_PARAMETERS.has(key)) parameters[key] = message.parameters![key]!;
    }
    return {
      model: { name: message.model_name, version: versionNumber(message.model_version) },
      id: message.id ?? '',
      outputs,
      parameters,
      final: true,
    };
  }

  /** HTTP has no streaming inference: one request, one response (a decoupled model's is the server's error). */
  stream(request: EncodedRequest, call: Call, sink: StreamSink): StreamHandle {
    const controller = new AbortController();
    const signal = call.signal === undefined ? controller.signal : AbortSignal.any([call.signal, controller.signal]);
    let done = false;
    this.infer(request, { ...call, signal }).then(
      (response) => {
        if (done) return;
        done = true;
        sink.response(response);
        sink.end();
      },
      (error: unknown) => {
        if (done) return;
        done = true;
        sink.error(error as TritonError);
      },
    );
    return {
      cancel: () => {
        if (done) return;
        done = true;
        controller.abort();
      },
    };
  }

  close(): void {
    this.#exchange.close();
  }
}
