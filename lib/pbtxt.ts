/**
 * Protocol Buffers text format (the syntax of Triton's `config.pbtxt`):
 * a reader that turns text into protobuf-JSON-shaped values, and a writer
 * that turns such values back into text.
 *
 * The text format carries no schema, so both directions take a small
 * descriptor of the message ({@link PbMessage}): which fields are repeated,
 * which are maps, which are nested messages, which are enums, and the scalar
 * type of the rest. With it, a repeated field that appears once still becomes
 * an array, map entries become an object, enum names are checked and 64-bit
 * integers become numbers. Fields the descriptor does not know are kept with
 * their types guessed from the text (see {@link parsePbtxt}).
 *
 * The output follows protobuf's JSON mapping with Triton's twist of printing
 * 64-bit integers as numbers: snake_case field names, enums by name, maps as
 * objects keyed by the key's text.
 */
import { TritonError } from './errors.js';

// ---------------------------------------------------------------------------
// Descriptors

/** Scalar field types of proto3. */
export type PbScalarType =
  | 'string'
  | 'bytes'
  | 'bool'
  | 'int32'
  | 'sint32'
  | 'sfixed32'
  | 'uint32'
  | 'fixed32'
  | 'int64'
  | 'sint64'
  | 'sfixed64'
  | 'uint64'
  | 'fixed64'
  | 'float'
  | 'double';

/** Types a map key may have. */
export type PbMapKeyType = Exclude<PbScalarType, 'bytes' | 'float' | 'double'>;

/** What one field of a message holds. */
export type PbField =
  | { readonly kind: 'scalar'; readonly type: PbScalarType; readonly repeated?: boolean }
  /** `values[i]` is the name of the enumerator with number `i`. */
  | { readonly kind: 'enum'; readonly values: readonly string[]; readonly repeated?: boolean }
  | { readonly kind: 'message'; readonly message: PbMessage; readonly repeated?: boolean }
  | { readonly kind: 'map'; readonly key: PbMapKeyType; readonly value: PbSingularField };

/** A field that is not repeated and not a map: what a map's value may be. */
export type PbSingularField = Exclude<PbField, { kind: 'map' }>;

/** A message type: its name (used in error messages) and its fields. */
export interface PbMessage {
  readonly name: string;
  readonly fields: Readonly<Record<string, PbField>>;
}

/** Small constructors that keep descriptor tables short and readable. */
export const pb = {
  scalar: (type: PbScalarType): PbField => ({ kind: 'scalar', type }),
  enumOf: (values: readonly string[]): PbField => ({ kind: 'enum', values }),
  message: (message: PbMessage): PbField => ({ kind: 'message', message }),
  map: (key: PbMapKeyType, value: PbField): PbField => {
    if (value.kind === 'map' || value.repeated === true) {
      throw new TypeError('a map value cannot be repeated or a map');
    }
    return { kind: 'map', key, value };
  },
  repeated: (field: PbField): PbField => {
    if (field.kind === 'map') throw new TypeError('a map field cannot be repeated');
    return { ...field, repeated: true };
  },
  type: (name: string, fields: Record<string, PbField>): PbMessage => ({ name, fields }),
} as const;

// ---------------------------------------------------------------------------
// Values

/** A JSON value as the reader produces it and the writer accepts it. */
export type PbValue = string | number | boolean | PbValue[] | PbObject;
export interface PbObject {
  [field: string]: PbValue;
}

/** A place in the text: 1-based line and column. */
export interface PbPosition {
  line: number;
  column: number;
}

export interface PbtxtOptions {
  /** Name used in error messages (`<source>:<line>:<col>: ...`). Default `'<text>'`. */
  source?: string;
  /**
   * When given, filled with where each field value starts, keyed by its
   * path as {@link formatPbPath} prints it (`input[0].dims`, `parameters["k"]`);
   * used to point at the text when a later check rejects a value.
   */
  positions?: Map<string, PbPosition>;
}

const PATH_IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

function joinPbPath(path: string, name: string): string {
  if (!PATH_IDENT.test(name)) return `${path}[${JSON.stringify(name)}]`;
  return path === '' ? name : `${path}.${name}`;
}

/**
 * Prints a path into a message value the way this module names places:
 * fields as `a.b`, list elements as `[i]`, map keys as `["key"]`. With the
 * descriptor, keys of map fields are told apart from field names.
 */
