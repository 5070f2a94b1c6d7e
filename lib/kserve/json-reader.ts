/**
 * JSON from the network, read with a budget. JSON.parse builds every value
 * before anything can look at one: an 8 MiB `"shape":[0,0,…]` took 240 MB
 * and most of a second of the JS thread, and a `data` array far longer than
 * its shape declares was built whole before its count was compared. Here one
 * pass over the bytes, which allocates nothing, checks the grammar, the
 * nesting and the number of values; JSON.parse then only ever sees text whose
 * structure is bounded. The `data` arrays of an inference request's inputs
 * are the exception they must be: counted in that pass, cut out of the text,
 * and parsed one at a time once their count matched the input's shape
 * (JsonData), so a request costs what its shapes declare.
 */
import { randomBytes } from 'node:crypto';
import { TritonError } from '../errors.js';
import { MAX_REQUEST_PARTS } from './infer-wire.js';

/** Deepest nesting read: a `data` array nests once per dimension, inside three levels of request. */
export const MAX_JSON_DEPTH = 128;

/** `data` arrays of at most this many values are parsed with the rest of the request, up to MAX_REQUEST_PARTS values in all. */
const INLINE_DATA_VALUES = 1024;

/** An input's `data` array, cut out of the request's text: parsed only once its count is known to fit. */
export class JsonData {
  constructor(
    private readonly bytes: Buffer,
    private readonly start: number,
    private readonly end: number,
    /** The values it holds once nested arrays are flattened (what `flatten` in codec.ts counts). */
    readonly count: number,
  ) {}

  parse(): unknown {
    return JSON.parse(this.bytes.toString('utf8', this.start, this.end));
  }
}

/**
 * Where a cut-out `data` array stood: a string nobody sends, as it carries a
 * random key of this process, so that duplicate keys resolve as JSON.parse
 * resolves them (the last one wins) with no bookkeeping here.
 */
const MARK = `\u0000data ${randomBytes(12).toString('hex')} `;

const SPACE = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) SPACE[c] = 1;

/** The characters after a backslash other than u: " \ / b f n r t. */
const ESCAPES = new Uint8Array(256);
for (const c of '"\\/bfnrt') ESCAPES[c.charCodeAt(0)] = 1;

/** What a value is, for the path that finds `data` arrays: root object, `inputs` array, an input object, its `data`. */
const enum Place {
  Other,
  Root,
  Inputs,
  Input,
  Data,
}

/** One pass over JSON text: grammar, depth and parts; `data` arrays of inputs counted and, past the inline budget, marked for cutting. */
class Scanner {
  at: number;
  parts = 0;
  inlineData = 0;
  /** [start, end, count] of each `data` array to cut out, in order. */
  readonly cuts: number[] = [];

  constructor(
    readonly bytes: Buffer,
    start: number,
    readonly end: number,
    readonly findData: boolean,
    /** What is read, for errors: "failed to parse <what>: …". */
    readonly what: string,
  ) {
    this.at = start;
  }

  invalid(message: string): TritonError {
    return new TritonError('INVALID_ARG', `failed to parse ${this.what}: ${message}`);
  }

  fail(what: string): never {
    if (this.at >= this.end) throw this.invalid(`unexpected end of JSON at byte ${this.at}`);
    const byte = this.bytes[this.at]!;
    const shown = byte >= 0x20 && byte < 0x7f ? `'${String.fromCharCode(byte)}'` : `byte 0x${byte.toString(16).padStart(2, '0')}`;
    throw this.invalid(`unexpected ${shown} at byte ${this.at}, expected ${what}`);
  }

  failAt(at: number, what: string): never {
    this.at = at;
    return this.fail(what);
  }

  /** The byte at `at`, or -1 at the end (the bytes may go on: a binary part after the JSON header). */
  peek(): number {
    return this.at < this.end ? this.bytes[this.at]! : -1;
  }

