/**
 * The native HTTP/1.1 engine of serveKServe: the addon listens on a thread of
 * its own and answers plain binary inference requests with Triton's C API,
 * never entering JS (native/http-frontend.cc). Every other request reaches
 * the same `node:http` server and KServe handler as with the `node` engine,
 * through a virtual socket per connection, so both engines answer them alike.
 */
import { lookup } from 'node:dns/promises';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { isIP } from 'node:net';
import { Duplex } from 'node:stream';
import { native, NATIVE_HTTP_EVENT, type NativeHttpEvent, type NativeHttpFrontend } from '../native.js';
import { nativeServerOf, type Server } from '../server.js';
import type { KServeHandler } from './http.js';

/** Node's side of one connection the addon accepted. */
class NativeSocket extends Duplex {
  /** The addon closed it (the client went): nothing to tell it back. */
  #closedNatively = false;
  #timer: NodeJS.Timeout | undefined;
  #timeoutMs = 0;
  readonly remoteAddress = undefined;
  readonly encrypted = false;

  constructor(
    readonly frontend: NativeHttpFrontend,
    readonly connection: number,
  ) {
    super({ allowHalfOpen: true });
  }

  received(bytes: Buffer): void {
    this.#touch();
    this.push(bytes);
  }

  closedNatively(): void {
    this.#closedNatively = true;
    this.destroy();
  }

  override _read(): void {}

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

export interface NativeHttpSettings {
  host: string;
  port: number;
  maxBodyBytes: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /**
   * false: every request goes through the JS handler (an `authorize` hook
   * must see each one; `inferTimeoutMs` is the JS request's timer).
   */
  fastPath: boolean;
}

export interface NativeHttpListener {
  /** The `node:http` server that answers what the addon hands to JS (it does not listen itself). */
  server: HttpServer;
  /** The address and port bound. */
  host: string;
  port: number;
  /** Requests the addon answered itself so far. */
  readonly answeredNatively: number;
  /** Stops listening, closes every connection once its request is answered, and resolves when the addon's thread ended. */
  close(): Promise<void>;
}

export async function listenNative(triton: Server, handler: KServeHandler, settings: NativeHttpSettings): Promise<NativeHttpListener> {
  const host = isIP(settings.host) !== 0 ? settings.host : (await lookup(settings.host)).address;
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
      socket = new NativeSocket(frontend, connection);
      sockets.set(connection, socket);
      socket.once('close', () => sockets.delete(connection));
      server.emit('connection', socket);
    }
    socket.received(bytes as Buffer);
  };
  const frontend = new native.NativeHttpFrontend(
    nativeServerOf(triton),
    {
      host,
      port: settings.port,
      maxBodyBytes: settings.maxBodyBytes,
      keepAliveTimeoutMs: settings.keepAliveTimeoutMs,
      headersTimeoutMs: settings.headersTimeoutMs,
      requestTimeoutMs: settings.requestTimeoutMs,
      fastPath: settings.fastPath,
    },
    onEvent,
  );
  return {
    server,
    host: frontend.address,
    port: frontend.port,
    get answeredNatively() {
      return frontend.answered;
    },
    close: async () => {
      frontend.drain();
      await handler.drain();
      frontend.close();
      server.closeAllConnections();
      await ended;
    },
  };
}
