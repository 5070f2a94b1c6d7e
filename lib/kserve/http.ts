/**
 * KServe v2 HTTP/REST routes (with Triton's extensions) as a `node:http`
 * request handler over the public Server/Model API.
 */
import { Buffer } from 'node:buffer';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { promisify } from 'node:util';
import { createGunzip, createInflate, deflate, gzip } from 'node:zlib';
import { TritonError, type TritonErrorCode } from '../errors.js';
import type { InferenceRequest } from '../surface.js';
import type { Server } from '../server.js';
import { type Tensor, type TensorInit } from '../tensor.js';
import { DATA_TYPE_INFO } from '../data-types.js';
import {
  checkParameters,
  decodeHttpInferRequest,
  encodeHttpInferResponse,
  requestFromParts,
  tensorFromBytes,
  tensorFromJson,
  type DecodedRequest,
  type ParameterValue,
} from './codec.js';
import { kserveProtocolOptionsSchema, type KServeProtocolOptions, type ResolvedProtocolOptions } from './options.js';
import { stringify as stringifyExact } from 'lossless-json';
import { parseNetworkJson } from './json-reader.js';
import { parseOptions, Tracker, tritonErrorCode } from './shared.js';
import { runSharedMemoryRoute, SHARED_MEMORY_EXTENSION, sharedMemoryMethod, sharedMemoryRoute } from './shared-memory.js';

/** Triton's HTTP status for each error code (its front end's HttpCodeFromError). */
export function httpStatus(code: TritonErrorCode): number {
  switch (code) {
    case 'INTERNAL':
      return 500;
    case 'NOT_FOUND':
      return 404;
    case 'UNAVAILABLE':
      return 503;
    case 'UNSUPPORTED':
      return 501;
    default:
      return 400;
  }
}

/** Extensions Triton's core reports that this front end does not serve. */
const NOT_SERVED = new Set(['cuda_shared_memory', 'logging']);

const INFER_HEADER = 'inference-header-content-length';
/** The socket's abort signal (Routes.clientSignal). */
const CONNECTION_SIGNAL = Symbol('kserve.connectionSignal');

const gzipAsync = promisify(gzip);
const deflateAsync = promisify(deflate);

/**
 * The response compression `Accept-Encoding` asks for, as Triton's HTTP front
 * end chooses it for inference responses: gzip or deflate, the highest q
 * (q=0 refuses), the first listed on a tie; undefined for none.
 */
export function responseEncoding(accept: string | undefined): 'gzip' | 'deflate' | undefined {
  if (accept === undefined) return undefined;
  let best: 'gzip' | 'deflate' | undefined;
  let bestQ = 0;
  for (const entry of accept.split(',')) {
    const [name = '', ...params] = entry.split(';').map((part) => part.trim());
    const coding = name.toLowerCase();
    if (coding !== 'gzip' && coding !== 'deflate') continue;
    const q = params.find((param) => param.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    if (Number.isFinite(weight) && weight > bestQ) {
      best = coding;
      bestQ = weight;
    }
  }
  return best;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The connection cannot be reused (e.g. an unread body is still on it). */
    readonly closeConnection = false,
  ) {
    super(message);
  }
}

