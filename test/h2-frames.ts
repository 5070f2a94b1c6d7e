/**
 * HTTP/2 frames written and read by hand, for the tests that act as a
 * hostile client (test/kserve-hostile.test.ts): what no well-behaved client
 * library would send. HPACK is written with literals only (no Huffman),
 * which every decoder must take.
 */
import { connect, type Socket } from 'node:net';

export const FRAME = { data: 0, headers: 1, rstStream: 3, settings: 4, ping: 6, goaway: 7, windowUpdate: 8 } as const;
export const FLAG = { endStream: 0x1, ack: 0x1, endHeaders: 0x4 } as const;
export const SETTING = { headerTableSize: 1, maxConcurrentStreams: 3, initialWindowSize: 4, maxHeaderListSize: 6 } as const;
export const ERROR_CODE = { noError: 0, protocolError: 1, refusedStream: 7, cancel: 8, enhanceYourCalm: 0xb } as const;

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

export function settingsFrame(entries: Array<[number, number]>): Buffer {
  const payload = Buffer.alloc(entries.length * 6);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return frame(FRAME.settings, 0, 0, payload);
}

/** An HPACK integer with an N-bit prefix; `first` holds the pattern bits above it. */
export function hpackInteger(value: number, prefixBits: number, first = 0): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([first | value]);
  const bytes = [first | max];
  let rest = value - max;
  while (rest >= 128) {
    bytes.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

function hpackString(text: string): Buffer {
  const bytes = Buffer.from(text, 'latin1');
  return Buffer.concat([hpackInteger(bytes.length, 7), bytes]);
}

/** A header as a literal, not indexed (0000 prefix), or added to the dynamic table (01 prefix). */
export function hpackLiteral(name: string, value: string, addToTable = false): Buffer {
  return Buffer.concat([Buffer.from([addToTable ? 0x40 : 0x00]), hpackString(name), hpackString(value)]);
}

/** A header of the dynamic or static table by index (1 prefix). */
export function hpackIndexed(index: number): Buffer {
  return hpackInteger(index, 7, 0x80);
}

/** The headers of a gRPC call to `path`. */
export function grpcRequestHeaders(path: string): Buffer {
  return Buffer.concat(
    [
      [':method', 'POST'],
      [':scheme', 'http'],
      [':path', path],
      [':authority', 'test'],
      ['content-type', 'application/grpc'],
      ['te', 'trailers'],
    ].map(([name, value]) => hpackLiteral(name!, value!)),
  );
}

/** A gRPC message (5-byte prefix), `flag` its compressed-flag byte. */
export function grpcMessage(message: Buffer, flag = 0): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

/** A raw HTTP/2 client connection: frames sent as given, frames received kept in order. */
export class RawH2 {
  readonly frames: Frame[] = [];
  #buffered = Buffer.alloc(0);
  #waiting: Array<() => void> = [];
  closed = false;
  error: Error | undefined;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffered = Buffer.concat([this.#buffered, chunk]);
      while (this.#buffered.length >= 9) {
        const length = this.#buffered.readUIntBE(0, 3);
        if (this.#buffered.length < 9 + length) break;
        const received: Frame = {
          type: this.#buffered[3]!,
          flags: this.#buffered[4]!,
          stream: this.#buffered.readUInt32BE(5) & 0x7fffffff,
          payload: this.#buffered.subarray(9, 9 + length),
        };
        this.#buffered = this.#buffered.subarray(9 + length);
        // Acknowledged as a client library would, so the server's settings apply.
        if (received.type === FRAME.settings && (received.flags & FLAG.ack) === 0) socket.write(frame(FRAME.settings, FLAG.ack, 0));
        this.frames.push(received);
      }
      this.#wake();
    });
    socket.on('error', (error) => {
      this.error = error;
    });
    socket.on('close', () => {
      this.closed = true;
      this.#wake();
    });
  }

  /** Connects, sends the preface and `settings`. */
  static async open(port: number, settings: Array<[number, number]> = []): Promise<RawH2> {
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.setNoDelay(true);
    const raw = new RawH2(socket);
    socket.write(Buffer.concat([PREFACE, settingsFrame(settings)]));
    return raw;
  }

  send(...frames: Buffer[]): void {
    this.socket.write(Buffer.concat(frames));
  }

  /** The first frame received so far, or to come, that `match` accepts. */
  async waitFor(match: (frame: Frame) => boolean, what: string, timeoutMs = 10_000): Promise<Frame> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.frames.find(match);
      if (found !== undefined) return found;
      if (this.closed) throw new Error(`the connection closed before ${what}`);
      if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        this.#waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves once the server closed the connection. */
  async waitClosed(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error(`the server kept the connection open past ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        this.#waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.socket.destroy();
  }

  #wake(): void {
    this.#waiting.splice(0).forEach((wake) => wake());
  }
}

/** The error code of a RST_STREAM or GOAWAY frame. */
export function errorCodeOf(received: Frame): number {
  return received.type === FRAME.goaway ? received.payload.readUInt32BE(4) : received.payload.readUInt32BE(0);
}
