/**
 * gRPC over HTTP/2, the parts both ends share: the 5-byte message prefix
 * (compressed flag, length), status codes, `grpc-timeout` and the
 * percent-encoding of `grpc-message`. Used by the gRPC front end
 * (lib/kserve/grpc.ts) and the remote client (lib/client/h2.ts).
 */
import { Buffer } from 'node:buffer';

/** gRPC status codes used by name. */
export const STATUS = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** `grpc-timeout`: at most eight digits and a unit. */
export function formatGrpcTimeout(ms: number): string {
  const value = Math.max(1, Math.ceil(ms));
  return value < 1e8 ? `${value}m` : `${Math.min(99_999_999, Math.ceil(value / 1000))}S`;
}

const TIMEOUT_UNITS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000_001 };

/** A `grpc-timeout` header in milliseconds; undefined when absent or malformed. */
export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string') return undefined;
  const match = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (match === null) return undefined;
  return Number(match[1]) * (TIMEOUT_UNITS[match[2] as string] as number);
}

/** `grpc-message`'s encoding: bytes outside printable ASCII, and '%', as %XX. */
export function percentEncode(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

export function percentDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** `message` with its 5-byte prefix, copied once. */
export function frame(message: Uint8Array, compressed: boolean): Buffer {
  const out = Buffer.allocUnsafe(5 + message.byteLength);
  out[0] = compressed ? 1 : 0;
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

/** Writes the prefix into a message whose first 5 bytes were left free for it. */
export function framePrefixed(message: Buffer): Buffer {
  message[0] = 0;
  message.writeUInt32BE(message.length - 5, 1);
  return message;
}

/** A message the reader cannot take: longer than its limit, or with a compressed-flag byte other than 0 or 1. */
export type FramingFault = { tooLarge: number } | { badFlag: number };

/** Splits a stream of DATA into gRPC messages. */
export class Deframer {
  #chunks: Buffer[] = [];
  #buffered = 0;

  constructor(
    readonly limit: number,
    readonly onMessage: (bytes: Buffer, compressed: boolean) => void,
  ) {}

  /** Bytes received but not yet a whole message. */
  get pending(): number {
    return this.#buffered;
  }

  /** Why the call must end (a message past the limit, a compressed flag not 0 or 1), else undefined. */
  push(chunk: Buffer): FramingFault | undefined {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    for (;;) {
      if (this.#buffered < 5) return undefined;
      let head = this.#chunks[0]!;
      if (head.length < 5) {
        head = Buffer.concat(this.#chunks);
        this.#chunks = [head];
      }
      const flag = head[0]!;
      if (flag > 1) return { badFlag: flag };
      const compressed = flag === 1;
      const length = head.readUInt32BE(1);
      if (length > this.limit) return { tooLarge: length };
      if (this.#buffered < 5 + length) return undefined;
      let message: Buffer;
      if (head.length >= 5 + length) {
        message = head.subarray(5, 5 + length);
        const rest = head.subarray(5 + length);
        if (rest.length > 0) this.#chunks[0] = rest;
        else this.#chunks.shift();
      } else {
        const all = Buffer.concat(this.#chunks);
        message = all.subarray(5, 5 + length);
        const rest = all.subarray(5 + length);
        this.#chunks = rest.length > 0 ? [rest] : [];
      }
      this.#buffered -= 5 + length;
      this.onMessage(message, compressed);
    }
  }
}