export function formatPbPath(segments: readonly PropertyKey[], message: PbMessage | undefined): string {
  let path = '';
  let current: PbMessage | undefined = message;
  let field: PbField | undefined;
  let inMapEntry = false;
  for (const segment of segments) {
    if (typeof segment === 'number') {
      path += `[${segment}]`;
      if (field && field.kind === 'message') current = field.message;
      field = undefined;
      continue;
    }
    const name = String(segment);
    if (inMapEntry && field && field.kind === 'map') {
      path += `[${JSON.stringify(name)}]`;
      const value: PbField = field.value;
      current = value.kind === 'message' ? value.message : undefined;
      field = undefined;
      inMapEntry = false;
      continue;
    }
    path = joinPbPath(path, name);
    field = current?.fields[name];
    inMapEntry = field?.kind === 'map';
    if (field && field.kind === 'message' && field.repeated !== true) current = field.message;
    else if (!field) current = undefined;
  }
  return path;
}

// ---------------------------------------------------------------------------
// Tokenizer

type TokenKind = 'ident' | 'number' | 'string' | 'punct' | 'eof';

interface Token {
  kind: TokenKind;
  /** Source text for ident/number/punct; the decoded value for string. */
  text: string;
  line: number;
  col: number;
}

const PUNCT = new Set(['{', '}', '<', '>', '[', ']', ':', ',', ';', '-', '.', '/']);

function isIdentStart(c: string): boolean {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
}

function isIdentPart(c: string): boolean {
  return isIdentStart(c) || (c >= '0' && c <= '9');
}

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}

const SIMPLE_ESCAPES: Readonly<Record<string, number>> = {
  n: 0x0a,
  t: 0x09,
  r: 0x0d,
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  v: 0x0b,
  '\\': 0x5c,
  "'": 0x27,
  '"': 0x22,
  '?': 0x3f,
};

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8');

class Lexer {
  private pos = 0;
  private line = 1;
  private lineStart = 0;

  constructor(
    private readonly text: string,
    private readonly fail: (line: number, col: number, what: string) => never,
  ) {}

  tokenize(): Token[] {
    const tokens: Token[] = [];
    for (;;) {
      this.skipSpaceAndComments();
      const token = this.next();
      tokens.push(token);
      if (token.kind === 'eof') return tokens;
    }
  }

  private col(at = this.pos): number {
    return at - this.lineStart + 1;
  }

  private skipSpaceAndComments(): void {
    const { text } = this;
    while (this.pos < text.length) {
      const c = text[this.pos];
      if (c === '\n') {
        this.pos++;
        this.line++;
        this.lineStart = this.pos;
      } else if (c === ' ' || c === '\t' || c === '\r' || c === '\f' || c === '\v') {
        this.pos++;
      } else if (c === '#') {
        while (this.pos < text.length && text[this.pos] !== '\n') this.pos++;
      } else {
        return;
      }
    }
  }

  private next(): Token {
    const { text } = this;
    const line = this.line;
    const col = this.col();
    const c = text[this.pos];
    if (c === undefined) return { kind: 'eof', text: '', line, col };
    if (isIdentStart(c)) {
      const start = this.pos;
      while (this.pos < text.length && isIdentPart(text[this.pos] ?? '')) this.pos++;
      return { kind: 'ident', text: text.slice(start, this.pos), line, col };
    }
    if (isDigit(c) || (c === '.' && isDigit(text[this.pos + 1]))) {
      return this.number(line, col);
    }
    if (c === '"' || c === "'") return this.string(line, col);
    if (c === '/' && text[this.pos + 1] === '/') {
      this.fail(line, col, "'//' comments are not part of the text format; use '#'");
    }
    if (PUNCT.has(c)) {
      this.pos++;
      return { kind: 'punct', text: c, line, col };
    }
    return this.fail(line, col, `unexpected character ${JSON.stringify(c)}`);
  }

  private number(line: number, col: number): Token {
    const rest = this.text.slice(this.pos);
    const match = /^(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?)/.exec(rest);
    // The pattern always matches at least one digit here.
    const lexeme = match?.[0] ?? '';
    this.pos += lexeme.length;
    const after = this.text[this.pos];
    if (after !== undefined && (isIdentPart(after) || after === '.')) {
      let end = this.pos;
      while (end < this.text.length && (isIdentPart(this.text[end] ?? '') || this.text[end] === '.')) end++;
      this.fail(line, col, `invalid number ${JSON.stringify(this.text.slice(this.pos - lexeme.length, end))}`);
    }
    return { kind: 'number', text: lexeme, line, col };
  }

