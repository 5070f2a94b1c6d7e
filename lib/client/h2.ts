/**
 * gRPC calls over one `node:http2` session: the framing (5-byte message
 * prefix), status from trailers, deadlines (`grpc-timeout`), cancellation
 * (RST_STREAM), gzip message compression, keepalive pings and reconnection.
 * Measured against Triton's own server, @grpc/grpc-js spent about three times
 * the CPU of this per small call (its call stack, filters and metadata
 * objects), which on a shared machine is most of the client's throughput.
 */
import { Buffer } from 'node:buffer';
import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { Deframer, formatGrpcTimeout, frame, framePrefixed, percentDecode, STATUS } from '../kserve/grpc-framing.js';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

export { STATUS };

/** How a call ended: the server's status, or a failure of the connection (`connection` set). */
export interface CallEnd {
  code: number;
  message: string;
  /** The connection failed; `sent` says whether the request may have reached the server. */
  connection?: { sent: boolean; cause: unknown };
}

export interface ConnectionOptions {
  /** `http://host:port` or `https://host:port`. */
  origin: string;
  tls: { ca?: string | Uint8Array; cert?: string | Uint8Array; key?: string | Uint8Array; servername?: string } | undefined;
  connectTimeoutMs: number;
  keepAliveMs: number;
  maxMessageBytes: number;
  compress: boolean;
}

export interface CallHandlers {
  /** One response message (decompressed). */
  message(bytes: Buffer): void;
  /** The call is over (called once). */
  end(result: CallEnd): void;
}

export interface OpenCall {
  /**
   * Sends a message; `last` half-closes the request side. With `framed`, the
   * message's first 5 bytes are free for the gRPC header (written in place).
   */
  send(message: Buffer, last: boolean, framed?: boolean): void;
  /** Half-closes the request side. */
  finish(): void;
  /** Cancels the call (the server sees RST_STREAM CANCEL). */
  cancel(): void;
}

/**
 * What the gRPC transport (grpc.ts) needs of a connection: this file's over
 * `node:http2`, or the addon's (native-grpc.ts).
 */
export interface GrpcChannel {
  /** Starts a call of `path`; `deadline` (Date.now() based) goes as `grpc-timeout`. */
  start(path: string, metadata: Record<string, string>, deadline: number | undefined, handlers: CallHandlers): OpenCall;
  /** One unary call: resolves with the response message, or rejects with `{ grpc: CallEnd }`. */
  unary(path: string, message: Buffer, metadata: Record<string, string>, deadline: number | undefined, signal: AbortSignal | undefined, framed?: boolean): Promise<Buffer>;
  close(): void;
}

/** Settles a unary call's promise from how the call ended. */
export function settleUnary(result: CallEnd, response: Buffer | undefined, resolve: (bytes: Buffer) => void, reject: (error: unknown) => void): void {
  if (result.code === STATUS.OK && response !== undefined) resolve(response);
  else if (result.code === STATUS.OK) reject(Object.assign(new Error('the server answered without a message'), { grpc: { code: STATUS.INTERNAL, message: 'no response message' } }));
  else reject(Object.assign(new Error(result.message), { grpc: result }));
}

const PING_TIMEOUT_MS = 20_000;
const STREAM_WINDOW_BYTES = 16 * 1024 * 1024;
const CONNECTION_WINDOW_BYTES = 64 * 1024 * 1024;
const MAX_FRAME_BYTES = 1024 * 1024;