  space(): void {
    while (this.at < this.end && SPACE[this.bytes[this.at]!] === 1) this.at++;
  }

  part(): void {
    if (++this.parts > MAX_REQUEST_PARTS) throw this.invalid(`more than ${MAX_REQUEST_PARTS} values outside tensor data`);
  }

  document(): void {
    this.space();
    this.value(0, this.findData ? Place.Root : Place.Other);
    this.space();
    if (this.at < this.end) this.fail('the end of the JSON');
  }

  /** One value; returns how many values it adds to a `data` array's count (1, or its leaves for a nested array). */
  value(depth: number, place: Place, inData = false): number {
    if (depth > MAX_JSON_DEPTH) throw this.invalid(`nested deeper than ${MAX_JSON_DEPTH} levels`);
    // Scalars inside `data` are tensor values, counted against the shape; everything else is a part.
    const byte = this.peek();
    if (byte === 0x7b /* { */) {
      this.part();
      this.object(depth, place);
      return 1;
    }
    if (byte === 0x5b /* [ */) {
      if (place === Place.Data) return this.data(depth);
      this.part();
      return this.array(depth, place, inData);
    }
    if (!inData) this.part();
    if (byte === 0x22 /* " */) this.string();
    else if (byte === 0x2d /* - */ || (byte >= 0x30 && byte <= 0x39)) this.number();
    else if (byte === 0x74 /* t */) this.literal('true');
    else if (byte === 0x66 /* f */) this.literal('false');
    else if (byte === 0x6e /* n */) this.literal('null');
    else this.fail('a value');
    return 1;
  }

  object(depth: number, place: Place): void {
    this.at++;
    this.space();
    if (this.peek() === 0x7d /* } */) {
      this.at++;
      return;
    }
    for (;;) {
      if (this.peek() !== 0x22) this.fail('a key');
      const keyStart = this.at;
      this.string();
      const key = this.at - keyStart <= 8 ? this.bytes.toString('latin1', keyStart + 1, this.at - 1) : '';
      this.space();
      if (this.peek() !== 0x3a /* : */) this.fail("':'");
      this.at++;
      this.space();
      this.part();
      const next = place === Place.Root && key === 'inputs' ? Place.Inputs : place === Place.Input && key === 'data' ? Place.Data : Place.Other;
      this.value(depth + 1, next);
      this.space();
      const byte = this.peek();
      if (byte !== 0x7d && byte !== 0x2c /* , */) this.fail("',' or '}'");
      this.at++;
      if (byte === 0x7d) return;
      this.space();
    }
  }

  /** An array; inside `data` it returns the leaves it holds. */
  array(depth: number, place: Place, inData: boolean): number {
    this.at++;
    this.space();
    let leaves = 0;
    if (this.peek() === 0x5d /* ] */) {
      this.at++;
      return 0;
    }
    for (;;) {
      leaves += this.value(depth + 1, place === Place.Inputs ? Place.Input : Place.Other, inData);
      this.space();
      const byte = this.peek();
      if (byte !== 0x5d && byte !== 0x2c) this.fail("',' or ']'");
      this.at++;
      if (byte === 0x5d) return leaves;
      this.space();
    }
  }

  /** An input's `data` array: its leaves counted, the array cut out when it is large. */
  data(depth: number): number {
    const start = this.at;
    const count = this.array(depth, Place.Other, true);
    if (count <= INLINE_DATA_VALUES && this.inlineData + count <= MAX_REQUEST_PARTS) this.inlineData += count;
    else this.cuts.push(start, this.at, count);
    return 1;
  }