  private string(line: number, col: number): Token {
    const { text } = this;
    const quote = text[this.pos];
    this.pos++;
    const bytes: number[] = [];
    for (;;) {
      const c = text[this.pos];
      if (c === undefined || c === '\n') {
        this.fail(line, col, 'unterminated string');
      }
      if (c === quote) {
        this.pos++;
        break;
      }
      if (c !== '\\') {
        const cp = text.codePointAt(this.pos) ?? 0;
        const ch = String.fromCodePoint(cp);
        for (const b of utf8Encoder.encode(ch)) bytes.push(b);
        this.pos += ch.length;
        continue;
      }
      const escLine = this.line;
      const escCol = this.col();
      const e = text[this.pos + 1];
      if (e === undefined || e === '\n') this.fail(line, col, 'unterminated string');
      const simple = SIMPLE_ESCAPES[e];
      if (simple !== undefined) {
        bytes.push(simple);
        this.pos += 2;
      } else if (e >= '0' && e <= '7') {
        const m = /^[0-7]{1,3}/.exec(text.slice(this.pos + 1, this.pos + 4));
        const digits = m?.[0] ?? e;
        const value = Number.parseInt(digits, 8);
        if (value > 0xff) this.fail(escLine, escCol, `octal escape \\${digits} is above \\377`);
        bytes.push(value);
        this.pos += 1 + digits.length;
      } else if (e === 'x' || e === 'X') {
        const m = /^[0-9a-fA-F]{1,2}/.exec(text.slice(this.pos + 2, this.pos + 4));
        if (!m) this.fail(escLine, escCol, '\\x must be followed by a hex digit');
        bytes.push(Number.parseInt(m[0], 16));
        this.pos += 2 + m[0].length;
      } else if (e === 'u' || e === 'U') {
        const n = e === 'u' ? 4 : 8;
        const hex = text.slice(this.pos + 2, this.pos + 2 + n);
        if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(hex)) {
          this.fail(escLine, escCol, `\\${e} must be followed by ${n} hex digits`);
        }
        const cp = Number.parseInt(hex, 16);
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
          this.fail(escLine, escCol, `\\${e}${hex} is not a Unicode scalar value`);
        }
        for (const b of utf8Encoder.encode(String.fromCodePoint(cp))) bytes.push(b);
        this.pos += 2 + n;
      } else {
        this.fail(escLine, escCol, `invalid escape sequence \\${e}`);
      }
    }
    return { kind: 'string', text: utf8Decoder.decode(new Uint8Array(bytes)), line, col };
  }
}

// ---------------------------------------------------------------------------
// Reader

const INT_RANGES: Readonly<Record<string, readonly [bigint, bigint]>> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};

const BOOL_WORDS: Readonly<Record<string, boolean>> = {
  true: true,
  True: true,
  t: true,
  false: false,
  False: false,
  f: false,
};

function describeToken(t: Token): string {
  switch (t.kind) {
    case 'eof':
      return 'end of input';
    case 'string':
      return `string ${JSON.stringify(t.text)}`;
    default:
      return `'${t.text}'`;
  }
}

function isIntegerLexeme(text: string): boolean {
  return /^(?:0[xX][0-9a-fA-F]+|\d+)$/.test(text);
}

function integerLexemeValue(text: string): bigint {
  if (/^0[xX]/.test(text)) return BigInt(text);
  if (/^0[0-7]+$/.test(text)) return BigInt(`0o${text.slice(1)}`);
  return BigInt(text);
}

function floatLexemeValue(text: string): number {
  if (/^0[xX]/.test(text)) return Number(BigInt(text));
  return Number.parseFloat(text.replace(/[fF]$/, ''));
}

const MAP_ENTRY_CACHE = new WeakMap<PbField, PbMessage>();

function mapEntryMessage(field: Extract<PbField, { kind: 'map' }>, fieldName: string): PbMessage {
  let entry = MAP_ENTRY_CACHE.get(field);
  if (!entry) {
    entry = {
      name: `${fieldName} entry`,
      fields: { key: { kind: 'scalar', type: field.key }, value: field.value },
    };
    MAP_ENTRY_CACHE.set(field, entry);
  }
  return entry;
}

function defaultValue(field: PbSingularField): PbValue {
  switch (field.kind) {
    case 'message':
      return {};
    case 'enum':
      return field.values[0] ?? 0;
    case 'scalar':
      if (field.type === 'string' || field.type === 'bytes') return '';
      if (field.type === 'bool') return false;
      return 0;
  }
}

