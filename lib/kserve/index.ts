/**
 * `tritonserver-node/kserve`: Triton's standard protocol (KServe v2 HTTP/REST
 * and gRPC, plus the metrics port) in front of an in-process server.
 * gRPC (node:http2) loads @grpc/proto-loader only when asked for.
 */
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions as HttpsServerOptions } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Server } from '../server.js';
import { kserveHandler, type KServeHandler } from './http.js';
import { startGrpc, type GrpcFrontend } from './grpc.js';
import { listenNative, nativeEngineHere } from './native-http.js';
import { engineFor } from './native-tls.js';
import { serveKServeOptionsSchema, type ServeKServeOptions } from './options.js';
import { parseOptions } from './shared.js';

export { kserveHandler, httpStatus, type KServeHandler, type KServeHandlerOptions } from './http.js';
export { grpcStatus, type GrpcFrontend } from './grpc.js';
export { kserveFastifyPlugin, type FastifyInstanceLike } from './fastify.js';
export {
  kserveProtocolOptionsSchema,
  serveKServeOptionsSchema,
  type KServeProtocolOptions,
  type ServeKServeOptions,
  type Authorize,
  type AuthorizeRequest,
} from './options.js';

/** Prometheus text exposition format, as Triton's metrics port sends it. */
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** A running HTTP listener of {@link serveKServe} (the HTTP/REST or the metrics one). */
export interface HttpFrontend {
  /** The `node:http` server underneath (`node:https` for the `node` engine with `tls`; the native engine opens TLS itself). */
  server: HttpServer;
  /** The interface it is bound to (the `host` option, default `127.0.0.1`). */
  host: string;
  /** The port bound (useful with port 0). */
  port: number;
}

/** What {@link serveKServe} started: each listener asked for, undefined for the others. */
export interface KServeFrontends {
  /** The HTTP/REST listener, when `http` was given. */
  http: (HttpFrontend & {
    /** The request handler it serves with (see {@link kserveHandler}). */
    handler: KServeHandler;
    /**
     * Who reads the connections (the `engine` option). With `native`,
     * `server` is the `node:http` server that answers what the addon hands to
     * JS: it does not listen itself.
     */
    engine: 'node' | 'native';
    /** Requests the native engine answered without JS so far (0 with `node`). */
    readonly answeredNatively: number;
  }) | undefined;
  /** The gRPC listener, when `grpc` was given. */
  grpc: GrpcFrontend | undefined;
  /** The `/metrics` listener, when `metrics` was given. */
  metrics: HttpFrontend | undefined;
  /** Stops accepting, lets requests in flight finish, then closes every listener. */
  close(): Promise<void>;
}

function listen(server: HttpServer, port: number, host: string): Promise<HttpFrontend> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve({ server, host, port: (server.address() as AddressInfo).port });
    });
  });
}

function closeHttp(server: HttpServer): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

/** `/metrics` with `server.metrics()`; every other path is 404. */
function metricsListener(triton: Server): HttpServer {
  return createHttpServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not Found\n');
      return;
    }
    triton.metrics().then(
      (text) => {
        res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(text) });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => {
        res.writeHead(503, { 'Content-Type': 'text/plain' }).end(`${(error as Error).message}\n`);
      },
    );
  });
}

/**
 * Serves the KServe v2 protocol for `server`: `http` (8000 by convention),
 * `grpc` (8001), `metrics` (8002); each part optional, each bound to
 * 127.0.0.1 unless `host` says otherwise.
 */
export async function serveKServe(server: Server, options: ServeKServeOptions): Promise<KServeFrontends> {
  const { http, grpc, metrics, ...protocol } = parseOptions(serveKServeOptionsSchema, options, 'serveKServe options');
  const started: Array<() => Promise<void>> = [];
  const frontends: KServeFrontends = {
    http: undefined,
    grpc: undefined,
    metrics: undefined,
    close: async () => {
      await Promise.all(started.splice(0).map((stop) => stop()));
    },
  };
  try {
    const chosen = http === undefined ? undefined : engineFor(http.engine, http.tls, nativeEngineHere('http'));
    if (http !== undefined && chosen?.engine === 'native') {
      const handler = kserveHandler(server, protocol);
      const listener = await listenNative(server, handler, {
        ...http,
        tls: chosen.tls,
        maxBodyBytes: protocol.maxBodyBytes,
        // What the JS handler must see or time itself goes to it.
        fastPath: protocol.authorize === undefined && protocol.inferTimeoutMs === undefined,
      });
      frontends.http = {
        server: listener.server,
        host: listener.host,
        port: listener.port,
        handler,
        engine: 'native',
        get answeredNatively() {
          return listener.answeredNatively;
        },
      };
      started.push(() => listener.close());
    } else if (http !== undefined) {
      const handler = kserveHandler(server, protocol);
      const timeouts = {
        headersTimeout: http.headersTimeoutMs,
        requestTimeout: http.requestTimeoutMs,
        keepAliveTimeout: http.keepAliveTimeoutMs,
        // How often Node looks for requests past those timeouts (its default, 30 s, is too lax).
        connectionsCheckingInterval: Math.min(1000, http.headersTimeoutMs),
      };
      const listener = http.tls !== undefined
        ? createHttpsServer({ ...(http.tls as HttpsServerOptions), ...timeouts }, (req, res) => handler(req, res))
        : createHttpServer(timeouts, (req, res) => handler(req, res));
      const bound = await listen(listener, http.port, http.host);
      frontends.http = { ...bound, handler, engine: 'node', answeredNatively: 0 };
      started.push(async () => {
        const closed = closeHttp(listener);
        await handler.drain();
        listener.closeAllConnections();
        await closed;
      });
    }
    if (grpc !== undefined) {
      const frontend = await startGrpc(server, protocol, grpc);
      frontends.grpc = frontend;
      started.push(() => frontend.close());
    }
    if (metrics !== undefined) {
      const listener = metricsListener(server);
      frontends.metrics = await listen(listener, metrics.port, metrics.host);
      started.push(async () => {
        await closeHttp(listener);
      });
    }
  } catch (error) {
    await frontends.close();
    throw error;
  }
  return frontends;
}
