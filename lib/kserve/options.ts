/** Options of the KServe front ends (zod schemas are the source of the types). */
import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';

/** What `authorize` sees of a request, the same for HTTP and gRPC. */
export interface AuthorizeRequest {
  /** Which front end the request came in on. */
  protocol: 'http' | 'grpc';
  /** HTTP method, or the gRPC method name (e.g. `ModelInfer`). */
  method: string;
  /** HTTP path, or the gRPC path (`/inference.GRPCInferenceService/ModelInfer`). */
  path: string;
  /** HTTP headers, or gRPC metadata (lower-case keys). */
  headers: IncomingHttpHeaders;
}

/** Return false (or throw) to refuse: HTTP 403 / gRPC PERMISSION_DENIED. */
export type Authorize = (request: AuthorizeRequest) => boolean | Promise<boolean>;

const authorizeSchema = z.custom<Authorize>((value) => typeof value === 'function', {
  message: 'authorize must be a function',
});

/** Options of the protocol itself, shared by `kserveHandler` and both listeners. */
export const kserveProtocolOptionsSchema = z.strictObject({
  /** Largest request body accepted, in bytes (Triton's HTTP default: 64 MiB). */
  maxBodyBytes: z.number().int().positive().default(64 * 1024 * 1024),
  /**
   * Upper bound for each inference, in ms: becomes the request's `timeoutMs`
   * (a client's own `timeout` parameter may only shorten it).
   */
  inferTimeoutMs: z.number().positive().optional(),
  /** Asked before every route; false → 403 / PERMISSION_DENIED. */
  authorize: authorizeSchema.optional(),
  /**
   * Serve the repository routes (index, load, unload). Off by default: they
   * answer 403. Load/unload then still need `modelControlMode: 'explicit'`.
   */
  repositoryControl: z.boolean().default(false),
  /** CORS for browsers: off by default; `{ origin: '*' }` or a list of origins. */
  cors: z
    .union([
      z.literal(false),
      z.strictObject({
        /**
         * The origins allowed: `'*'` for any, one origin
         * (`'https://app.example'`), or a list of them.
         */
        origin: z.union([z.string(), z.array(z.string())]),
      }),
    ])
    .default(false),
});

/**
 * Options of the protocol itself (body limit, inference timeout,
 * `authorize`, repository control, CORS), as the caller writes them; shared by
 * {@link kserveHandler} and {@link serveKServe}'s listeners.
 */
export type KServeProtocolOptions = z.input<typeof kserveProtocolOptionsSchema>;
export type ResolvedProtocolOptions = z.output<typeof kserveProtocolOptionsSchema>;

const listenSchema = {
  /** The TCP port to listen on; 0 picks a free one (read it back from the front end's `port`). */
  port: z.number().int().min(0).max(65535),
  /** Interface to bind; loopback unless told otherwise. */
  host: z.string().default('127.0.0.1'),
};

/** The HTTP/REST listener. `tls` takes Node's own `https.createServer` options. */
export const kserveHttpListenSchema = z.strictObject({
  ...listenSchema,
  /** Node's `https.createServer` options (key, cert, ca, requestCert...): serve HTTPS. Default: plain HTTP. */
  tls: z.record(z.string(), z.unknown()).optional(),
  /** Time allowed to receive the request headers (slow-loris guard). */
  headersTimeoutMs: z.number().int().positive().default(10_000),
  /** Time allowed to receive a whole request. */
  requestTimeoutMs: z.number().int().positive().default(60_000),
  /** How long an idle keep-alive connection is kept open for its next request, in ms (Node's `keepAliveTimeout`). Default 5000. */
  keepAliveTimeoutMs: z.number().int().positive().default(5_000),
  /**
   * Who reads the connections: `native` (the addon, on a thread of its own,
   * answers plain binary-tensor inference requests with Triton's C API and
   * hands every other request to the JS handler) or `node` (Node's
   * `node:http`/`node:https` server, every request through the JS handler).
   * Default: `native`, or `node` where `tls` has options the native
   * engine's TLS lacks (it takes key, cert, ca, passphrase, requestCert,
   * rejectUnauthorized). Both answer every route alike; see docs/kserve.md.
   */
  engine: z.enum(['node', 'native']).optional(),
});

