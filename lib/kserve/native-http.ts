/**
 * The native engines of serveKServe: the addon listens on a thread of its
 * own and answers plain binary inference requests with Triton's C API,
 * never entering JS (native/kserve/http-frontend.cc). Every other request reaches
 * the same JS server and handler as with the `node` engine, through a
 * virtual socket per connection, so both engines answer them alike: for
 * HTTP/1.1 the connection's bytes from where the addon stopped reading, for
 * gRPC an HTTP/2 connection of the addon's own that carries the calls it
 * passes on.
 */
import { lookup } from 'node:dns/promises';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { isIP } from 'node:net';
import { Duplex } from 'node:stream';
import { native, NATIVE_HTTP_EVENT, type NativeHttpEvent, type NativeHttpFrontend, type NativeServerTls } from '../native.js';
import { nativeServerOf, type Server } from '../server.js';
import type { KServeHandler } from './http.js';

/** JS tells the addon how much it has read once this much more was read (it reads on while less than 1 MiB is unread). */
const READ_REPORT_BYTES = 256 * 1024;

/** Node's side of one connection the addon accepted. */
export class NativeSocket extends Duplex {
  #received = 0;
  #reported = 0;
  /** The addon closed it (the client went): nothing to tell it back. */
  #closedNatively = false;
  #timer: NodeJS.Timeout | undefined;
  #timeoutMs = 0;
  readonly remoteAddress = undefined;

  constructor(
    readonly frontend: NativeHttpFrontend,
    readonly connection: number,
    /** The addon opened its TLS (JS sees plaintext). */
    readonly encrypted: boolean,
  ) {
    super({ allowHalfOpen: true });
  }

  received(bytes: Buffer): void {
    this.#touch();
    this.#received += bytes.byteLength;
    this.push(bytes);
  }

  closedNatively(): void {
    this.#closedNatively = true;
    this.destroy();
  }