class Reader {
  private index = 0;

  constructor(
    private readonly tokens: Token[],
    private readonly fail: (line: number, col: number, what: string) => never,
    private readonly positions: Map<string, PbPosition> | undefined,
  ) {}

  private peek(offset = 0): Token {
    // The token list always ends with 'eof', and we never move past it.
    return this.tokens[Math.min(this.index + offset, this.tokens.length - 1)] as Token;
  }

  private take(): Token {
    const t = this.peek();
    if (t.kind !== 'eof') this.index++;
    return t;
  }

  private isPunct(text: string, offset = 0): boolean {
    const t = this.peek(offset);
    return t.kind === 'punct' && t.text === text;
  }

  private error(t: Token, what: string): never {
    return this.fail(t.line, t.col, what);
  }

  private expectPunct(text: string, context: string): Token {
    const t = this.take();
    if (t.kind !== 'punct' || t.text !== text) {
      this.error(t, `expected '${text}' ${context}, got ${describeToken(t)}`);
    }
    return t;
  }

  /** Records where a value starts, under its path, when positions are wanted. */
  private mark(path: string | null, t: Token): void {
    if (path !== null && this.positions && !this.positions.has(path)) {
      this.positions.set(path, { line: t.line, column: t.col });
    }
  }

  /**
   * Reads fields until `closer` ('}' or '>') or the end of input. `path` is
   * the message's own path for position records (null: don't record).
   */
  readMessage(message: PbMessage | undefined, closer: '}' | '>' | null, path: string | null): PbObject {
    const result: PbObject = {};
    const seen = new Map<string, Token>();
    for (;;) {
      const t = this.peek();
      if (closer === null ? t.kind === 'eof' : t.kind === 'punct' && t.text === closer) break;
      if (t.kind === 'eof') {
        this.error(t, `expected a field name or '${closer ?? ''}', got end of input`);
      }
      if (t.kind === 'punct' && t.text === '[') {
        this.error(t, 'extension and Any fields ([...]) are not supported');
      }
      if (t.kind !== 'ident') {
        if (t.kind === 'punct' && (t.text === '}' || t.text === '>')) {
          this.error(t, `unexpected '${t.text}'${closer === null ? '' : `, expected '${closer}'`}`);
        }
        this.error(t, `expected a field name, got ${describeToken(t)}`);
      }
      this.take();
      const fieldPath = path === null ? null : joinPbPath(path, t.text);
      this.readField(result, message, t, seen, fieldPath);
      if (this.isPunct(',') || this.isPunct(';')) this.take();
    }
    return result;
  }

  private readField(
    result: PbObject,
    message: PbMessage | undefined,
    nameToken: Token,
    seen: Map<string, Token>,
    path: string | null,
  ): void {
    const name = nameToken.text;
    const field = message?.fields[name];
    if (!field) {
      // Unknown to the descriptor: keep it, typed from the text alone.
      this.readUnknownField(result, nameToken, path);
      return;
    }
    const hasColon = this.isPunct(':');
    if (hasColon) this.take();

    if (field.kind === 'map') {
      const entries = this.isPunct('[')
        ? this.readList(field, name, hasColon, () => null)
        : [this.readValue(field, name, hasColon, null)];
      let map = result[name];
      if (map === undefined || Array.isArray(map) || typeof map !== 'object') {
        map = {};
        result[name] = map;
      }
      this.mark(path, nameToken);
      for (const { value, token } of entries) {
        // Entries were read with the synthetic entry message, so they are objects.
        const entry = value as PbObject;
        const key = String(entry['key'] ?? defaultValue({ kind: 'scalar', type: field.key }));
        map[key] = entry['value'] ?? defaultValue(field.value);
        this.mark(path === null ? null : `${path}[${JSON.stringify(key)}]`, token);
      }
      return;
    }

    if (field.repeated === true) {
      let list = result[name];
      if (!Array.isArray(list)) {
        list = [];
        result[name] = list;
      }
      const base = list.length;
      this.mark(path, nameToken);
      const at = (i: number): string | null => (path === null ? null : `${path}[${base + i}]`);
      const values = this.isPunct('[')
        ? this.readList(field, name, hasColon, at)
        : [this.readValue(field, name, hasColon, at(0))];
      values.forEach(({ value, token }, i) => {
        this.mark(at(i), token);
        (list as PbValue[]).push(value);
      });
      return;
    }

    if (this.isPunct('[')) {
      this.error(this.peek(), `field '${name}' is not repeated, so it cannot take a list`);
    }
    const first = seen.get(name);
    if (first) {
      this.error(
        nameToken,
        `field '${name}' is not repeated but is set more than once (first at ${first.line}:${first.col})`,
      );
    }
    seen.set(name, nameToken);
    this.mark(path, nameToken);
    result[name] = this.readValue(field, name, hasColon, path).value;
  }

