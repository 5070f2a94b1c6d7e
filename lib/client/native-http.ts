/**
 * HTTP/1.1 requests made by the addon (native/client/http-channel.cc):
 * keep-alive connections on this thread's own event loop, a request written
 * from its head (made here) and its body as it is, the response read whole
 * and handed back as one event. No undici, no socket or parser in JS.
 * Everything above (the routes, the codec, deadlines, retries, the pool)
 * is http.ts's, shared with undici's exchange. TLS is the addon's too
 * (native-tls.ts); not yet here: compression (`transport: 'auto'` uses
 * undici for it).
 */
import { TritonError } from '../errors.js';
import { addonExport } from '../addon-file.js';
import type { NativeHttpChannel, NativeHttpChannelClass, NativeChannelEvents } from '../native.js';
import type { HttpAnswer, HttpExchange } from './http.js';
import type { HostPort } from './targets.js';
import { tlsSettingsError } from './native-tls.js';
import { ConnectionError, serverError, type Call } from './transport.js';

/** The addon's channel class, or why there is none here. */
export function nativeHttpChannelClass(): NativeHttpChannelClass | string {
  return addonExport<NativeHttpChannelClass>('HttpChannel', 'the addon has no native HTTP channel');
}

const EVENT_RESPONSE = 0;
const NO_BODY: readonly Uint8Array[] = [];
const FAULT_NONE = 0;
const FAULT_SENT = 1;
// The channel's own failures, as gRPC status codes: too large, or a response it could not read.
const STATUS_RESOURCE_EXHAUSTED = 8;

// RFC 9110's field names (tokens) and values (no control characters but tab).
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
// Headers that frame the message: the channel writes them itself.
const FRAMING = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'expect', 'te', 'trailer']);

/** The header lines of a request (http.ts makes a headers object per request: each is checked). */
function headerLines(headers: Record<string, string>, endpoint: string): { lines: string; host: boolean } {
  let lines = '';
  let host = false;
  for (const name in headers) {
    const value = headers[name]!;
    if (!HEADER_NAME.test(name)) throw serverError('INVALID_ARG', `'${name}' is not a valid HTTP header name`, endpoint);
    if (!HEADER_VALUE.test(value)) throw serverError('INVALID_ARG', `the value of header '${name}' has a character an HTTP header may not have`, endpoint);
    const lower = name.toLowerCase();
    if (FRAMING.has(lower)) throw serverError('INVALID_ARG', `header '${name}' is set by the transport`, endpoint);
    if (lower === 'host') host = true;
    lines += `${name}: ${value}\r\n`;
  }
  return { lines, host };
}

interface Pending {
  resolve(answer: HttpAnswer): void;
  reject(error: TritonError): void;
  call: Call;
  onAbort: () => void;
}

export class NativeHttpExchange implements HttpExchange {
  readonly #channel: NativeHttpChannel;
  readonly #endpoint: string;
  readonly #host: string;
  readonly #pending = new Map<number, Pending>();
  #closed = false;

  constructor(
    channel: NativeHttpChannelClass,
    endpoint: string,
    address: HostPort,
    options: { connectTimeoutMs: number; keepAliveMs: number; maxMessageBytes: number; connections: number; compress: boolean },
    tls?: [string, string, string, string],
  ) {
    this.#endpoint = endpoint;
    this.#host = endpoint.slice(endpoint.indexOf('//') + 2);
    try {
      this.#channel = new channel(address.host, address.port, [options.connectTimeoutMs, options.keepAliveMs, options.maxMessageBytes, options.connections, options.compress ? 1 : 0], this.#onEvents, tls);
    } catch (error) {
      throw tlsSettingsError(error);
    }
  }

  readonly #onEvents: NativeChannelEvents = (...events) => {
    for (let i = 0; i < events.length; i += 5) {
      const pending = this.#pending.get(events[i] as number);
      if (pending === undefined) continue;
      this.#pending.delete(events[i] as number);
      pending.call.signal?.removeEventListener('abort', pending.onAbort);
      if (events[i + 1] === EVENT_RESPONSE) {
        const headerLength = events[i + 4] as number;
        pending.resolve({ status: events[i + 3] as number, headerLength: headerLength < 0 ? undefined : headerLength, encoding: undefined, bytes: events[i + 2] as Uint8Array });
        continue;
      }
      const code = events[i + 2] as number;
      const message = events[i + 3] as string;
      const fault = events[i + 4] as number;
      if (fault !== FAULT_NONE) {
        pending.reject(new ConnectionError(message, this.#endpoint, { cause: new Error(message), sent: fault === FAULT_SENT }));
      } else {
        pending.reject(serverError(code === STATUS_RESOURCE_EXHAUSTED ? 'INVALID_ARG' : 'INTERNAL', message, this.#endpoint));
      }
    }
  };

  request(method: 'GET' | 'POST', path: string, headers: Record<string, string>, body: readonly Uint8Array[] | undefined, call: Call): Promise<HttpAnswer> {
    if (this.#closed) return Promise.reject(new ConnectionError('the client is closed', this.#endpoint, { sent: false }));
    const { lines, host } = headerLines(headers, this.#endpoint);
    let length = '';
    if (body !== undefined || method === 'POST') {
      let bytes = 0;
      for (const part of body ?? []) bytes += part.byteLength;
      length = `content-length: ${bytes}\r\n`;
    }
    const head = `${method} ${path} HTTP/1.1\r\n${host ? '' : `host: ${this.#host}\r\n`}${lines}${length}\r\n`;
    const signal = call.signal;
    if (signal?.aborted) return Promise.reject(this.#cancelled(call));
    return new Promise((resolve, reject) => {
      const id = this.#channel.start(head, body ?? NO_BODY);
      const onAbort = (): void => {
        if (!this.#pending.delete(id)) return;
        this.#channel.cancel(id);
        reject(this.#cancelled(call));
      };
      this.#pending.set(id, { resolve, reject, call, onAbort });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  #cancelled(call: Call): TritonError {
    const timedOut = call.deadline !== undefined && Date.now() >= call.deadline;
    return serverError('CANCELLED', timedOut ? 'the call timed out' : 'the call was cancelled', this.#endpoint);
  }

  close(): void {
    this.#closed = true;
    this.#channel.close();
  }
}
