/** Options of `Client.connect` (the zod schema is the source of the types). */
import { z } from 'zod';

const pem = z.union([z.string(), z.custom<Uint8Array>((value) => value instanceof Uint8Array, { message: 'expected PEM text or bytes' })]);

/** TLS settings: PEM text or bytes, as Node's `tls.connect` takes them. */
export const clientTlsSchema = z.strictObject({
  /** CA certificates to trust instead of Node's default ones (a self-signed CA). */
  ca: pem.optional(),
  /** Client certificate and key, for mutual TLS. */
  cert: pem.optional(),
  /** The private key of `cert` (PEM), for mutual TLS. */
  key: pem.optional(),
  /** Name the server's certificate must carry, when it is not the target's host. */
  servername: z.string().optional(),
});

export const clientRetrySchema = z.strictObject({
  /** Tries in all, the first included, of a call that may be repeated. */
  attempts: z.number().int().min(1).max(20).default(3),
  /** Wait before the first retry; doubled after each, up to `maxBackoffMs`. */
  backoffMs: z.number().min(0).default(50),
  /** Longest wait between retries, in ms. Default 2000. */
  maxBackoffMs: z.number().min(0).default(2000),
  /**
   * Also repeat inferences (never a sequence's requests) that failed with
   * UNAVAILABLE or a lost connection. Off by default: the server may have run
   * the request already.
   */
  inference: z.boolean().default(false),
});

/**
 * Options of `Client.connect`, checked by zod (see {@link ClientOptions});
 * unknown fields are refused with `TritonError('INVALID_ARG')`.
 */
export const clientOptionsSchema = z.strictObject({
  /**
   * The protocol of a `dns:///` target (others say theirs in the scheme).
   * Default: gRPC.
   */
  protocol: z.enum(['grpc', 'http']).optional(),
  /** Headers (gRPC metadata) sent with every call, e.g. `{ authorization: 'Bearer …' }`. */
  headers: z.record(z.string(), z.string()).default({}),
  /** TLS: `https://` and `grpcs://` targets use it; giving it turns TLS on for the others. */
  tls: clientTlsSchema.optional(),
  /** How long `connect()` waits for an endpoint to answer, and a connection for its handshake. */
  connectTimeoutMs: z.number().positive().default(10_000),
  /** Default deadline of every call without a `timeoutMs` of its own; none when unset (as Triton's clients). */
  timeoutMs: z.number().positive().optional(),
  /** Largest message sent and received, in bytes (Triton's own default: 64 MiB). */
  maxMessageBytes: z.number().int().positive().default(64 * 1024 * 1024),
  /** Compress request and response bodies (gzip) both ways. */
  compression: z.enum(['none', 'gzip']).default('none'),
  /**
   * Connection keepalive: a ping (gRPC) or TCP keepalive (HTTP) after this
   * much idle time. Default 5 minutes: Triton's gRPC server answers pings more
   * frequent than that (without data) by closing the connection.
   */
  keepAliveMs: z.number().int().positive().default(300_000),
  /**
   * Who makes the calls. `'native'`: the addon, on this thread's event loop
   * (gRPC: HTTP/2 with nghttp2; HTTP: HTTP/1.1 keep-alive connections), with
   * less CPU per call than `'js'`, TLS with Node's own OpenSSL; not yet with
   * compression. `'js'`: `node:http2` (gRPC) or undici (HTTP). `'auto'` (the
   * default): native where the addon loads and the options ask for nothing
   * it lacks (compression; TLS where the runtime exports no OpenSSL), else js.
   * `client.transport` says which it is.
   */
  transport: z.enum(['auto', 'native', 'js']).default('auto'),
  /** HTTP only: connections per endpoint (one request in flight on each). */
  connections: z.number().int().positive().max(65536).default(32),
  /**
   * Retries of calls that failed with a lost connection or UNAVAILABLE, on
   * another endpoint where there is one: by default 3 attempts in all,
   * waiting 50 ms, then twice as long each time up to 2000 ms; inferences
   * only when `inference` says so (or when the request never left).
   */
  retry: clientRetrySchema.default(clientRetrySchema.parse({})),
  /** How often an endpoint that failed is checked (`/v2/health/live`) until it answers again. */
  healthCheckIntervalMs: z.number().int().positive().default(1000),
  /** Where `metrics()` reads Triton's metrics; default: port 8002 of the (first) target's host. */
  metricsUrl: z.url({ protocol: /^https?$/ }).optional(),
  /** HTTP `dns:///` targets: how often the name is resolved again. */
  resolveIntervalMs: z.number().int().positive().default(30_000),
});

/** Options of `Client.connect` as the caller writes them; every field is optional. */
export type ClientOptions = z.input<typeof clientOptionsSchema>;
/** Client options after validation, defaults filled in. */
export type ResolvedClientOptions = z.output<typeof clientOptionsSchema>;
/** The `tls` option of {@link ClientOptions}: PEM text or bytes, as Node's `tls.connect` takes them. */
export type ClientTlsOptions = z.input<typeof clientTlsSchema>;
/** The `retry` option of {@link ClientOptions}: attempts, backoff, and whether inferences are repeated. */
export type ClientRetryOptions = z.input<typeof clientRetrySchema>;

/** Options of one call (every `Client` and remote `Model` method takes them). */
export interface CallOptions {
  /** Deadline of this call, in ms (default: the client's `timeoutMs`). */
  timeoutMs?: number;
  /** Aborting ends the call; it rejects with CANCELLED. */
  signal?: AbortSignal;
  /** Headers (gRPC metadata) for this call, added to the client's. */
  headers?: Record<string, string>;
}