  // Node's parser wants more: the addon, which stops reading a connection whose bytes JS has not read, may go on.
  override _read(): void {
    if (this.#received - this.#reported < READ_REPORT_BYTES) return;
    this.#reported = this.#received;
    if (!this.#closedNatively) this.frontend.read(this.connection, this.#received);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#touch();
    this.frontend.write(this.connection, chunk);
    callback();
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (!this.#closedNatively) this.frontend.end(this.connection);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    clearTimeout(this.#timer);
    if (!this.#closedNatively) this.frontend.destroy(this.connection);
    callback(error);
  }

  // What node:http calls on its sockets: the keep-alive timeout, Nagle (off natively).
  setTimeout(ms: number, callback?: () => void): this {
    this.#timeoutMs = ms;
    if (callback !== undefined) this.once('timeout', callback);
    this.#touch();
    return this;
  }

  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  #touch(): void {
    clearTimeout(this.#timer);
    this.#timer = this.#timeoutMs > 0 ? setTimeout(() => this.emit('timeout'), this.#timeoutMs).unref() : undefined;
  }
}

export interface NativeListenerSettings {
  protocol: 'http' | 'grpc';
  host: string;
  port: number;
  /** The largest request body (HTTP) or message (gRPC) the addon reads itself. */
  maxBodyBytes: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /**
   * false: every request goes through the JS handler (an `authorize` hook
   * must see each one; `inferTimeoutMs` is the JS request's timer).
   */
  fastPath: boolean;
  /** gRPC: what one connection may take (lib/kserve/options.ts). */
  maxConcurrentStreams?: number;
  maxHeaderListBytes?: number;
  maxConnectionBytes?: number;
  /** Serve TLS: the addon does the handshake and hands JS plaintext. */
  tls?: NativeServerTls | undefined;
  /** gRPC: answers compressed for clients that accept it, as the JS server's `responseCompression`. */
  responseCompression?: 'none' | 'gzip' | 'deflate';
}

export interface NativeListener {
  /** The address and port bound. */
  host: string;
  port: number;
  /** Requests the addon answered itself so far. */
  readonly answeredNatively: number;
  /** New inference requests go to JS from now on (which refuses them while it closes). */
  drain(): void;
  /** Stops listening, closes every connection once its requests are answered, and resolves when the addon's thread ended. */
  close(): Promise<void>;
}

/** What the native engines can do here: gRPC (the addon found the nghttp2 Node exports), TLS (its OpenSSL). */
export function nativeEngineHere(protocol: 'http' | 'grpc'): { engine: boolean; tls: boolean } {
  return { engine: protocol === 'http' || native.nativeGrpc === true, tls: native.nativeTls === true };
}

/** Starts the addon's listener; `onConnection` gets the virtual socket of each connection it hands to JS. */
export async function openNativeListener(
  triton: Server,
  settings: NativeListenerSettings,
  onConnection: (socket: NativeSocket) => void,
): Promise<NativeListener> {
  const host = isIP(settings.host) !== 0 ? settings.host : (await lookup(settings.host)).address;
  const sockets = new Map<number, NativeSocket>();
  let closed: () => void = () => {};
  const ended = new Promise<void>((resolve) => {
    closed = resolve;
  });
  const onEvent = (kind: NativeHttpEvent, connection: number, bytes: Buffer | undefined): void => {
    if (kind === NATIVE_HTTP_EVENT.closed) {
      frontend.join();
      closed();
      return;
    }
    let socket = sockets.get(connection);
    if (kind === NATIVE_HTTP_EVENT.close) {
      sockets.delete(connection);
      socket?.closedNatively();
      return;
    }
    if (socket === undefined) {
      socket = new NativeSocket(frontend, connection, settings.tls !== undefined);
      sockets.set(connection, socket);
      socket.once('close', () => sockets.delete(connection));
      onConnection(socket);
    }
    socket.received(bytes as Buffer);
  };
  const frontend = new native.NativeHttpFrontend(
    nativeServerOf(triton),
    {
      protocol: settings.protocol,
      host,
      port: settings.port,
      maxBodyBytes: settings.maxBodyBytes,
      keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
      headersTimeoutMs: settings.headersTimeoutMs,
      requestTimeoutMs: settings.requestTimeoutMs,
      fastPath: settings.fastPath,
      ...(settings.maxConcurrentStreams === undefined ? {} : { maxConcurrentStreams: settings.maxConcurrentStreams }),
      ...(settings.maxHeaderListBytes === undefined ? {} : { maxHeaderListBytes: settings.maxHeaderListBytes }),
      ...(settings.maxConnectionBytes === undefined ? {} : { maxConnectionBytes: settings.maxConnectionBytes }),
      ...(settings.tls === undefined ? {} : { tls: settings.tls }),
      ...(settings.responseCompression === undefined ? {} : { responseCompression: settings.responseCompression }),
    },
    onEvent,
  );
  return {
    host: frontend.address,
    port: frontend.port,
    get answeredNatively() {
      return frontend.answered;
    },
    drain: () => frontend.drain(),
    close: async () => {
      frontend.close();
      await ended;
    },
  };
}

export interface NativeHttpListener {
  /** The `node:http` server that answers what the addon hands to JS (it does not listen itself). */
  server: HttpServer;
  host: string;
  port: number;
  readonly answeredNatively: number;
  close(): Promise<void>;
}

/** The native HTTP/1.1 engine: the addon's listener, and a `node:http` server for what it hands on. */
export async function listenNative(
  triton: Server,
  handler: KServeHandler,
  settings: Omit<NativeListenerSettings, 'protocol'>,
): Promise<NativeHttpListener> {
  const server = createHttpServer(
    {
      headersTimeout: settings.headersTimeoutMs,
      requestTimeout: settings.requestTimeoutMs,
      keepAliveTimeout: settings.keepAliveTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, settings.headersTimeoutMs),
    },
    (req, res) => {
      const socket = req.socket as unknown as NativeSocket;
      // The addon reads the connection's next request once this one is answered.
      res.once('close', () => socket.frontend.done(socket.connection));
      handler(req, res);
    },
  );
  const listener = await openNativeListener(triton, { ...settings, protocol: 'http' }, (socket) => server.emit('connection', socket));
  return {
    server,
    host: listener.host,
    port: listener.port,
    get answeredNatively() {
      return listener.answeredNatively;
    },
    close: async () => {
      listener.drain();
      await handler.drain();
      const closed = listener.close();
      server.closeAllConnections();
      await closed;
    },
  };
}