  private readUnknownField(result: PbObject, nameToken: Token, path: string | null): void {
    const name = nameToken.text;
    this.mark(path, nameToken);
    const hasColon = this.isPunct(':');
    if (hasColon) this.take();
    let value: PbValue;
    if (this.isPunct('[')) {
      value = this.readList(undefined, name, hasColon, () => null).map((v) => v.value);
    } else {
      value = this.readValue(undefined, name, hasColon, null).value;
    }
    const previous = result[name];
    if (previous === undefined) {
      result[name] = value;
    } else if (Array.isArray(previous)) {
      if (Array.isArray(value)) previous.push(...value);
      else previous.push(value);
    } else {
      result[name] = Array.isArray(value) ? [previous, ...value] : [previous, value];
    }
  }

  private readList(
    field: PbField | undefined,
    name: string,
    hasColon: boolean,
    pathOf: (i: number) => string | null,
  ): { value: PbValue; token: Token }[] {
    this.expectPunct('[', `to start the list of '${name}'`);
    const values: { value: PbValue; token: Token }[] = [];
    if (this.isPunct(']')) {
      this.take();
      return values;
    }
    for (;;) {
      values.push(this.readValue(field, name, hasColon, pathOf(values.length), true));
      const t = this.take();
      if (t.kind === 'punct' && t.text === ']') return values;
      if (t.kind !== 'punct' || t.text !== ',') {
        this.error(t, `expected ',' or ']' in the list of '${name}', got ${describeToken(t)}`);
      }
    }
  }

  /**
   * One value of a field: a message in `{}` or `<>`, or a scalar. Scalars
   * need the ':' after the field name (also before a list of scalars).
   */
  private readValue(
    field: PbField | undefined,
    name: string,
    hasColon: boolean,
    path: string | null,
    inList = false,
  ): { value: PbValue; token: Token } {
    const t = this.peek();
    if (t.kind === 'punct' && (t.text === '{' || t.text === '<')) {
      let message: PbMessage | undefined;
      if (field) {
        if (field.kind === 'map') message = mapEntryMessage(field, name);
        else if (field.kind === 'message') message = field.message;
        else this.error(t, `field '${name}' is a ${describeField(field)}, not a message`);
      }
      this.take();
      const closer = t.text === '{' ? '}' : '>';
      const value = this.readMessage(message, closer, path);
      this.expectPunct(closer, `to close '${name}' opened at ${t.line}:${t.col}`);
      return { value, token: t };
    }
    if (field && (field.kind === 'message' || field.kind === 'map')) {
      this.error(t, `expected '{' to start message field '${name}', got ${describeToken(t)}`);
    }
    if (!hasColon) {
      this.error(
        t,
        `expected ':' after field name '${name}'${inList ? ' (before a list of scalars)' : ''}, got ${describeToken(t)}`,
      );
    }
    const value = field ? this.readScalar(field, name) : this.readUnknownScalar(name);
    return { value, token: t };
  }

  private readUnknownScalar(name: string): PbValue {
    const t = this.peek();
    if (t.kind === 'string') return this.readString();
    if (t.kind === 'ident' && !(t.text in SPECIAL_FLOATS)) {
      this.take();
      if (t.text === 'true' || t.text === 'false') return t.text === 'true';
      return t.text;
    }
    const { negative, token } = this.readSignedNumberToken(name);
    if (token.kind === 'ident') return signed(negative, SPECIAL_FLOATS[token.text] ?? Number.NaN);
    if (isIntegerLexeme(token.text)) {
      return signed(negative, Number(integerLexemeValue(token.text)));
    }
    return signed(negative, floatLexemeValue(token.text));
  }

  private readString(): string {
    let s = '';
    while (this.peek().kind === 'string') s += this.take().text;
    return s;
  }