/** A request handler; with `next` (Express, Connect) unmatched paths are passed on. */
export type KServeHandler = ((req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void) & {
  /** Requests being handled now. */
  readonly inFlight: number;
  /** Refuse new requests (503) and resolve once those in flight are done. */
  drain(): Promise<void>;
};

/** Options of {@link kserveHandler}: the protocol options, and a prefix to serve under. */
export interface KServeHandlerOptions extends KServeProtocolOptions {
  /** A path prefix to strip first (e.g. `/triton`); requests outside it go to `next` or 404. */
  prefix?: string;
}

function sendJson(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res: ServerResponse, error: unknown): void {
  let status = 500;
  let message = String(error);
  if (error instanceof HttpError) {
    status = error.status;
    message = error.message;
  } else if (tritonErrorCode(error) !== undefined) {
    status = httpStatus(tritonErrorCode(error) as TritonErrorCode);
    message = (error as Error).message;
  } else if (error instanceof URIError) {
    status = 400; // a malformed %-escape in a model name
    message = `invalid URL: ${error.message}`;
  } else if (error instanceof Error) {
    message = error.message;
  }
  sendJson(res, status, JSON.stringify({ error: message }));
}

function sendEmpty(res: ServerResponse, status: number): void {
  res.writeHead(status, { 'Content-Length': 0 });
  res.end();
}

/**
 * Reads the body into one buffer. When the JSON header length is known the
 * buffer is laid out so that the binary part starts 8-byte aligned: binary
 * inputs then become TypedArrays over it without a copy.
 */
function readBody(req: IncomingMessage, limit: number, headerLength: number | undefined): Promise<Buffer> {
  const rawLength = req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']);
  // Refused before its end, the rest of a body sent within the limit (one that inflates past it,
  // say) is read and dropped and the connection kept: closing with it unread would reset the
  // connection, and the answer with it. A body declared past the limit is not waited for.
  const closeAfter = rawLength !== undefined && rawLength > limit;
  const tooLarge = (size: number): HttpError =>
    new HttpError(400, `request size of ${size} bytes exceeds the maximum allowed input size of ${limit} bytes`, closeAfter);
  /** Room for up to 7 bytes in front, chosen so that the binary part lands 8-byte aligned. */
  const allocate = (size: number): { buffer: Buffer; pad: number } => {
    if (headerLength === undefined) return { buffer: Buffer.allocUnsafe(size), pad: 0 };
    const buffer = Buffer.allocUnsafe(size + 7);
    return { buffer, pad: (8 - ((buffer.byteOffset + headerLength) % 8)) % 8 };
  };
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  // A compressed body's Content-Length is not its size: the limit applies to what it inflates to.
  const declared = req.headers['content-length'] === undefined || encoding !== 'identity' ? undefined : Number(req.headers['content-length']);
  return new Promise<Buffer>((resolve, reject) => {
    if (req.readableEnded) {
      // A body parser (express.json(), ...) ran first and took the stream.
      reject(new HttpError(500, 'the request body was already consumed: mount the KServe handler before body parsers'));
      return;
    }
    if (encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'deflate') {
      req.resume();
      reject(new HttpError(415, `unsupported Content-Encoding '${encoding}': use gzip or deflate`, closeAfter));
      return;
    }
    if (declared !== undefined && declared > limit) {
      reject(tooLarge(declared));
      return;
    }
    // Inflated as it arrives and stopped at the limit: a zip bomb costs at most `limit` bytes.
    const inflater = encoding === 'gzip' ? createGunzip() : encoding === 'deflate' ? createInflate() : undefined;
    const source: NodeJS.ReadableStream = inflater === undefined ? req : req.pipe(inflater);
    let target = declared === undefined ? undefined : allocate(declared);
    const chunks: Buffer[] = [];
    let received = 0;
    const fail = (error: Error): void => {
      source.removeListener('data', onData);
      if (inflater !== undefined) {
        req.unpipe(inflater);
        inflater.destroy();
      }
      req.resume();
      reject(error);
    };
    const onData = (chunk: Buffer): void => {
      if (received + chunk.byteLength > (declared ?? limit)) {
        fail(tooLarge(received + chunk.byteLength));
        return;
      }
      if (target !== undefined) chunk.copy(target.buffer, target.pad + received);
      else chunks.push(chunk);
      received += chunk.byteLength;
    };
    source.on('data', onData);
    inflater?.once('error', (error) => fail(new HttpError(400, `failed to decompress the ${encoding} request body: ${error.message}`, closeAfter)));
    source.once('end', () => {
      if (target === undefined) {
        target = allocate(received);
        let offset = target.pad;
        for (const chunk of chunks) offset += chunk.copy(target.buffer, offset);
      }
      resolve(target.buffer.subarray(target.pad, target.pad + received));
    });
    req.once('error', reject);
    req.once('aborted', () => reject(new HttpError(400, 'the client aborted the request')));
  });
}

async function readJson(req: IncomingMessage, limit: number): Promise<Record<string, unknown> | undefined> {
  const body = await readBody(req, limit, undefined);
  if (body.byteLength === 0) return undefined;
  const value = parseNetworkJson(body);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TritonError('INVALID_ARG', 'the request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

function parseVersion(text: string | undefined): number {
  return text === undefined ? -1 : Number(text);
}

const MODEL_ROUTE = /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?(?:\/(infer|generate|generate_stream|ready|config|stats|trace\/setting))?$/;
const REPOSITORY_ROUTE = /^\/v2\/repository(?:\/([^/]+))?\/(index|models\/([^/]+)\/(load|unload))$/;

/** The KServe v2 HTTP/REST routes as a `node:http` (or Express/Connect) handler. */
export function kserveHandler(server: Server, options: KServeHandlerOptions = {}): KServeHandler {
  const { prefix, ...protocol } = options;
  const resolved = parseOptions(kserveProtocolOptionsSchema, protocol, 'kserveHandler options');
  const tracker = new Tracker();
  const routes = new Routes(server, resolved);
  const normalizedPrefix = prefix === undefined || prefix === '/' ? '' : prefix.replace(/\/$/, '');

  const handler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void => {
    const url = req.url ?? '/';
    const queryAt = url.indexOf('?');
    let path = queryAt === -1 ? url : url.slice(0, queryAt);
    if (normalizedPrefix !== '') {
      if (path !== normalizedPrefix && !path.startsWith(`${normalizedPrefix}/`)) {
        if (next) next();
        else sendJson(res, 404, '{"error":"Not Found"}');
        return;
      }
      path = path.slice(normalizedPrefix.length) || '/';
    }
    if (next !== undefined && path !== '/v2' && !path.startsWith('/v2/')) {
      next();
      return;
    }
    if (tracker.closing) {
      res.setHeader('Connection', 'close');
      sendJson(res, 503, '{"error":"the server is shutting down"}');
      req.resume();
      return;
    }
    const done = tracker.begin();
    res.once('close', done);
    routes
      .handle(req, res, path)
      .catch((error: unknown) => {
        if (error instanceof HttpError && error.closeConnection && !res.headersSent) res.setHeader('Connection', 'close');
        sendError(res, error);
      })
      // Answered: a pipelined answer still queued behind others gets no 'close' if its connection dies.
      .finally(() => {
        if (res.writableEnded) done();
      });
  };
  Object.defineProperty(handler, 'inFlight', { get: () => tracker.count });
  Object.defineProperty(handler, 'drain', { value: () => tracker.drain() });
  return handler as KServeHandler;
}

class Routes {
  constructor(
    readonly server: Server,
    readonly options: ResolvedProtocolOptions,
  ) {}

  async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const method = req.method ?? 'GET';
    const cors = this.options.cors;
    if (cors !== false) {
      const origin = req.headers.origin;
      const allowed = Array.isArray(cors.origin) ? origin !== undefined && cors.origin.includes(origin) : true;
      if (allowed && origin !== undefined) {
        res.setHeader('Access-Control-Allow-Origin', Array.isArray(cors.origin) ? origin : cors.origin);
        res.setHeader('Vary', 'Origin');
        res.setHeader('Access-Control-Expose-Headers', 'Inference-Header-Content-Length');
      }
      if (method === 'OPTIONS') {
        res.setHeader('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
        res.setHeader('Access-Control-Allow-Headers', 'Content-Type, Inference-Header-Content-Length, Authorization');
        sendEmpty(res, 204);
        return;
      }
    }
    const authorize = this.options.authorize;
    if (authorize !== undefined) {
      let allowed = false;
      try {
        allowed = await authorize({ protocol: 'http', method, path, headers: req.headers });
      } catch {
        allowed = false;
      }
      if (!allowed) throw new HttpError(403, 'This API is restricted: the request was not authorized');
    }
    const expect = (wanted: 'GET' | 'POST'): void => {
      if (method !== wanted) throw new HttpError(405, 'Method Not Allowed');
    };

    if (path === '/v2') {
      expect('GET');
      const metadata = await this.server.metadata();
      metadata.extensions = metadata.extensions.filter((name) => !NOT_SERVED.has(name));
      if (!metadata.extensions.includes(SHARED_MEMORY_EXTENSION)) metadata.extensions.push(SHARED_MEMORY_EXTENSION);
      sendJson(res, 200, JSON.stringify(metadata));
      return;
    }
    if (path === '/v2/health/live' || path === '/v2/health/ready') {
      expect('GET');
      const ok = path.endsWith('live') ? await this.server.live() : await this.server.ready();
      sendEmpty(res, ok ? 200 : 400);
      return;
    }
    if (path === '/v2/models/stats') {
      expect('GET');
      sendJson(res, 200, stringifyExact({ model_stats: await this.allStatistics() }) ?? '{}');
      return;
    }
    const model = MODEL_ROUTE.exec(path);
    if (model !== null) {
      const name = decodeURIComponent(model[1] as string);
      const version = parseVersion(model[2]);
      await this.modelRoute(req, res, name, version, model[3] ?? '', expect);
      return;
    }
    const repository = REPOSITORY_ROUTE.exec(path);
    if (repository !== null) {
      if (!this.options.repositoryControl) {
        throw new HttpError(403, 'This API is restricted: repository control is disabled on this server (repositoryControl: false)');
      }
      expect('POST');
      if (repository[1] !== undefined) throw new TritonError('UNSUPPORTED', "'repository_name' specification is not supported");
      if (repository[2] === 'index') await this.index(req, res);
      else await this.control(req, res, decodeURIComponent(repository[3] as string), repository[4] as 'load' | 'unload');
      return;
    }
    const shm = sharedMemoryRoute(path);
    if (shm !== undefined) {
      expect(sharedMemoryMethod(shm));
      const body = shm.action === 'register' ? await readJson(req, this.options.maxBodyBytes) : undefined;
      const text = await runSharedMemoryRoute(this.server, shm, body);
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    if (path === '/v2/logging' || path === '/v2/trace/setting' || /^\/v2\/(system|cuda)sharedmemory\//.test(path)) {
      throw new TritonError('UNSUPPORTED', `${path} is not supported by the in-process server`);
    }
    throw new HttpError(404, 'Not Found');
  }

  async modelRoute(
    req: IncomingMessage,
    res: ServerResponse,
    name: string,
    version: number,
    kind: string,
    expect: (method: 'GET' | 'POST') => void,
  ): Promise<void> {
    const model = this.server.model(name, version);
    switch (kind) {
      case '':
        expect('GET');
        sendJson(res, 200, JSON.stringify(await model.metadata()));
        return;
      case 'ready':
        expect('GET');
        if (!(await model.ready())) throw new HttpError(400, 'Model version not ready');
        sendEmpty(res, 200);
        return;
      case 'config':
        expect('GET');
        sendJson(res, 200, JSON.stringify(await model.config()));
        return;
      case 'stats':
        expect('GET');
        // Exact 64-bit counters, as JSON numbers like Triton's.
        sendJson(res, 200, stringifyExact({ model_stats: await model.statistics() }) ?? '{}');
        return;
      case 'infer':
        expect('POST');
        await this.infer(req, res, name, version);
        return;
      case 'generate':
      case 'generate_stream':
        expect('POST');
        await this.generate(req, res, name, version, kind === 'generate_stream');
        return;
      default:
        throw new TritonError('UNSUPPORTED', 'trace settings are not supported by the in-process server');
    }
  }

  async allStatistics(): Promise<unknown[]> {
    const ready = await this.server.modelIndex({ readyOnly: true });
    const names = [...new Set(ready.map((entry) => entry.name))];
    const stats = await Promise.all(names.map((name) => this.server.model(name).statistics()));
    return stats.flat();
  }

  /**
   * Aborts when the client's connection closes. One per connection, not per
   * request: an HTTP/1.1 connection carries one request at a time, and a
   * request already answered has stopped listening.
   */
  clientSignal(req: IncomingMessage): AbortSignal {
    const socket = req.socket as typeof req.socket & { [CONNECTION_SIGNAL]?: AbortSignal };
    let signal = socket[CONNECTION_SIGNAL];
    if (signal === undefined) {
      const controller = new AbortController();
      signal = controller.signal;
      socket[CONNECTION_SIGNAL] = signal;
      if (socket.destroyed) controller.abort(new Error('the client disconnected'));
      else socket.once('close', () => controller.abort(new Error('the client disconnected')));
    }
    return signal;
  }

  withTimeout(request: InferenceRequest): InferenceRequest {
    const limit = this.options.inferTimeoutMs;
    if (limit !== undefined && (request.timeoutMs === undefined || request.timeoutMs > limit)) request.timeoutMs = limit;
    return request;
  }

  async infer(req: IncomingMessage, res: ServerResponse, name: string, version: number): Promise<void> {
    const headerValue = req.headers[INFER_HEADER];
    let headerLength: number | undefined;
    if (headerValue !== undefined) {
      const text = Array.isArray(headerValue) ? headerValue[0] : headerValue;
      headerLength = Number(text);
      // A compressed body's Content-Length says nothing of the header's length in it.
      const compressed = req.headers['content-encoding'] !== undefined && req.headers['content-encoding'] !== 'identity';
      const length = req.headers['content-length'] === undefined || compressed ? Infinity : Number(req.headers['content-length']);
      if (!/^\d+$/.test(text ?? '') || headerLength > length) {
        throw new TritonError('INVALID_ARG', `Unable to parse Inference-Header-Content-Length, got: ${text}`);
      }
    }
    const body = await readBody(req, this.options.maxBodyBytes, headerLength);
    const model = this.server.model(name, version);
    const decoded = headerLength === 0 ? await rawRequest(model, body) : decodeHttpInferRequest(body, headerLength);
    const request = this.withTimeout(decoded.request);
    request.signal = this.clientSignal(req);
    const classifying = decoded.outputs?.some((output) => output.classification !== undefined) ?? false;
    const [response, batched] = await Promise.all([
      model.infer(request),
      classifying ? model.config().then((config) => (config.max_batch_size ?? 0) > 0) : false,
    ]);
    const encoded = encodeHttpInferResponse(response, decoded, batched);
    const compression = responseEncoding(req.headers['accept-encoding']);
    if (compression !== undefined) {
      // As Triton: the whole body compressed, Inference-Header-Content-Length the JSON's own length.
      const header = Buffer.from(encoded.json);
      const body = await (compression === 'gzip' ? gzipAsync : deflateAsync)(Buffer.concat([header, ...encoded.binary]));
      response.dispose();
      const headers: OutgoingHttpHeaders = { 'Content-Encoding': compression, 'Content-Length': body.byteLength, Vary: 'Accept-Encoding' };
      if (encoded.binary.length === 0) headers['Content-Type'] = 'application/json';
      else Object.assign(headers, { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': header.byteLength });
      res.writeHead(200, headers);
      res.end(body);
      return;
    }
    if (encoded.binary.length === 0) {
      // Encoded into a string: the outputs' memory can go now, not at a GC.
      response.dispose();
      sendJson(res, 200, encoded.json);
      return;
    }
    const header = Buffer.from(encoded.json);
    let total = header.byteLength;
    for (const part of encoded.binary) total += part.byteLength;
    res.writeHead(200, {
      'Content-Type': 'application/octet-stream',
      'Inference-Header-Content-Length': header.byteLength,
      'Content-Length': total,
    });
    // Corked writes go out as one writev: the header, then each output's own bytes.
    res.cork();
    res.write(header);
    for (const part of encoded.binary) res.write(part);
    // The parts are views of the outputs' memory: let go of it once written.
    res.end(() => response.dispose());
  }

  async generate(req: IncomingMessage, res: ServerResponse, name: string, version: number, streaming: boolean): Promise<void> {
    const body = (await readJson(req, this.options.maxBodyBytes)) ?? {};
    const model = this.server.model(name, version);
    const metadata = await model.metadata();
    const inputs = new Map(metadata.inputs.map((input) => [input.name, input]));
    const request: InferenceRequest = { inputs: {} };
    const parameters: Record<string, ParameterValue> = {};
    const tensors: Record<string, TensorInit> = {};
    const take = (key: string, value: unknown): void => {
      const input = inputs.get(key);
      if (input === undefined) {
        Object.assign(parameters, checkParameters({ [key]: value }, 'the generate request'));
        return;
      }
      const count = Array.isArray(value) ? value.length : 1;
      tensors[key] = tensorFromJson(key, input.datatype, generateShape(key, input.shape, count), value);
    };
    for (const [key, value] of Object.entries(body)) {
      if (key === 'id') {
        if (typeof value !== 'string') throw new TritonError('INVALID_ARG', "'id' must be a string");
        request.id = value;
      } else if (key === 'parameters') {
        if (typeof value !== 'object' || value === null || Array.isArray(value)) {
          throw new TritonError('INVALID_ARG', "Expected JSON object for keyword: 'parameters'");
        }
        for (const [k, v] of Object.entries(value)) take(k, v);
      } else {
        take(key, value);
      }
    }
    request.inputs = tensors;
    if (Object.keys(parameters).length > 0) request.parameters = parameters;
    request.signal = this.clientSignal(req);
    this.withTimeout(request);

    const toJson = (response: { id: string; model: { name: string; version: number }; outputs: Record<string, Tensor>; parameters: Record<string, ParameterValue> }): string => {
      const out: Record<string, unknown> = {};
      if (response.id !== '') out.id = response.id;
      out.model_name = response.model.name;
      out.model_version = String(response.model.version);
      Object.assign(out, response.parameters);
      let text = JSON.stringify(out).slice(0, -1);
      for (const tensor of Object.values(response.outputs)) text += `,${JSON.stringify(tensor.name)}:${generateValue(tensor)}`;
      return `${text}}`;
    };

    if (!streaming) {
      let body: string | undefined;
      let count = 0;
      for await (const response of model.stream(request)) {
        count++;
        body = toJson(response);
      }
      if (count !== 1 || body === undefined) {
        throw new TritonError(
          'INTERNAL',
          'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses',
        );
      }
      sendJson(res, 200, body);
      return;
    }
    const iterator = model.stream(request)[Symbol.asyncIterator]();
    const first = await iterator.next(); // errors before the first response keep their status
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' });
    try {
      for (let item = first; !item.done; item = await iterator.next()) res.write(`data: ${toJson(item.value)}\n\n`);
    } catch (error) {
      res.write(`data: ${JSON.stringify({ error: error instanceof Error ? error.message : String(error) })}\n\n`);
    } finally {
      await iterator.return?.();
    }
    res.end();
  }

  async index(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req, this.options.maxBodyBytes);
    const ready = body?.ready;
    if (ready !== undefined && typeof ready !== 'boolean') {
      throw new TritonError('INVALID_ARG', "Invalid value for 'ready': expected a boolean");
    }
    sendJson(res, 200, JSON.stringify(await this.server.modelIndex({ readyOnly: ready === true })));
  }

  async control(req: IncomingMessage, res: ServerResponse, name: string, action: 'load' | 'unload'): Promise<void> {
    const body = await readJson(req, this.options.maxBodyBytes);
    const parameters = body?.parameters ?? {};
    if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
      throw new TritonError('INVALID_ARG', "'parameters' must be an object");
    }
    const entries = Object.entries(parameters as Record<string, unknown>);
    if (action === 'unload') {
      const dependents = (parameters as Record<string, unknown>).unload_dependents;
      if (dependents !== undefined && typeof dependents !== 'boolean') {
        throw new TritonError('INVALID_ARG', "Unable to parse 'unload_dependents': expected a boolean");
      }
      await this.server.unloadModel(name, { unloadDependents: dependents === true, wait: false });
      sendEmpty(res, 200);
      return;
    }
    await this.server.loadModel(name, loadOptions(name, entries));
    sendEmpty(res, 200);
  }
}

/** The load parameters of the protocol (`config` JSON text, base64 `file:` entries) as `loadModel` options. */
export function loadOptions(name: string, entries: Array<[string, unknown]>): Parameters<Server['loadModel']>[1] {
  let config: Record<string, unknown> | undefined;
  const files: Record<string, Uint8Array> = {};
  for (const [key, value] of entries) {
    if (key === 'config') {
      if (typeof value !== 'string') throw new TritonError('INVALID_ARG', "load parameter 'config' must be a JSON string");
      config = parseNetworkJson(Buffer.from(value), { what: `the 'config' of model '${name}'` }) as Record<string, unknown>;
    } else if (key.startsWith('file:')) {
      if (typeof value === 'string') {
        if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value.replace(/\s/g, ''))) {
          throw new TritonError('INVALID_ARG', `failed to decode base64 of '${key}'`);
        }
        files[key.slice(5)] = Buffer.from(value, 'base64');
      } else if (value instanceof Uint8Array) {
        files[key.slice(5)] = value;
      } else {
        throw new TritonError('INVALID_ARG', `load parameter '${key}' must be base64 text`);
      }
    } else {
      throw new TritonError('INVALID_ARG', `unknown load parameter '${key}'`);
    }
  }
  const options: NonNullable<Parameters<Server['loadModel']>[1]> = {};
  if (config !== undefined) options.config = config as NonNullable<typeof options.config>;
  if (Object.keys(files).length > 0) options.files = files;
  return options;
}

/**
 * Triton's raw binary request (Inference-Header-Content-Length: 0): the
 * whole body is the one input of the model, its shape deduced from the byte
 * size (batch 1 for batching models); every output comes back binary.
 */
async function rawRequest(model: ReturnType<Server['model']>, body: Buffer): Promise<DecodedRequest> {
  const [metadata, config] = await Promise.all([model.metadata(), model.config()]);
  const input = metadata.inputs[0];
  if (metadata.inputs.length !== 1 || input === undefined) {
    throw new TritonError('INVALID_ARG', `raw binary request needs a model with exactly 1 input; '${model.name}' has ${metadata.inputs.length}`);
  }
  const dims = (config.max_batch_size ?? 0) > 0 ? input.shape.slice(1) : [...input.shape];
  const batch = (config.max_batch_size ?? 0) > 0 ? [1] : [];
  let shape: number[];
  if (input.datatype === 'BYTES') {
    if (dims.some((dim) => dim !== 1 && dim !== -1)) {
      throw new TritonError('INVALID_ARG', `raw binary request of BYTES input '${input.name}' needs shape [1]`);
    }
    const wire = Buffer.allocUnsafe(4 + body.byteLength);
    wire.writeUInt32LE(body.byteLength, 0);
    body.copy(wire, 4);
    shape = [...batch, ...dims.map(() => 1)];
    return requestFromParts(undefined, { binary_data_output: true }, { [input.name]: tensorFromBytes(input.name, 'BYTES', shape, wire) }, undefined);
  }
  const variable = dims.filter((dim) => dim === -1).length;
  if (variable > 1) {
    throw new TritonError('INVALID_ARG', `raw binary request of input '${input.name}' has ${variable} variable dimensions; at most 1 can be deduced`);
  }
  const size = DATA_TYPE_INFO[input.datatype].byteSize as number;
  const fixed = dims.reduce((product, dim) => (dim === -1 ? product : product * dim), 1);
  const count = body.byteLength / size;
  if (!Number.isInteger(count) || (variable === 0 ? count !== fixed : count % fixed !== 0)) {
    throw new TritonError('INVALID_ARG', `raw binary request of ${body.byteLength} bytes does not fit input '${input.name}' (${input.datatype} [${dims.join(',')}])`);
  }
  shape = [...batch, ...dims.map((dim) => (dim === -1 ? count / fixed : dim))];
  return requestFromParts(undefined, { binary_data_output: true }, { [input.name]: tensorFromBytes(input.name, input.datatype, shape, body) }, undefined);
}

/** Triton's generate shape: fixed dims divide the count, the innermost -1 takes the rest, other -1 are 1. */
function generateShape(name: string, dims: readonly number[], count: number): number[] {
  const shape = [...dims];
  let rest = count;
  for (const dim of shape) {
    if (dim !== -1) {
      if (rest % dim !== 0) throw new TritonError('INVALID_ARG', `The schema can not convert input '${name}' to tensor with proper shape`);
      rest /= dim;
    }
  }
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] === -1) {
      shape[i] = rest;
      rest = 1;
    }
  }
  if (rest !== 1) throw new TritonError('INVALID_ARG', `The schema can not convert input '${name}' to tensor with proper shape`);
  return shape;
}

/** A generate output: its JSON data, a single element without the array. */
function generateValue(tensor: Tensor): string {
  const values: unknown[] =
    tensor.datatype === 'BYTES'
      ? tensor.strings()
      : tensor.datatype === 'BOOL'
        ? (tensor.toArray() as boolean[])
        : (tensor.toArray() as Array<number | bigint>).map((v) => (typeof v === 'bigint' ? Number(v) : v));
  return JSON.stringify(values.length === 1 ? values[0] : values);
}