/**
 * The gRPC listener. TLS: `tls` takes Node's own `http2.createSecureServer`
 * options (key, cert, ca, requestCert...); a `ServerCredentials` of
 * @grpc/grpc-js as `credentials` is taken too. Neither: plaintext.
 */
export const kserveGrpcListenSchema = z.strictObject({
  ...listenSchema,
  /** Node's `http2.createSecureServer` options (key, cert, ca, requestCert...): serve gRPC over TLS. */
  tls: z.record(z.string(), z.unknown()).optional(),
  /** A `ServerCredentials` of @grpc/grpc-js, taken in place of `tls`. */
  credentials: z.unknown().optional(),
  /**
   * Compress response messages with this algorithm when the client accepts it
   * (its `grpc-accept-encoding`), as Triton's `--grpc-infer-response-compression-level`
   * does. Compressed requests are always taken (gzip, deflate).
   */
  responseCompression: z.enum(['none', 'gzip', 'deflate']).default('none'),
  /** Largest message received, in bytes (default: `maxBodyBytes`). */
  maxReceiveMessageBytes: z.number().int().positive().optional(),
  /**
   * Calls one connection may have open at once (HTTP/2
   * SETTINGS_MAX_CONCURRENT_STREAMS); more are refused (REFUSED_STREAM) and
   * clients queue them. Default 1000. Triton's gRPC server sets none;
   * see docs/security.md.
   */
  maxConcurrentStreams: z.number().int().min(1).max(2 ** 31 - 1).default(1000),
  /**
   * Largest header list (metadata) of a call, in bytes as HTTP/2 counts it
   * (name + value + 32 per header; SETTINGS_MAX_HEADER_LIST_SIZE); a larger
   * one resets the call (ENHANCE_YOUR_CALM). Default 16 KiB, gRPC's own hard limit.
   */
  maxHeaderListBytes: z.number().int().min(1024).max(2 ** 31 - 1).default(16 * 1024),
  /**
   * Bytes one connection may hold at once, both ways: calls being read,
   * answers its client has not read (its flow-control window closed). Past
   * it, new calls are refused (ENHANCE_YOUR_CALM) until it reads.
   * Default: 4 largest messages, at least 64 MiB.
   */
  maxConnectionBytes: z.number().int().positive().optional(),
  /**
   * Who reads the connections: `native` (the addon, on a thread of its own,
   * speaks HTTP/2 with nghttp2, answers plain ModelInfer calls (raw tensors)
   * with Triton's C API and passes every other call on to the JS server) or
   * `node` (`node:http2`, every call through JS). Default: `native` where
   * the addon has it, unless `tls` (or `credentials`) has options the native
   * engine's TLS lacks (it takes key, cert, ca, passphrase, requestCert,
   * rejectUnauthorized). Both answer every method alike; see docs/kserve.md.
   */
  engine: z.enum(['node', 'native']).optional(),
});

export const kserveMetricsListenSchema = z.strictObject(listenSchema);

/**
 * Options of {@link serveKServe}: the protocol options, and the listeners to
 * start (each optional; those left out are not started).
 */
export const serveKServeOptionsSchema = kserveProtocolOptionsSchema.extend({
  /** The KServe v2 HTTP/REST listener (Triton's port 8000 by convention). */
  http: kserveHttpListenSchema.optional(),
  /** The KServe v2 gRPC listener (Triton's port 8001 by convention). */
  grpc: kserveGrpcListenSchema.optional(),
  /** The Prometheus `/metrics` listener (Triton's port 8002 by convention); it answers 503 while the server's metrics are unavailable. */
  metrics: kserveMetricsListenSchema.optional(),
});

/** Options of {@link serveKServe} as the caller writes them (see {@link serveKServeOptionsSchema}). */
export type ServeKServeOptions = z.input<typeof serveKServeOptionsSchema>;