  private readSignedNumberToken(name: string): { negative: boolean; token: Token } {
    let negative = false;
    if (this.isPunct('-')) {
      this.take();
      negative = true;
    }
    const token = this.take();
    if (token.kind === 'number') return { negative, token };
    if (token.kind === 'ident' && token.text.toLowerCase() in SPECIAL_FLOATS) {
      return { negative, token: { ...token, text: token.text.toLowerCase() } };
    }
    return this.error(token, `expected a value for field '${name}', got ${describeToken(token)}`);
  }

  private readScalar(field: Exclude<PbField, { kind: 'message' | 'map' }>, name: string): PbValue {
    const t = this.peek();
    if (field.kind === 'enum') {
      if (t.kind === 'ident') {
        this.take();
        if (!field.values.includes(t.text)) {
          this.error(
            t,
            `unknown value '${t.text}' for enum field '${name}' (expected one of ${field.values.join(', ')})`,
          );
        }
        return t.text;
      }
      if (t.kind === 'number' || (t.kind === 'punct' && t.text === '-')) {
        const { negative, token } = this.readSignedNumberToken(name);
        const n = isIntegerLexeme(token.text) ? Number(integerLexemeValue(token.text)) : Number.NaN;
        const value = field.values[negative ? -1 : n];
        if (value === undefined) {
          this.error(token, `${negative ? '-' : ''}${token.text} is not a value of enum field '${name}'`);
        }
        return value;
      }
      return this.error(t, `expected an enum name for field '${name}', got ${describeToken(t)}`);
    }
    const type = field.type;
    if (type === 'string' || type === 'bytes') {
      if (t.kind !== 'string') {
        this.error(t, `expected a quoted string for field '${name}', got ${describeToken(t)}`);
      }
      return this.readString();
    }
    if (type === 'bool') {
      this.take();
      if (t.kind === 'ident' && t.text in BOOL_WORDS) return BOOL_WORDS[t.text] === true;
      if (t.kind === 'number' && (t.text === '0' || t.text === '1')) return t.text === '1';
      return this.error(t, `expected true or false for field '${name}', got ${describeToken(t)}`);
    }
    if (type === 'float' || type === 'double') {
      if (t.kind === 'string') {
        this.error(t, `expected a number for field '${name}', got ${describeToken(t)}`);
      }
      const { negative, token } = this.readSignedNumberToken(name);
      if (token.kind === 'ident') return signed(negative, SPECIAL_FLOATS[token.text] ?? Number.NaN);
      return signed(negative, floatLexemeValue(token.text));
    }
    // Integer types.
    if (t.kind !== 'number' && !(t.kind === 'punct' && t.text === '-')) {
      this.error(t, `expected an integer for field '${name}' (${type}), got ${describeToken(t)}`);
    }
    const minusToken = t;
    const { negative, token } = this.readSignedNumberToken(name);
    if (token.kind !== 'number' || !isIntegerLexeme(token.text)) {
      this.error(token, `expected an integer for field '${name}' (${type}), got '${token.text}'`);
    }
    let value = integerLexemeValue(token.text);
    if (negative) value = -value;
    const range = INT_RANGES[type];
    if (range && (value < range[0] || value > range[1])) {
      this.error(
        negative ? minusToken : token,
        `${value} is out of range for field '${name}' (${type})`,
      );
    }
    return Number(value);
  }
}

const SPECIAL_FLOATS: Readonly<Record<string, number>> = {
  inf: Number.POSITIVE_INFINITY,
  infinity: Number.POSITIVE_INFINITY,
  nan: Number.NaN,
};

function signed(negative: boolean, n: number): number {
  return negative ? -n : n;
}

function describeField(field: PbField): string {
  switch (field.kind) {
    case 'scalar':
      return `${field.repeated === true ? 'repeated ' : ''}${field.type}`;
    case 'enum':
      return `${field.repeated === true ? 'repeated ' : ''}enum`;
    case 'message':
      return 'message';
    case 'map':
      return 'map';
  }
}

function failer(source: string) {
  return (line: number, col: number, what: string): never => {
    throw new TritonError('INVALID_ARG', `${source}:${line}:${col}: ${what}`);
  };
}

/**
 * Parses protobuf text format into a JSON object shaped by `message`.
 *
 * - Known fields get their descriptor's shape: repeated fields are arrays
 *   even when they appear once, maps are objects, enums are names, integers
 *   (also 64-bit) are numbers, bools are booleans.
 * - Fields the descriptor does not know are kept: quoted text becomes a
 *   string, `true`/`false` a boolean, other bare words a string, numbers a
 *   number, `{...}` an object; a field given more than once, or as a list,
 *   becomes an array.
 *
 * Pass `undefined` as the message to read text with no descriptor at all.
 * Errors throw `TritonError('INVALID_ARG', '<source>:<line>:<col>: <what>')`.
 */
