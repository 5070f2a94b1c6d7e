/**
 * gRPC calls made by the addon (native/client/grpc-channel.cc): HTTP/2 with
 * nghttp2 on this thread's own event loop, so a call is one function call
 * into the addon and its answer one batch of events back: no `node:http2`
 * stream, header objects or framing in JS. The same `GrpcChannel` as
 * h2.ts's: everything above (codecs, deadlines, retries, the pool) is shared.
 * TLS is the addon's too (Node's OpenSSL, native-tls.ts); not yet here:
 * compressed messages (`transport: 'auto'` uses h2.ts for those).
 */
import type { Buffer } from 'node:buffer';
import { addonExport } from '../addon-file.js';
import { formatGrpcTimeout, percentDecode, STATUS } from '../kserve/grpc-framing.js';
import type { NativeChannelEvents, NativeGrpcChannel, NativeGrpcChannelClass } from '../native.js';
import { settleUnary, type CallEnd, type CallHandlers, type GrpcChannel, type OpenCall } from './h2.js';
import { tlsSettingsError } from './native-tls.js';

const EVENT_MESSAGE = 0;
const FAULT_NONE = 0;
const FAULT_SENT = 1;

/** The addon's channel class, or why there is none here (the addon does not load, or was built without nghttp2). */
export function nativeGrpcChannelClass(): NativeGrpcChannelClass | string {
  return addonExport<NativeGrpcChannelClass>('GrpcChannel', 'the addon was built without nghttp2');
}

export interface NativeConnectionOptions {
  host: string;
  port: number;
  connectTimeoutMs: number;
  keepAliveMs: number;
  maxMessageBytes: number;
  /** gzip request messages (compressed answers are read either way). */
  compress: boolean;
  /** TLS settings (nativeTlsSettings); undefined: plain TCP. */
  tls?: [string, string, string, string];
}

/** A handler that throws is the caller's bug: it surfaces as uncaught, after the batch's other events. */
function uncaught(error: unknown): void {
  queueMicrotask(() => {
    throw error;
  });
}

const ENDED: OpenCall = { send() {}, finish() {}, cancel() {} };

export class NativeGrpcConnection implements GrpcChannel {
  readonly #channel: NativeGrpcChannel;
  /** The calls in flight, by the channel's id. */
  readonly #calls = new Map<number, CallHandlers>();
  #closed = false;
  /** The last metadata object seen and its flat form: the transport passes the same object to every call without headers of its own. */
  #metadata: Record<string, string> | undefined;
  #flat: string[] = [];

  constructor(channel: NativeGrpcChannelClass, options: NativeConnectionOptions) {
    const { host, port } = options;
    const authority = `${host.includes(':') ? `[${host}]` : host}:${port}`;
    try {
      this.#channel = new channel(host, port, authority, [options.connectTimeoutMs, options.keepAliveMs, options.maxMessageBytes, 1, options.compress ? 1 : 0], this.#onEvents, options.tls);
    } catch (error) {
      throw tlsSettingsError(error);
    }
  }

  readonly #onEvents: NativeChannelEvents = (...events) => {
    for (let i = 0; i < events.length; ) {
      const id = events[i] as number;
      if (events[i + 1] === EVENT_MESSAGE) {
        const message = events[i + 2] as Buffer;
        i += 5;
        try {
          this.#calls.get(id)?.message(message);
        } catch (error) {
          uncaught(error);
        }
        continue;
      }
      const code = events[i + 2] as number;
      const text = events[i + 3] as string;
      const fault = events[i + 4] as number;
      i += 5;
      const handlers = this.#calls.get(id);
      if (handlers === undefined) continue;
      this.#calls.delete(id);
      const end: CallEnd =
        fault === FAULT_NONE ? { code, message: percentDecode(text) } : { code, message: text, connection: { sent: fault === FAULT_SENT, cause: new Error(text) } };
      try {
        handlers.end(end);
      } catch (error) {
        uncaught(error);
      }
    }
  };

  #headers(metadata: Record<string, string>): string[] {
    if (metadata !== this.#metadata) {
      const flat: string[] = [];
      for (const key in metadata) flat.push(key, metadata[key]!);
      this.#metadata = metadata;
      this.#flat = flat;
    }
    return this.#flat;
  }

  /** Starts a call with its first message (or none); undefined when the connection is closed (ended already). */
  #begin(path: string, metadata: Record<string, string>, deadline: number | undefined, handlers: CallHandlers, message: Uint8Array | undefined, last: boolean): number | undefined {
    if (this.#closed) {
      handlers.end({ code: STATUS.UNAVAILABLE, message: 'the connection is closed', connection: { sent: false, cause: undefined } });
      return undefined;
    }
    const timeout = deadline === undefined ? undefined : formatGrpcTimeout(deadline - Date.now());
    const id = this.#channel.start(path, timeout, this.#headers(metadata), message, last);
    this.#calls.set(id, handlers);
    return id;
  }

  #cancel(id: number): void {
    const handlers = this.#calls.get(id);
    if (handlers === undefined) return;
    this.#calls.delete(id);
    this.#channel.cancel(id);
    handlers.end({ code: STATUS.CANCELLED, message: 'cancelled by the client' });
  }

  start(path: string, metadata: Record<string, string>, deadline: number | undefined, handlers: CallHandlers): OpenCall {
    const id = this.#begin(path, metadata, deadline, handlers, undefined, false);
    if (id === undefined) return ENDED;
    return {
      send: (message, last, framed = false) => {
        if (this.#calls.has(id)) this.#channel.send(id, framed ? message.subarray(5) : message, last);
      },
      finish: () => {
        if (this.#calls.has(id)) this.#channel.send(id, undefined, true);
      },
      cancel: () => this.#cancel(id),
    };
  }

  unary(path: string, message: Buffer, metadata: Record<string, string>, deadline: number | undefined, signal: AbortSignal | undefined, framed = false): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      let response: Buffer | undefined;
      let id: number | undefined;
      const onAbort = (): void => {
        if (id !== undefined) this.#cancel(id);
      };
      id = this.#begin(
        path,
        metadata,
        deadline,
        {
          message: (bytes) => {
            response = bytes;
          },
          end: (result) => {
            signal?.removeEventListener('abort', onAbort);
            settleUnary(result, response, resolve, reject);
          },
        },
        framed ? message.subarray(5) : message,
        true,
      );
      if (signal !== undefined && id !== undefined) {
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      }
    });
  }

  close(): void {
    this.#closed = true;
    this.#channel.close();
  }
}