export class GrpcConnection implements GrpcChannel {
  readonly #options: ConnectionOptions;
  #session: ClientHttp2Session | undefined;
  #connected = false;
  #active = 0;
  #ping: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: ConnectionOptions) {
    this.#options = options;
  }

  /** The session, connecting anew after the last one closed. */
  #open(): ClientHttp2Session {
    const existing = this.#session;
    if (existing !== undefined && !existing.closed && !existing.destroyed) return existing;
    const { origin, tls, connectTimeoutMs } = this.#options;
    // HTTP/2's default flow-control windows (64 KiB per stream and per connection) hold 16
    // concurrent 64 KiB responses to one window's worth per round trip: open them wide.
    const settings: http2.SecureClientSessionOptions = {
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW_BYTES, maxFrameSize: MAX_FRAME_BYTES },
    };
    if (tls !== undefined) {
      if (tls.ca !== undefined) settings.ca = tls.ca as string | Buffer;
      if (tls.cert !== undefined) settings.cert = tls.cert as string | Buffer;
      if (tls.key !== undefined) settings.key = tls.key as string | Buffer;
      if (tls.servername !== undefined) settings.servername = tls.servername;
    }
    const session = http2.connect(origin, settings);
    this.#session = session;
    this.#connected = false;
    const timer = setTimeout(() => {
      if (!this.#connected) session.destroy(Object.assign(new Error(`no connection within ${connectTimeoutMs} ms`), { code: 'ETIMEDOUT' }));
    }, connectTimeoutMs);
    timer.unref();
    session.once('connect', () => {
      clearTimeout(timer);
      this.#connected = true;
      session.setLocalWindowSize(CONNECTION_WINDOW_BYTES);
      this.#startPings(session);
    });
    // Errors reach the streams; the session is dropped and the next call connects again.
    session.on('error', () => undefined);
    session.once('close', () => {
      clearTimeout(timer);
      if (this.#session === session) this.#session = undefined;
      this.#stopPings();
    });
    session.once('goaway', () => {
      if (this.#session === session) this.#session = undefined;
    });
    if (this.#active === 0) session.unref();
    return session;
  }

  #startPings(session: ClientHttp2Session): void {
    this.#stopPings();
    const every = this.#options.keepAliveMs;
    this.#ping = setInterval(() => {
      if (this.#active === 0) return;
      const timeout = setTimeout(() => session.destroy(new Error('keepalive ping unanswered')), PING_TIMEOUT_MS).unref();
      const sent = session.ping((error) => {
        clearTimeout(timeout);
        if (error !== null) session.destroy(error);
      });
      if (!sent) clearTimeout(timeout);
    }, every);
    this.#ping.unref();
  }

  #stopPings(): void {
    if (this.#ping !== undefined) clearInterval(this.#ping);
    this.#ping = undefined;
  }

  /**
   * Starts a call of `path`. `deadline` (Date.now() based) is sent as
   * `grpc-timeout`; the caller's own timer cancels the call when it passes.
   * One function of about 130 lines on purpose: the call's state (its status,
   * encoding, delivery chain, whether it ended) is shared by the six stream
   * events and the three methods returned, as closure variables, which is
   * also what keeps a call to a handful of allocations on this hot path.
   */
  start(path: string, metadata: Record<string, string>, deadline: number | undefined, handlers: CallHandlers): OpenCall {
    let ended = false;
    const end = (result: CallEnd): void => {
      if (ended) return;
      ended = true;
      this.#active--;
      if (this.#active === 0) this.#session?.unref();
      handlers.end(result);
    };
    if (this.#closed) {
      this.#active++;
      end({ code: STATUS.UNAVAILABLE, message: 'the connection is closed', connection: { sent: false, cause: undefined } });
      return { send() {}, finish() {}, cancel() {} };
    }
    const session = this.#open();
    const connectedAtStart = this.#connected;
    this.#active++;
    session.ref();
    const headers: http2.OutgoingHttpHeaders = {
      ...metadata,
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-accept-encoding': 'identity,gzip',
      'user-agent': 'tritonserver-node',
    };
    if (this.#options.compress) headers['grpc-encoding'] = 'gzip';
    if (deadline !== undefined) headers['grpc-timeout'] = formatGrpcTimeout(deadline - Date.now());
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(headers);
    } catch (error) {
      // Refused by Node before anything was sent (a header it will not send): not the endpoint's fault.
      end({ code: STATUS.INTERNAL, message: `could not start the call: ${(error as Error).message}` });
      return { send() {}, finish() {}, cancel() {} };
    }
    let status: CallEnd | undefined;
    let encoding = 'identity';
    let cancelled = false;
    let failure: unknown;
    /** Messages are delivered in order, decompressed ones included. */
    let delivery: Promise<void> = Promise.resolve();
    const deframer = new Deframer(this.#options.maxMessageBytes, (bytes, compressed) => {
      if (!compressed) {
        delivery = delivery.then(() => {
          if (!ended) handlers.message(bytes);
        });
        return;
      }
      delivery = delivery
        .then(async () => {
          if (encoding !== 'gzip') throw new Error(`a compressed message with grpc-encoding '${encoding}'`);
          const plain = await gunzipAsync(bytes);
          if (!ended) handlers.message(plain);
        })
        // Ends the call at once, whether or not the server goes on sending.
        .catch((error: unknown) => {
          end({ code: STATUS.INTERNAL, message: `could not read a compressed message: ${(error as Error).message}` });
          if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
        });
    });
    const statusOf = (h: IncomingHttpHeaders): CallEnd | undefined => {
      const code = h['grpc-status'];
      if (code === undefined) return undefined;
      const message = h['grpc-message'];
      return { code: Number(code), message: typeof message === 'string' ? percentDecode(message) : '' };
    };
    stream.on('response', (h) => {
      const httpStatus = Number(h[':status']);
      const encodingHeader = h['grpc-encoding'];
      if (typeof encodingHeader === 'string') encoding = encodingHeader;
      status = statusOf(h);
      if (status === undefined && httpStatus !== 200) {
        status = { code: httpStatus === 503 || httpStatus === 502 || httpStatus === 504 ? STATUS.UNAVAILABLE : STATUS.UNKNOWN, message: `HTTP ${httpStatus} from a gRPC endpoint` };
      }
    });
    stream.on('data', (chunk: Buffer) => {
      const fault = ended ? undefined : deframer.push(chunk);
      if (fault === undefined) return;
      status =
        'tooLarge' in fault
          ? { code: STATUS.RESOURCE_EXHAUSTED, message: `a response message is larger than maxMessageBytes (${this.#options.maxMessageBytes})` }
          : { code: STATUS.INTERNAL, message: `a response message's compressed flag is ${fault.badFlag}: only 0 and 1 are defined` };
      stream.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.on('trailers', (h) => {
      status ??= statusOf(h);
      // The status ends the call: settle now rather than at the stream's 'close', ticks later.
      const settled = status;
      if (settled !== undefined) void delivery.then(() => end(settled));
    });
    stream.on('error', (error: unknown) => {
      failure ??= error;
    });
    stream.on('close', () => {
      void delivery.then(() => {
        if (status !== undefined) end(status);
        else if (cancelled) end({ code: STATUS.CANCELLED, message: 'cancelled by the client' });
        else {
          const cause = failure ?? new Error(`the stream closed without a status (RST_STREAM ${stream.rstCode})`);
          const code = (cause as { code?: string }).code;
          const sent = connectedAtStart || !(code === 'ECONNREFUSED' || code === 'ETIMEDOUT' || code === 'ENOTFOUND' || code === 'EHOSTUNREACH');
          end({ code: STATUS.UNAVAILABLE, message: (cause as Error).message ?? String(cause), connection: { sent, cause } });
        }
      });
    });
    const compress = this.#options.compress;
    return {
      send: (message, last, framed = false) => {
        if (ended) return;
        if (!compress) {
          const out = framed ? framePrefixed(message) : frame(message, false);
          if (last) stream.end(out);
          else stream.write(out);
          return;
        }
        gzipAsync(framed ? message.subarray(5) : message).then(
          (zipped) => {
            if (ended || stream.closed) return;
            if (last) stream.end(frame(zipped, true));
            else stream.write(frame(zipped, true));
          },
          (error: unknown) => stream.destroy(error as Error),
        );
      },
      finish: () => {
        if (!ended && !stream.closed) stream.end();
      },
      cancel: () => {
        if (ended || stream.closed) return;
        cancelled = true;
        stream.close(http2.constants.NGHTTP2_CANCEL);
      },
    };
  }

  unary(path: string, message: Buffer, metadata: Record<string, string>, deadline: number | undefined, signal: AbortSignal | undefined, framed = false): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      let response: Buffer | undefined;
      const onAbort = (): void => call.cancel();
      const call = this.start(path, metadata, deadline, {
        message: (bytes) => {
          response = bytes;
        },
        end: (result) => {
          signal?.removeEventListener('abort', onAbort);
          settleUnary(result, response, resolve, reject);
        },
      });
      if (signal !== undefined) {
        if (signal.aborted) call.cancel();
        else signal.addEventListener('abort', onAbort, { once: true });
      }
      call.send(message, true, framed);
    });
  }

  close(): void {
    this.#closed = true;
    this.#stopPings();
    this.#session?.close();
    this.#session = undefined;
  }
}