export function parsePbtxt(text: string, message: PbMessage | undefined, options: PbtxtOptions = {}): PbObject {
  const fail = failer(options.source ?? '<text>');
  const tokens = new Lexer(text, fail).tokenize();
  return new Reader(tokens, fail, options.positions).readMessage(message, null, '');
}

// ---------------------------------------------------------------------------
// Writer

function writeFail(path: string, what: string): never {
  throw new TritonError('INVALID_ARG', `${path}: ${what}`);
}

/** Quotes a string for the text format (double quotes, C escapes). */
export function quotePbtxtString(s: string): string {
  let out = '"';
  for (const ch of s) {
    switch (ch) {
      case '"':
        out += '\\"';
        break;
      case '\\':
        out += '\\\\';
        break;
      case '\n':
        out += '\\n';
        break;
      case '\r':
        out += '\\r';
        break;
      case '\t':
        out += '\\t';
        break;
      default: {
        const cp = ch.codePointAt(0) ?? 0;
        if (cp < 0x20 || cp === 0x7f) out += `\\${cp.toString(8).padStart(3, '0')}`;
        else out += ch;
      }
    }
  }
  return `${out}"`;
}

function formatFloat(n: number): string {
  if (Number.isNaN(n)) return 'nan';
  if (n === Number.POSITIVE_INFINITY) return 'inf';
  if (n === Number.NEGATIVE_INFINITY) return '-inf';
  if (Object.is(n, -0)) return '-0';
  return String(n);
}

function formatInteger(value: unknown, type: PbScalarType, path: string): string {
  let n: bigint;
  if (typeof value === 'number' && Number.isInteger(value)) n = BigInt(value);
  else if (typeof value === 'string' && /^\s*-?\d+\s*$/.test(value)) n = BigInt(value.trim());
  else return writeFail(path, `expected an integer (${type}), got ${JSON.stringify(value)}`);
  const range = INT_RANGES[type];
  if (range && (n < range[0] || n > range[1])) writeFail(path, `${n} is out of range for ${type}`);
  return n.toString();
}

function formatScalar(field: Exclude<PbField, { kind: 'message' | 'map' }>, value: unknown, path: string): string {
  if (field.kind === 'enum') {
    if (typeof value === 'string' && field.values.includes(value)) return value;
    if (typeof value === 'number' && field.values[value] !== undefined) return field.values[value];
    return writeFail(path, `${JSON.stringify(value)} is not one of ${field.values.join(', ')}`);
  }
  switch (field.type) {
    case 'string':
    case 'bytes':
      if (typeof value !== 'string') writeFail(path, `expected a string, got ${JSON.stringify(value)}`);
      return quotePbtxtString(value);
    case 'bool':
      if (typeof value !== 'boolean') writeFail(path, `expected a boolean, got ${JSON.stringify(value)}`);
      return value ? 'true' : 'false';
    case 'float':
    case 'double':
      if (typeof value === 'number') return formatFloat(value);
      if (typeof value === 'string' && value.trim() !== '' && !Number.isNaN(Number(value))) {
        return formatFloat(Number(value));
      }
      return writeFail(path, `expected a number, got ${JSON.stringify(value)}`);
    default:
      return formatInteger(value, field.type, path);
  }
}

function formatUnknownScalar(value: unknown, path: string): string {
  if (typeof value === 'string') return quotePbtxtString(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') {
    return Number.isInteger(value) ? BigInt(value).toString() : formatFloat(value);
  }
  return writeFail(path, 'expected a scalar');
}

function isPlainObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

class Writer {
  readonly lines: string[] = [];

  message(obj: Readonly<Record<string, unknown>>, message: PbMessage | undefined, depth: number, path: string): void {
    for (const [name, value] of Object.entries(obj)) {
      if (value === undefined || value === null) continue;
      const fieldPath = path === '' ? name : `${path}.${name}`;
      if (!IDENT.test(name)) writeFail(fieldPath, 'field names must be identifiers');
      const field = message?.fields[name];
      if (field) this.field(name, field, value, depth, fieldPath);
      else this.unknown(name, value, depth, fieldPath);
    }
  }

  private line(depth: number, text: string): void {
    this.lines.push(`${'  '.repeat(depth)}${text}`);
  }