  string(): void {
    const bytes = this.bytes;
    const end = this.end;
    let at = this.at + 1;
    for (;;) {
      const byte = at < end ? bytes[at]! : -1;
      if (byte === 0x22) break;
      if (byte < 0x20) {
        this.at = at;
        this.fail(byte < 0 ? "'\"'" : 'a character (control characters are escaped in JSON strings)');
      }
      if (byte !== 0x5c /* \ */) {
        at++;
        continue;
      }
      const escape = at + 1 < end ? bytes[at + 1]! : -1;
      if (escape === 0x75 /* u */) {
        for (let i = 2; i < 6; i++) {
          const hex = at + i < end ? bytes[at + i]! : -1;
          if (!((hex >= 0x30 && hex <= 0x39) || (hex >= 0x41 && hex <= 0x46) || (hex >= 0x61 && hex <= 0x66))) {
            this.at = at + i;
            this.fail('a hex digit');
          }
        }
        at += 6;
      } else if (ESCAPES[escape & 0xff] === 1 && escape >= 0) {
        at += 2;
      } else {
        this.at = at + 1;
        this.fail('an escape');
      }
    }
    this.at = at + 1;
  }

  number(): void {
    const bytes = this.bytes;
    const end = this.end;
    let at = this.at;
    let c = bytes[at]!; // a '-' or a digit: value() looked
    if (c === 0x2d) c = ++at < end ? bytes[at]! : -1;
    if (c === 0x30) c = ++at < end ? bytes[at]! : -1;
    else if (c >= 0x31 && c <= 0x39) {
      do c = ++at < end ? bytes[at]! : -1;
      while (c >= 0x30 && c <= 0x39);
    } else this.failAt(at, 'a digit');
    if (c === 0x2e /* . */) {
      c = ++at < end ? bytes[at]! : -1;
      if (!(c >= 0x30 && c <= 0x39)) this.failAt(at, 'a digit');
      do c = ++at < end ? bytes[at]! : -1;
      while (c >= 0x30 && c <= 0x39);
    }
    if (c === 0x65 || c === 0x45 /* e E */) {
      c = ++at < end ? bytes[at]! : -1;
      if (c === 0x2b || c === 0x2d) c = ++at < end ? bytes[at]! : -1;
      if (!(c >= 0x30 && c <= 0x39)) this.failAt(at, 'a digit');
      do c = ++at < end ? bytes[at]! : -1;
      while (c >= 0x30 && c <= 0x39);
    }
    this.at = at;
  }

  literal(word: string): void {
    for (let i = 0; i < word.length; i++, this.at++) {
      if (this.at >= this.end || this.bytes[this.at] !== word.charCodeAt(i)) this.fail(`'${word}'`);
    }
  }
}

/**
 * Parses JSON received from the network, `bytes[start, end)`: INVALID_ARG
 * ("failed to parse <what>: …") for text that is not JSON,
 * more than MAX_REQUEST_PARTS values, or nesting past MAX_JSON_DEPTH, before
 * anything is built. With `inference`, the large `data` arrays of its
 * `inputs` come back as JsonData, to parse once their count is checked.
 */
export function parseNetworkJson(
  bytes: Buffer,
  { start = 0, end = bytes.byteLength, inference = false, what = 'the request JSON buffer' } = {},
): unknown {
  const scanner = new Scanner(bytes, start, end, inference, what);
  scanner.document();
  const cuts = scanner.cuts;
  if (cuts.length === 0) return JSON.parse(bytes.toString('utf8', start, end));
  const pieces: string[] = [];
  const data: JsonData[] = [];
  let from = start;
  for (let i = 0; i < cuts.length; i += 3) {
    pieces.push(bytes.toString('utf8', from, cuts[i]), JSON.stringify(`${MARK}${data.length}`));
    data.push(new JsonData(bytes, cuts[i]!, cuts[i + 1]!, cuts[i + 2]!));
    from = cuts[i + 1]!;
  }
  pieces.push(bytes.toString('utf8', from, end));
  return JSON.parse(pieces.join(''), function (this: unknown, key: string, value: unknown) {
    return key === 'data' && typeof value === 'string' && value.startsWith(MARK) ? data[Number(value.slice(MARK.length))] : value;
  });
}