  private nested(obj: unknown, message: PbMessage | undefined, depth: number, path: string, opener: string): void {
    if (!isPlainObject(obj)) writeFail(path, `expected an object for message field, got ${JSON.stringify(obj)}`);
    if (Object.values(obj).every((v) => v === undefined || v === null)) {
      this.line(depth, `${opener}{ }`);
      return;
    }
    this.line(depth, `${opener}{`);
    this.message(obj, message, depth + 1, path);
    this.line(depth, '}');
  }

  private field(name: string, field: PbField, value: unknown, depth: number, path: string): void {
    if (field.kind === 'map') {
      if (!isPlainObject(value)) writeFail(path, `expected an object for map field, got ${JSON.stringify(value)}`);
      const entries = Object.entries(value).filter(([, v]) => v !== undefined && v !== null);
      if (entries.length === 0) {
        this.line(depth, `${name}: [ ]`);
        return;
      }
      for (const [key, entryValue] of entries) {
        const entryPath = `${path}[${JSON.stringify(key)}]`;
        const keyText =
          field.key === 'string'
            ? quotePbtxtString(key)
            : formatScalar({ kind: 'scalar', type: field.key }, field.key === 'bool' ? key === 'true' : key, entryPath);
        this.line(depth, `${name} {`);
        this.line(depth + 1, `key: ${keyText}`);
        if (field.value.kind === 'message') {
          this.nested(entryValue, field.value.message, depth + 1, entryPath, 'value ');
        } else {
          this.line(depth + 1, `value: ${formatScalar(field.value, entryValue, entryPath)}`);
        }
        this.line(depth, '}');
      }
      return;
    }
    if (field.repeated === true) {
      const items = Array.isArray(value) ? value : [value];
      if (items.length === 0) {
        this.line(depth, `${name}: [ ]`);
        return;
      }
      if (field.kind === 'message') {
        this.line(depth, `${name} [`);
        items.forEach((item, i) => {
          const itemPath = `${path}[${i}]`;
          this.nested(item, field.message, depth + 1, itemPath, '');
          if (i < items.length - 1) {
            const last = this.lines.length - 1;
            this.lines[last] = `${this.lines[last] ?? ''},`;
          }
        });
        this.line(depth, ']');
        return;
      }
      const parts = items.map((item, i) => formatScalar(field, item, `${path}[${i}]`));
      this.line(depth, `${name}: [ ${parts.join(', ')} ]`);
      return;
    }
    if (field.kind === 'message') {
      this.nested(value, field.message, depth, path, `${name} `);
      return;
    }
    this.line(depth, `${name}: ${formatScalar(field, value, path)}`);
  }

  private unknown(name: string, value: unknown, depth: number, path: string): void {
    if (Array.isArray(value)) {
      if (value.length === 0) {
        this.line(depth, `${name}: [ ]`);
      } else if (value.every(isPlainObject)) {
        this.line(depth, `${name} [`);
        value.forEach((item, i) => {
          this.nested(item, undefined, depth + 1, `${path}[${i}]`, '');
          if (i < value.length - 1) {
            const last = this.lines.length - 1;
            this.lines[last] = `${this.lines[last] ?? ''},`;
          }
        });
        this.line(depth, ']');
      } else {
        const parts = value.map((item, i) => formatUnknownScalar(item, `${path}[${i}]`));
        this.line(depth, `${name}: [ ${parts.join(', ')} ]`);
      }
      return;
    }
    if (isPlainObject(value)) {
      this.nested(value, undefined, depth, path, `${name} `);
      return;
    }
    this.line(depth, `${name}: ${formatUnknownScalar(value, path)}`);
  }
}

/**
 * Formats a JSON object as protobuf text format, two spaces per level:
 * repeated scalars as `dims: [ -1, 3 ]`, repeated messages as a `[ {...},
 * {...} ]` list, maps as one `name { key: ... value: ... }` block per entry,
 * strings double-quoted with C escapes, enums as bare names. Fields are
 * written in the object's key order; `undefined`/`null` fields are skipped.
 * A value of the wrong type for its descriptor throws
 * `TritonError('INVALID_ARG', '<path>: <what>')`.
 */
export function formatPbtxt(value: Readonly<Record<string, unknown>>, message: PbMessage | undefined): string {
  const writer = new Writer();
  writer.message(value, message, 0, '');
  return writer.lines.length === 0 ? '' : `${writer.lines.join('\n')}\n`;
}
