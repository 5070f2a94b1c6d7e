/**
 * A network-level mutation fuzzer that compares the two engines of
 * `serveKServe`: the same mutated bytes go to the `native` front ends and to
 * the `node` ones, and their answers must agree (the JS path is the
 * reference for behaviour, docs/kserve.md).
 *
 *   npx tsx bench/fuzz-network.ts [--cases N] [--seed S] [--concurrency C] [--replay I] [--json out.json]
 *
 * One process: a Server (test/models; TRITONSERVER_LIBRARY, else the test
 * core) with identity_fp32, identity_int32 and slow, served twice. Each case
 * is a seed request (valid HTTP/1.1 binary or JSON inferences, metadata
 * GETs, gRPC ModelInfer messages, none using shared memory that exists)
 * with one to three mutations: byte flips, truncation, duplication of a
 * range, random bytes inserted, header values changed, JSON numbers changed
 * (huge, negative, fractional), datatypes swapped, length prefixes changed.
 * Case I of seed S is drawn from a PRNG seeded with (S, I) alone, so a case
 * replays by itself (--replay I) whatever ran around it.
 *
 * HTTP: the bytes over a fresh TCP connection to each engine, the first
 * answer read (1xx skipped) with a timeout; compared are the status and the
 * body (JSON after JSON.parse; a binary inference answer as its JSON header
 * and its bytes). What the connection does afterwards (close or keep-alive,
 * bytes after the first request) is not compared. gRPC: one ModelInfer call
 * over node:http2 with the mutated bytes as its DATA; compared are
 * grpc-status, grpc-message and the response bytes. A disagreement is sent
 * again to both, one after the other with a longer timeout, before it counts
 * (a slow answer on a loaded machine is not a mismatch). Every 250 cases the
 * process RSS is taken and both engines must answer a plain request over
 * each protocol. Exits 1 on a mismatch or when a front end stopped answering.
 */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import http2 from 'node:http2';
import { connect } from 'node:net';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import type { Server } from '../lib/index.js';
import type { KServeFrontends } from '../lib/kserve/index.js';

const ROOT = resolve(import.meta.dirname, '..');
const MODEL_INFER = '/inference.GRPCInferenceService/ModelInfer';

// ---------------------------------------------------------------------------
// A seeded PRNG (mulberry32): small, fast, and the same on every machine.

export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** The PRNG of case `index` under `seed`: independent of every other case. */
  static forCase(seed: number, index: number): Rng {
    // Two rounds of a 32-bit mix, so that neighbouring (seed, index) pairs do not give neighbouring streams.
    let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 0x632be5ab, 0xc2b2ae35);
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return new Rng(h ^ (h >>> 16));
  }

  /** A float in [0, 1). */
  next(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  bytes(n: number): Buffer {
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i++) out[i] = this.int(256);
    return out;
  }
}

// ---------------------------------------------------------------------------
// Byte-level mutations, for both protocols.

type ByteMutation = (bytes: Buffer, rng: Rng) => [Buffer, string];

/** A position in `bytes`, mostly spread evenly, sometimes near the start (where heads and prefixes are). */
function position(bytes: Buffer, rng: Rng): number {
  if (bytes.length === 0) return 0;
  return rng.chance(0.3) ? rng.int(Math.min(bytes.length, 64)) : rng.int(bytes.length);
}

const BYTE_MUTATIONS: Record<string, ByteMutation> = {
  flip: (bytes, rng) => {
    const out = Buffer.from(bytes);
    const at = position(out, rng);
    if (out.length === 0) return [out, 'flip (empty)'];
    const mask = rng.chance(0.5) ? 1 << rng.int(8) : 1 + rng.int(255);
    out[at] = out[at]! ^ mask;
    return [out, `flip @${at} ^0x${mask.toString(16)}`];
  },
  truncate: (bytes, rng) => {
    const at = rng.int(bytes.length + 1);
    return [bytes.subarray(0, at), `truncate to ${at}`];
  },
  duplicate: (bytes, rng) => {
    const from = position(bytes, rng);
    const length = Math.min(bytes.length - from, 1 + rng.int(64));
    const at = rng.int(bytes.length + 1);
    return [Buffer.concat([bytes.subarray(0, at), bytes.subarray(from, from + length), bytes.subarray(at)]), `duplicate [${from},+${length}) @${at}`];
  },
  insert: (bytes, rng) => {
    const at = position(bytes, rng);
    const inserted = rng.chance(0.5) ? rng.bytes(1 + rng.int(8)) : Buffer.from(rng.pick(['\r\n', '\0', ' ', '\r\n\r\n', ',', '"', '0', '9999999999', '-', '\t', ':', '\n']));
    return [Buffer.concat([bytes.subarray(0, at), inserted, bytes.subarray(at)]), `insert @${at} ${inserted.toString('hex')}`];
  },
  erase: (bytes, rng) => {
    const at = position(bytes, rng);
    const length = Math.min(bytes.length - at, 1 + rng.int(16));
    return [Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + length)]), `erase [${at},+${length})`];
  },
};

function byteMutation(bytes: Buffer, rng: Rng): [Buffer, string] {
  // Truncation mostly leaves a request the server waits out: rarer than the others.
  const name = rng.chance(0.08) ? 'truncate' : rng.pick(['flip', 'flip', 'duplicate', 'insert', 'erase']);
  return BYTE_MUTATIONS[name]!(bytes, rng);
}

// ---------------------------------------------------------------------------
// HTTP/1.1 seeds and their structure-aware mutations.

/** Lengths computed when the request is written (unless a mutation set them). */
const AUTO = '\u0000auto';

interface HttpParts {
  requestLine: string;
  headers: Array<[string, string]>;
  /** The JSON header (binary framing) or the whole JSON body. */
  json: string;
  binary: Buffer;
  /** binary: JSON then tensor bytes (Inference-Header-Content-Length); json: JSON only; raw: the bytes only; none: no body. */
  framing: 'binary' | 'json' | 'raw' | 'none';
  encoding: 'identity' | 'gzip' | 'chunked';
}

const f32 = (values: number[]): Buffer => Buffer.from(new Float32Array(values).buffer);
const i32 = (values: number[]): Buffer => Buffer.from(new Int32Array(values).buffer);
const u32 = (values: number[]): Buffer => Buffer.from(new Uint32Array(values).buffer);

function httpSeed(
  path: string,
  body: { inputs: unknown[]; outputs?: unknown[]; id?: string; parameters?: Record<string, unknown> } | undefined,
  binary: Buffer,
  framing: HttpParts['framing'],
  encoding: HttpParts['encoding'] = 'identity',
): HttpParts {
  const headers: Array<[string, string]> = [['Host', 'fuzz']];
  if (framing === 'json') headers.push(['Content-Type', 'application/json']);
  if (framing === 'binary' || framing === 'raw') headers.push(['Inference-Header-Content-Length', AUTO]);
  if (encoding === 'gzip') headers.push(['Content-Encoding', 'gzip']);
  if (framing !== 'none') headers.push(encoding === 'chunked' ? ['Transfer-Encoding', 'chunked'] : ['Content-Length', AUTO]);
  return {
    requestLine: `${framing === 'none' ? 'GET' : 'POST'} ${path} HTTP/1.1`,
    headers,
    json: body === undefined ? '' : JSON.stringify(body),
    binary,
    framing,
    encoding,
  };
}

const binaryOut = [{ name: 'OUTPUT0', parameters: { binary_data: true } }];
const tensor = (name: string, datatype: string, shape: number[], extra: Record<string, unknown>): Record<string, unknown> => ({ name, datatype, shape, ...extra });

/** Valid requests, the ones mutations start from. */
export const HTTP_SEEDS: Array<{ name: string; parts: HttpParts }> = [
  {
    name: 'fp32 binary (native fast path)',
    parts: httpSeed('/v2/models/identity_fp32/infer', { inputs: [tensor('INPUT0', 'FP32', [1, 4], { parameters: { binary_data_size: 16 } })], outputs: binaryOut }, f32([1, 2.5, -3, 4]), 'binary'),
  },
  {
    name: 'int32 binary, outputs unnamed',
    parts: httpSeed('/v2/models/identity_int32/versions/1/infer', { inputs: [tensor('INPUT0', 'INT32', [2, 2], { parameters: { binary_data_size: 16 } })] }, i32([7, -8, 9, 2147483647]), 'binary'),
  },
  {
    name: 'fp32 binary in, JSON out',
    parts: httpSeed(
      '/v2/models/identity_fp32/infer',
      { id: 'req-1', inputs: [tensor('INPUT0', 'FP32', [1, 3], { parameters: { binary_data_size: 12 } })], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }] },
      f32([0.5, 1e10, -0]),
      'binary',
    ),
  },
  {
    name: 'fp32 JSON',
    parts: httpSeed('/v2/models/identity_fp32/infer', { inputs: [tensor('INPUT0', 'FP32', [1, 3], { data: [1, 2.25, -3] })] }, Buffer.alloc(0), 'json'),
  },
  {
    name: 'int32 JSON, binary out, parameters',
    parts: httpSeed(
      '/v2/models/identity_int32/infer',
      { id: 'x', parameters: { priority: 0, binary_data_output: true }, inputs: [tensor('INPUT0', 'INT32', [1, 2], { data: [[1, -2]] })], outputs: binaryOut },
      Buffer.alloc(0),
      'json',
    ),
  },
  {
    name: 'slow binary, two inputs',
    parts: httpSeed(
      '/v2/models/slow/infer',
      {
        inputs: [tensor('INPUT0', 'FP32', [2], { parameters: { binary_data_size: 8 } }), tensor('DELAY_MS', 'UINT32', [1], { parameters: { binary_data_size: 4 } })],
        outputs: binaryOut,
      },
      Buffer.concat([f32([3, 4]), u32([0])]),
      'binary',
    ),
  },
  {
    name: 'raw binary body',
    parts: httpSeed('/v2/models/identity_fp32/infer', undefined, f32([1, 2, 3, 4]), 'raw'),
  },
  {
    name: 'fp32 binary, gzip',
    parts: httpSeed('/v2/models/identity_fp32/infer', { inputs: [tensor('INPUT0', 'FP32', [1, 2], { parameters: { binary_data_size: 8 } })], outputs: binaryOut }, f32([5, 6]), 'binary', 'gzip'),
  },
  {
    name: 'fp32 binary, chunked',
    parts: httpSeed('/v2/models/identity_fp32/infer', { inputs: [tensor('INPUT0', 'FP32', [1, 2], { parameters: { binary_data_size: 8 } })], outputs: binaryOut }, f32([7, 8]), 'binary', 'chunked'),
  },
  {
    name: 'unregistered shared memory',
    parts: httpSeed(
      '/v2/models/identity_fp32/infer',
      { inputs: [tensor('INPUT0', 'FP32', [1, 2], { parameters: { shared_memory_region: 'nowhere', shared_memory_byte_size: 8, shared_memory_offset: 0 } })], outputs: binaryOut },
      Buffer.alloc(0),
      'binary',
    ),
  },
  { name: 'model metadata', parts: httpSeed('/v2/models/identity_int32', undefined, Buffer.alloc(0), 'none') },
  { name: 'model ready', parts: httpSeed('/v2/models/slow/versions/1/ready', undefined, Buffer.alloc(0), 'none') },
  { name: 'server ready', parts: httpSeed('/v2/health/ready', undefined, Buffer.alloc(0), 'none') },
];

/** The request's bytes: the body framed and encoded as `parts` says, AUTO lengths filled in. */
export function writeHttp(parts: HttpParts): Buffer {
  const json = Buffer.from(parts.json, 'latin1');
  let body = parts.framing === 'binary' ? Buffer.concat([json, parts.binary]) : parts.framing === 'json' ? json : parts.framing === 'raw' ? parts.binary : Buffer.alloc(0);
  const inferenceHeader = parts.framing === 'binary' ? json.length : 0;
  if (parts.encoding === 'gzip') body = gzipSync(body);
  if (parts.encoding === 'chunked') {
    const half = body.length >> 1;
    const chunk = (b: Buffer): Buffer => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]);
    body = Buffer.concat([chunk(body.subarray(0, half)), chunk(body.subarray(half)), Buffer.from('0\r\n\r\n')]);
  }
  const head = parts.headers
    .map(([name, value]) => {
      if (value !== AUTO) return `${name}: ${value}`;
      return `${name}: ${/inference-header/i.test(name) ? inferenceHeader : body.length}`;
    })
    .join('\r\n');
  return Buffer.concat([Buffer.from(`${parts.requestLine}\r\n${head}\r\n\r\n`, 'latin1'), body]);
}

const INTERESTING_NUMBERS = [
  '0',
  '-1',
  '1',
  '-0',
  '0.5',
  '1e3',
  '2147483647',
  '2147483648',
  '4294967295',
  '4294967296',
  '9007199254740993',
  '9223372036854775807',
  '9223372036854775808',
  '18446744073709551616',
  '-9223372036854775808',
  '1e308',
  '1e400',
  '-1e400',
  '00',
  '1.0',
  '16',
  '64',
  '65536',
];
const DATATYPES = ['FP32', 'INT32', 'UINT32', 'FP16', 'BF16', 'FP64', 'INT64', 'INT8', 'UINT8', 'BOOL', 'BYTES', 'fp32', 'FP3', 'STRING', ''];

/** A random JSON value, for structure mutations. */
function randomJson(rng: Rng): unknown {
  return rng.pick<() => unknown>([
    () => null,
    () => rng.chance(0.5),
    () => Number(rng.pick(INTERESTING_NUMBERS)),
    () => rng.pick(['', 'OUTPUT0', 'INPUT0', 'FP32', 'x'.repeat(1 + rng.int(300)), '\u00e9\u0000']),
    () => [],
    () => [rng.int(4), rng.int(4)],
    () => ({}),
    () => ({ binary_data_size: rng.int(64) }),
  ])();
}

/** Every object and array inside `value`, with itself: where a structure mutation may act. */
function containers(value: unknown, into: Array<Record<string, unknown> | unknown[]> = []): Array<Record<string, unknown> | unknown[]> {
  if (Array.isArray(value)) {
    into.push(value);
    value.forEach((v) => containers(v, into));
  } else if (value !== null && typeof value === 'object') {
    into.push(value as Record<string, unknown>);
    Object.values(value).forEach((v) => containers(v, into));
  }
  return into;
}

type HttpMutation = (parts: HttpParts, rng: Rng) => string;

const HTTP_MUTATIONS: Record<string, HttpMutation> = {
  // A number of the JSON text replaced, as text: values JSON.stringify cannot write (2^64, 1e400, -0).
  jsonNumber: (parts, rng) => {
    const numbers = [...parts.json.matchAll(/-?\d+(\.\d+)?([eE][-+]?\d+)?/g)];
    if (numbers.length === 0) return 'jsonNumber (none)';
    const chosen = rng.pick(numbers);
    const value = rng.pick(INTERESTING_NUMBERS);
    parts.json = parts.json.slice(0, chosen.index) + value + parts.json.slice(chosen.index + chosen[0].length);
    return `jsonNumber ${chosen[0]}→${value}`;
  },
  datatype: (parts, rng) => {
    const types = [...parts.json.matchAll(/"datatype":"([^"]*)"/g)];
    if (types.length === 0) return 'datatype (none)';
    const chosen = rng.pick(types);
    const value = rng.pick(DATATYPES);
    parts.json = parts.json.slice(0, chosen.index) + `"datatype":"${value}"` + parts.json.slice(chosen.index + chosen[0].length);
    return `datatype ${chosen[1]}→${value}`;
  },
  jsonStructure: (parts, rng) => {
    let value: unknown;
    try {
      value = JSON.parse(parts.json);
    } catch {
      return 'jsonStructure (not JSON)';
    }
    const targets = containers(value);
    if (targets.length === 0) return 'jsonStructure (no containers)';
    const target = rng.pick(targets);
    let what: string;
    if (Array.isArray(target)) {
      const op = rng.int(3);
      if (op === 0 && target.length > 0) {
        target.splice(rng.int(target.length), 1);
        what = 'array element removed';
      } else if (op === 1 && target.length > 0) {
        target.push(structuredClone(target[rng.int(target.length)]));
        what = 'array element repeated';
      } else {
        target.push(randomJson(rng));
        what = 'array element added';
      }
    } else {
      const keys = Object.keys(target);
      const op = rng.int(3);
      if (op === 0 && keys.length > 0) {
        const key = rng.pick(keys);
        delete target[key];
        what = `key ${key} removed`;
      } else if (op === 1 && keys.length > 0) {
        const key = rng.pick(keys);
        target[key] = randomJson(rng);
        what = `key ${key} = ${JSON.stringify(target[key])?.slice(0, 40)}`;
      } else {
        const key = rng.pick(['parameters', 'binary_data_size', 'shape', 'data', 'datatype', 'name', 'outputs', 'id', 'classification', 'binary_data', 'shared_memory_region', 'timeout', 'sequence_id', 'x']);
        target[key] = randomJson(rng);
        what = `key ${key} set to ${JSON.stringify(target[key])?.slice(0, 40)}`;
      }
    }
    parts.json = JSON.stringify(value);
    return `jsonStructure ${what}`;
  },
  headerValue: (parts, rng) => {
    const op = rng.int(4);
    if (op === 0 && parts.headers.length > 0) {
      const index = rng.int(parts.headers.length);
      const [name, value] = parts.headers[index]!;
      // An AUTO length's value is what the request would be written with.
      const written = value === AUTO ? new RegExp(`\r\n${name}: (\\d+)`).exec(writeHttp(parts).toString('latin1'))?.[1] : value;
      const current = Number(written) || 0;
      const next = rng.pick([
        () => String(current + 1),
        () => String(Math.max(0, current - 1)),
        () => '0',
        () => '-1',
        () => rng.pick(INTERESTING_NUMBERS),
        () => '',
        () => ` ${value === AUTO ? 0 : value}`,
        () => 'abc',
        () => '0x10',
        () => '1, 1',
        () => String(rng.int(100_000)),
      ])();
      parts.headers[index] = [name, next];
      return `header ${name}: ${next}`;
    }
    if (op === 1 && parts.headers.length > 0) {
      const [name] = parts.headers.splice(rng.int(parts.headers.length), 1)[0]!;
      return `header ${name} removed`;
    }
    const added = rng.pick<[string, string]>([
      ['Transfer-Encoding', 'chunked'],
      ['Content-Encoding', rng.pick(['gzip', 'deflate', 'br', 'identity', 'GZIP'])],
      ['Connection', 'close'],
      ['Expect', '100-continue'],
      ['Content-Type', rng.pick(['application/json', 'application/octet-stream', 'text/plain'])],
      ['Inference-Header-Content-Length', String(rng.int(parts.json.length + 8))],
      ['Content-Length', String(rng.int(writeHttp(parts).length))],
      ['Accept-Encoding', rng.pick(['gzip', 'deflate', 'gzip;q=0.5, deflate', '*'])],
      ['Origin', 'http://fuzz'],
      ['X-Fuzz', 'x'.repeat(rng.int(2000))],
    ]);
    parts.headers.splice(1 + rng.int(parts.headers.length), 0, added);
    return `header ${added[0]}: ${added[1].slice(0, 40)} added`;
  },
  requestLine: (parts, rng) => {
    const [method = '', path = '', version = ''] = parts.requestLine.split(' ');
    const op = rng.int(3);
    if (op === 0) parts.requestLine = `${rng.pick(['GET', 'PUT', 'HEAD', 'OPTIONS', 'DELETE', 'PATCH', 'post', 'POST'])} ${path} ${version}`;
    else if (op === 1) {
      const paths = [
        path.replace('identity_fp32', 'identity_int32'),
        path.replace(/identity_\w+|slow/, 'missing'),
        path.replace('/infer', '/versions/2/infer'),
        path.replace('/infer', '/versions/-1/infer'),
        path.replace('/infer', '/generate'),
        `${path}?x=1`,
        `${path}/`,
        path.replace('/v2/', '/v2//'),
        path.replace('/models/', '/models/%69dentity_fp32/..'),
        path.toUpperCase(),
        '*',
      ];
      parts.requestLine = `${method} ${rng.pick(paths)} ${version}`;
    } else parts.requestLine = `${method} ${path} ${rng.pick(['HTTP/1.0', 'HTTP/1.2', 'HTTP/2.0', 'http/1.1'])}`;
    return `request line ${parts.requestLine}`;
  },
  binarySize: (parts, rng) => {
    const change = rng.pick([-4, -1, 1, 4, 64]);
    parts.binary = change < 0 ? parts.binary.subarray(0, Math.max(0, parts.binary.length + change)) : Buffer.concat([parts.binary, rng.bytes(change)]);
    return `binary ${change > 0 ? '+' : ''}${change} bytes`;
  },
};

export interface FuzzCase {
  index: number;
  protocol: 'http' | 'grpc';
  seed: string;
  mutations: string[];
  /** HTTP: the whole request; gRPC: the call's DATA. */
  bytes: Buffer;
  /** gRPC: the call's headers beside :path etc. */
  grpcHeaders?: Record<string, string>;
}

function httpCase(index: number, rng: Rng): FuzzCase {
  const seed = rng.pick(HTTP_SEEDS);
  const parts: HttpParts = structuredClone(seed.parts);
  parts.binary = Buffer.from(seed.parts.binary);
  const mutations: string[] = [];
  const count = 1 + rng.int(3);
  // Structure first (each write keeps lengths consistent unless a mutation set them), bytes last.
  const structural = ['jsonNumber', 'jsonNumber', 'datatype', 'jsonStructure', 'jsonStructure', 'headerValue', 'headerValue', 'requestLine', 'binarySize'];
  const byteLevel: number[] = [];
  for (let i = 0; i < count; i++) {
    if (rng.chance(0.3)) byteLevel.push(i);
    else mutations.push(HTTP_MUTATIONS[rng.pick(structural)]!(parts, rng));
  }
  let bytes = writeHttp(parts);
  for (const _ of byteLevel) {
    const [next, what] = byteMutation(bytes, rng);
    bytes = next;
    mutations.push(what);
  }
  return { index, protocol: 'http', seed: seed.name, mutations, bytes };
}

// ---------------------------------------------------------------------------
// gRPC ModelInfer messages, written by hand (so that any field can be wrong).

type ParamValue = { bool: boolean } | { int64: bigint } | { string: string } | { double: number } | { uint64: bigint };
type Params = Array<[string, ParamValue]>;

interface Contents {
  /** InferTensorContents' field: 1 bool, 2 int, 3 int64, 4 uint, 5 uint64, 6 fp32, 7 fp64, 8 bytes. */
  field: number;
  values: number[];
}

interface PbInput {
  name: string;
  datatype: string;
  shape: bigint[];
  parameters: Params;
  contents?: Contents;
}

interface PbRequest {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Params;
  inputs: PbInput[];
  outputs: Array<{ name: string; parameters: Params }>;
  raw: Buffer[];
}

function varint(value: bigint): Buffer {
  let v = BigInt.asUintN(64, value);
  const out: number[] = [];
  do {
    const byte = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v > 0n ? byte | 0x80 : byte);
  } while (v > 0n);
  return Buffer.from(out);
}

const tag = (field: number, wire: number): Buffer => varint(BigInt((field << 3) | wire));
const lengthDelimited = (field: number, bytes: Buffer): Buffer => Buffer.concat([tag(field, 2), varint(BigInt(bytes.length)), bytes]);
const stringField = (field: number, text: string): Buffer => (text === '' ? Buffer.alloc(0) : lengthDelimited(field, Buffer.from(text)));

function paramMessage(value: ParamValue): Buffer {
  if ('bool' in value) return Buffer.concat([tag(1, 0), varint(value.bool ? 1n : 0n)]);
  if ('int64' in value) return Buffer.concat([tag(2, 0), varint(value.int64)]);
  if ('string' in value) return lengthDelimited(3, Buffer.from(value.string));
  if ('double' in value) {
    const d = Buffer.alloc(8);
    d.writeDoubleLE(value.double);
    return Buffer.concat([tag(4, 1), d]);
  }
  return Buffer.concat([tag(5, 0), varint(value.uint64)]);
}

const paramsField = (field: number, params: Params): Buffer =>
  Buffer.concat(params.map(([key, value]) => lengthDelimited(field, Buffer.concat([stringField(1, key), lengthDelimited(2, paramMessage(value))]))));

function contentsMessage({ field, values }: Contents): Buffer {
  if (field === 8) return Buffer.concat(values.map((v) => lengthDelimited(8, Buffer.from(String(v)))));
  let packed: Buffer;
  if (field === 6) packed = f32(values);
  else if (field === 7) packed = Buffer.from(new Float64Array(values).buffer);
  else packed = Buffer.concat(values.map((v) => varint(BigInt(Math.trunc(v)))));
  return lengthDelimited(field, packed);
}

export function encodePb(request: PbRequest): Buffer {
  const inputs = request.inputs.map((input) =>
    lengthDelimited(
      5,
      Buffer.concat([
        stringField(1, input.name),
        stringField(2, input.datatype),
        input.shape.length > 0 ? lengthDelimited(3, Buffer.concat(input.shape.map(varint))) : Buffer.alloc(0),
        paramsField(4, input.parameters),
        input.contents ? lengthDelimited(5, contentsMessage(input.contents)) : Buffer.alloc(0),
      ]),
    ),
  );
  const outputs = request.outputs.map((output) => lengthDelimited(6, Buffer.concat([stringField(1, output.name), paramsField(2, output.parameters)])));
  return Buffer.concat([
    stringField(1, request.model_name),
    stringField(2, request.model_version),
    stringField(3, request.id),
    paramsField(4, request.parameters),
    ...inputs,
    ...outputs,
    ...request.raw.map((raw) => lengthDelimited(7, raw)),
  ]);
}

function grpcFrame(message: Buffer, flag = 0): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

const input = (name: string, datatype: string, shape: number[], parameters: Params = [], contents?: Contents): PbInput => ({
  name,
  datatype,
  shape: shape.map(BigInt),
  parameters,
  ...(contents ? { contents } : {}),
});

function pbSeed(model: string, inputs: PbInput[], raw: Buffer[], extra: Partial<PbRequest> = {}): PbRequest {
  return { model_name: model, model_version: '', id: '', parameters: [], inputs, outputs: [], raw, ...extra };
}

const EMPTY_FINAL: Params = [['triton_enable_empty_final_response', { bool: true }]];

export const GRPC_SEEDS: Array<{ name: string; request: PbRequest }> = [
  {
    name: 'fp32 raw, as perf_analyzer sends it (native fast path)',
    request: pbSeed('identity_fp32', [input('INPUT0', 'FP32', [1, 4])], [f32([1, 2, 3, 4])], { parameters: EMPTY_FINAL, outputs: [{ name: 'OUTPUT0', parameters: [] }] }),
  },
  { name: 'int32 raw, outputs unnamed', request: pbSeed('identity_int32', [input('INPUT0', 'INT32', [2, 2])], [i32([1, -1, 2147483647, -2147483648])]) },
  { name: 'fp32 typed contents', request: pbSeed('identity_fp32', [input('INPUT0', 'FP32', [1, 3], [], { field: 6, values: [0.5, -1, 3] })], []) },
  { name: 'int32 typed contents', request: pbSeed('identity_int32', [input('INPUT0', 'INT32', [1, 3], [], { field: 2, values: [-5, 0, 99] })], []) },
  {
    name: 'slow raw, two inputs',
    request: pbSeed('slow', [input('INPUT0', 'FP32', [2]), input('DELAY_MS', 'UINT32', [1])], [f32([1, 2]), u32([0])], { outputs: [{ name: 'OUTPUT0', parameters: [] }] }),
  },
  {
    name: 'fp32 raw, version, id, parameters',
    request: pbSeed('identity_fp32', [input('INPUT0', 'FP32', [1, 2])], [f32([9, 8])], {
      model_version: '1',
      id: 'call-7',
      parameters: [
        ['priority', { int64: 0n }],
        ['x-note', { string: 'hi' }],
      ],
      outputs: [{ name: 'OUTPUT0', parameters: [['binary_data', { bool: true }]] }],
    }),
  },
  {
    name: 'unregistered shared memory',
    request: pbSeed(
      'identity_fp32',
      [
        input('INPUT0', 'FP32', [1, 2], [
          ['shared_memory_region', { string: 'nowhere' }],
          ['shared_memory_byte_size', { int64: 8n }],
        ]),
      ],
      [],
    ),
  },
  { name: 'empty message', request: pbSeed('', [], []) },
];

const INTERESTING_DIMS = [0n, -1n, 1n, 2n, 3n, 16n, 2147483647n, 2147483648n, 4294967296n, 1n << 40n, 9223372036854775807n, -9223372036854775808n];

type GrpcMutation = (request: PbRequest, rng: Rng) => string;

const GRPC_MUTATIONS: Record<string, GrpcMutation> = {
  dims: (request, rng) => {
    const target = request.inputs.length > 0 ? rng.pick(request.inputs) : undefined;
    if (!target) return 'dims (no input)';
    const op = rng.int(3);
    if (op === 0 && target.shape.length > 0) {
      const at = rng.int(target.shape.length);
      target.shape[at] = rng.pick(INTERESTING_DIMS);
      return `${target.name} dim ${at} = ${target.shape[at]}`;
    }
    if (op === 1 && target.shape.length > 0) {
      target.shape.splice(rng.int(target.shape.length), 1);
      return `${target.name} dim removed`;
    }
    target.shape.push(rng.pick(INTERESTING_DIMS));
    return `${target.name} dim added`;
  },
  datatype: (request, rng) => {
    const target = request.inputs.length > 0 ? rng.pick(request.inputs) : undefined;
    if (!target) return 'datatype (no input)';
    const before = target.datatype;
    target.datatype = rng.pick(DATATYPES);
    return `datatype ${before}→${target.datatype}`;
  },
  // Strings of the message, NUL characters included (the C API reads names as C strings).
  names: (request, rng) => {
    const op = rng.int(5);
    if (op === 0) request.model_name = rng.pick(['identity_int32', 'identity_fp32', 'slow', 'missing', '', 'identity_fp32\u0000', 'identity_fp32\u0000x', '\u00e9']);
    else if (op === 1) request.model_version = rng.pick(['', '1', '2', '-1', 'abc', '99999999999999999999', '1\u0000']);
    else if (op === 2) request.id = rng.pick(['', 'id', 'a\u0000b', '\u00ff'.repeat(3), 'x'.repeat(1000)]);
    else if (op === 3 && request.outputs.length > 0) rng.pick(request.outputs).name = rng.pick(['OUTPUT0', 'OUTPUT0\u0000', '', 'INPUT0']);
    else if (request.inputs.length > 0) rng.pick(request.inputs).name = rng.pick(['INPUT0', 'INPUT1', '', 'OUTPUT0', 'DELAY_MS', 'IGNORE_CANCEL', 'INPUT0\u0000']);
    return `names ${JSON.stringify([request.model_name, request.model_version, request.id.slice(0, 20), request.inputs.map((i) => i.name), request.outputs.map((o) => o.name)])}`;
  },
  raw: (request, rng) => {
    const op = rng.int(4);
    if (op === 0 && request.raw.length > 0) {
      request.raw.splice(rng.int(request.raw.length), 1);
      return 'raw content removed';
    }
    if (op === 1) {
      request.raw.push(rng.bytes(rng.pick([0, 1, 4, 8, 16])));
      return 'raw content added';
    }
    if (op === 2 && request.raw.length > 0) {
      const at = rng.int(request.raw.length);
      const change = rng.pick([-4, -1, 1, 4, 32]);
      const raw = request.raw[at]!;
      request.raw[at] = change < 0 ? raw.subarray(0, Math.max(0, raw.length + change)) : Buffer.concat([raw, rng.bytes(change)]);
      return `raw ${at} ${change > 0 ? '+' : ''}${change} bytes`;
    }
    // Raw and typed contents swapped, or both.
    const target = request.inputs[0];
    if (!target) return 'raw (no input)';
    if (target.contents) {
      request.raw.push(f32(target.contents.values.map(Number)));
      if (rng.chance(0.5)) delete target.contents;
      return 'typed contents made raw';
    }
    target.contents = { field: rng.pick([1, 2, 3, 4, 5, 6, 7, 8]), values: [1, 2, 3, 4].slice(0, 1 + rng.int(4)) };
    if (rng.chance(0.5)) request.raw = [];
    return `typed contents (field ${target.contents.field}) added`;
  },
  parameters: (request, rng) => {
    const key = rng.pick([
      'priority',
      'timeout',
      'sequence_id',
      'sequence_start',
      'sequence_end',
      'binary_data_output',
      'triton_enable_empty_final_response',
      'shared_memory_region',
      'shared_memory_byte_size',
      'shared_memory_offset',
      'classification',
      'binary_data',
      'x',
    ]);
    const value = rng.pick<ParamValue>([
      { bool: rng.chance(0.5) },
      { int64: rng.pick(INTERESTING_DIMS) },
      { uint64: BigInt.asUintN(64, rng.pick(INTERESTING_DIMS)) },
      { string: rng.pick(['', 'x', 'nowhere', '1']) },
      { double: rng.pick([0, -1, 0.5, 1e308, Number.NaN]) },
    ]);
    const where = rng.int(3);
    if (where === 0 || request.inputs.length === 0) request.parameters.push([key, value]);
    else if (where === 1) rng.pick(request.inputs).parameters.push([key, value]);
    else {
      if (request.outputs.length === 0) request.outputs.push({ name: 'OUTPUT0', parameters: [] });
      rng.pick(request.outputs).parameters.push([key, value]);
    }
    return `parameter ${key} = ${JSON.stringify(value, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))} (${['request', 'input', 'output'][where]})`;
  },
  outputs: (request, rng) => {
    if (request.outputs.length > 0 && rng.chance(0.5)) {
      request.outputs.splice(rng.int(request.outputs.length), 1);
      return 'output removed';
    }
    request.outputs.push({ name: rng.pick(['OUTPUT0', 'OUTPUT1', '', 'INPUT0']), parameters: [] });
    return `output ${request.outputs[request.outputs.length - 1]?.name} requested`;
  },
};

/** Mutations of the 5-byte prefix of a framed message. */
function prefixMutation(framed: Buffer, rng: Rng): [Buffer, string] {
  const out = Buffer.from(framed);
  if (out.length < 5) return [out, 'prefix (too short)'];
  if (rng.chance(0.3)) {
    out[0] = rng.pick([1, 2, 0x80, 0xff]);
    return [out, `compressed flag ${out[0]}`];
  }
  const length = out.readUInt32BE(1);
  const next = rng.pick([length + 1, Math.max(0, length - 1), 0, 0xffffffff, 64 * 1024 * 1024 + 1, length + 100, rng.int(length + 1)]);
  out.writeUInt32BE(next >>> 0, 1);
  return [out, `length prefix ${length}→${next}`];
}

function grpcCase(index: number, rng: Rng): FuzzCase {
  const seed = rng.pick(GRPC_SEEDS);
  const request: PbRequest = structuredClone(seed.request);
  request.raw = seed.request.raw.map((raw) => Buffer.from(raw));
  const mutations: string[] = [];
  const count = 1 + rng.int(3);
  const later: Array<'bytes' | 'prefix'> = [];
  for (let i = 0; i < count; i++) {
    const roll = rng.next();
    if (roll < 0.2) later.push('bytes');
    else if (roll < 0.3) later.push('prefix');
    else mutations.push(GRPC_MUTATIONS[rng.pick(['dims', 'dims', 'datatype', 'names', 'raw', 'raw', 'parameters', 'outputs'])]!(request, rng));
  }
  let message = encodePb(request);
  // Byte mutations go inside the message; the prefix is written for what is left, unless it is the one mutated.
  for (const _ of later.filter((w) => w === 'bytes')) {
    const [next, description] = byteMutation(message, rng);
    message = next;
    mutations.push(description);
  }
  let bytes = grpcFrame(message);
  for (const _ of later.filter((w) => w === 'prefix')) {
    const [next, description] = prefixMutation(bytes, rng);
    bytes = next;
    mutations.push(description);
  }
  // Now and then, headers a client may send: compression, deadlines, another content type.
  const grpcHeaders: Record<string, string> = {};
  if (rng.chance(0.05)) {
    const [name, value] = rng.pick<[string, string]>([
      ['grpc-encoding', rng.pick(['gzip', 'deflate', 'identity', 'snappy'])],
      // Deadlines far enough away not to race the answer; none past 2^31 ms, which Node's timers take as 1 ms (see the report).
      ['grpc-timeout', rng.pick(['100S', '9999S', 'abc', '1'])],
      ['content-type', rng.pick(['application/grpc+proto', 'application/json', 'application/grpcx'])],
      ['grpc-accept-encoding', 'gzip'],
    ]);
    grpcHeaders[name] = value;
    mutations.push(`header ${name}: ${value}`);
  }
  return { index, protocol: 'grpc', seed: seed.name, mutations, bytes, grpcHeaders };
}

/** Case `index` of `seed`: the same bytes every time. */
export function makeCase(seed: number, index: number): FuzzCase {
  const rng = Rng.forCase(seed, index);
  return rng.chance(0.55) ? httpCase(index, rng) : grpcCase(index, rng);
}

// ---------------------------------------------------------------------------
// Sending a case and reading what came back.

export type HttpOutcome =
  | { kind: 'answer'; status: number; headers: Record<string, string>; body: Buffer }
  | { kind: 'none'; how: 'closed' | 'timeout' | 'error' }
  | { kind: 'partial'; how: 'closed' | 'timeout' | 'error'; head: string };

/** Parses the first final response in `received` (1xx skipped): complete, or undefined while more is needed. */
function parseResponse(received: Buffer, bodyless: boolean, closed: boolean): HttpOutcome | undefined {
  let start = 0;
  for (;;) {
    const end = received.indexOf('\r\n\r\n', start);
    if (end === -1) return undefined;
    const lines = received.subarray(start, end).toString('latin1').split('\r\n');
    const status = Number(lines[0]?.slice(9, 12));
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const bodyStart = end + 4;
    if (status >= 100 && status < 200) {
      start = bodyStart;
      continue;
    }
    if (bodyless || status === 204 || status === 304) return { kind: 'answer', status, headers, body: Buffer.alloc(0) };
    if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const chunks: Buffer[] = [];
      let at = bodyStart;
      for (;;) {
        const line = received.indexOf('\r\n', at);
        if (line === -1) return undefined;
        const size = parseInt(received.subarray(at, line).toString('latin1'), 16);
        if (Number.isNaN(size)) return { kind: 'answer', status, headers, body: received.subarray(bodyStart) };
        if (size === 0) return { kind: 'answer', status, headers, body: Buffer.concat(chunks) };
        if (received.length < line + 2 + size + 2) return undefined;
        chunks.push(received.subarray(line + 2, line + 2 + size));
        at = line + 2 + size + 2;
      }
    }
    if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      return received.length >= bodyStart + length ? { kind: 'answer', status, headers, body: received.subarray(bodyStart, bodyStart + length) } : undefined;
    }
    // Neither framing: the body runs to the close.
    return closed ? { kind: 'answer', status, headers, body: received.subarray(bodyStart) } : undefined;
  }
}

/** Sends `bytes` on a fresh connection and reads the first answer; with `splitAt`, in two writes 50 ms apart. */
export function sendHttp(port: number, bytes: Buffer, timeoutMs: number, splitAt?: number): Promise<HttpOutcome> {
  const bodyless = bytes.subarray(0, 5).toString('latin1') === 'HEAD ';
  return new Promise((done) => {
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    let received = Buffer.alloc(0);
    let finished = false;
    const finish = (outcome: HttpOutcome): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      socket.destroy();
      done(outcome);
    };
    const incomplete = (how: 'closed' | 'timeout' | 'error'): HttpOutcome =>
      received.length === 0 ? { kind: 'none', how } : { kind: 'partial', how, head: received.subarray(0, 200).toString('latin1') };
    const timer = setTimeout(() => finish(incomplete('timeout')), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const outcome = parseResponse(received, bodyless, false);
      if (outcome) finish(outcome);
    });
    socket.on('error', () => finish(incomplete('error')));
    socket.on('close', () => finish(parseResponse(received, bodyless, true) ?? incomplete('closed')));
    socket.on('connect', () => {
      if (splitAt === undefined) socket.write(bytes);
      else {
        socket.write(bytes.subarray(0, splitAt));
        setTimeout(() => socket.writable && socket.write(bytes.subarray(splitAt)), 50);
      }
    });
  });
}

/**
 * Where the first request in `bytes` ends by its own framing (Content-Length,
 * or chunked), when that is plain to see: what follows it is the next
 * pipelined request as far as the server is concerned. Undefined where the
 * framing is unclear (no blank line, an odd Content-Length), the server then
 * being the only judge.
 */
export function firstRequestEnd(bytes: Buffer): number | undefined {
  const head = bytes.indexOf('\r\n\r\n');
  if (head === -1) return undefined;
  const lines = bytes.subarray(0, head).toString('latin1').split('\r\n').slice(1);
  const values = (name: string): string[] => lines.filter((l) => l.toLowerCase().startsWith(`${name}:`)).map((l) => l.slice(name.length + 1).trim());
  const transfer = values('transfer-encoding');
  const lengths = values('content-length');
  const bodyStart = head + 4;
  if (transfer.length > 0) {
    if (transfer.length !== 1 || transfer[0]!.toLowerCase() !== 'chunked' || lengths.length > 0) return undefined;
    let at = bodyStart;
    for (;;) {
      const line = bytes.indexOf('\r\n', at);
      if (line === -1) return undefined;
      const text = bytes.subarray(at, line).toString('latin1');
      if (!/^[0-9a-fA-F]+$/.test(text)) return undefined;
      const size = parseInt(text, 16);
      if (size === 0) return bytes.subarray(line + 2, line + 4).toString('latin1') === '\r\n' ? line + 4 : undefined;
      at = line + 2 + size + 2;
      if (at > bytes.length) return undefined;
    }
  }
  if (lengths.length === 0) return bodyStart;
  if (lengths.length !== 1 || !/^\d{1,9}$/.test(lengths[0]!)) return undefined;
  return bodyStart + Number(lengths[0]);
}

/**
 * The request in `bytes` made whole, when it is not: its head ended, or its
 * body filled up to its Content-Length with zeros. Undefined when it is
 * whole already or its framing is unclear.
 */
export function completedRequest(bytes: Buffer): Buffer | undefined {
  if (bytes.indexOf('\r\n\r\n') === -1) {
    const tail = bytes.subarray(-2).toString('latin1');
    return Buffer.concat([bytes, Buffer.from(tail === '\r\n' ? '\r\n' : tail.endsWith('\r') ? '\n\r\n' : '\r\n\r\n')]);
  }
  const head = bytes.indexOf('\r\n\r\n');
  if (/\r\ntransfer-encoding:/i.test(bytes.subarray(0, head + 2).toString('latin1'))) return undefined;
  const end = firstRequestEnd(bytes);
  return end !== undefined && end > bytes.length ? Buffer.concat([bytes, Buffer.alloc(end - bytes.length)]) : undefined;
}

export interface GrpcOutcome {
  /** grpc-status, or `rst N` (reset without a status), `timeout`, `error: …`. */
  status: string;
  message: string;
  data: Buffer;
}

/** One gRPC connection per engine, made again when it went away. */
export class GrpcChannel {
  #session: http2.ClientHttp2Session | undefined;

  constructor(readonly port: number) {}

  session(): http2.ClientHttp2Session {
    if (this.#session === undefined || this.#session.closed || this.#session.destroyed) {
      const session = http2.connect(`http://127.0.0.1:${this.port}`);
      session.on('error', () => undefined);
      session.on('close', () => {
        if (this.#session === session) this.#session = undefined;
      });
      this.#session = session;
    }
    return this.#session;
  }

  close(): void {
    this.#session?.close();
  }
}

export function sendGrpc(channel: GrpcChannel, data: Buffer, headers: Record<string, string>, timeoutMs: number): Promise<GrpcOutcome> {
  return new Promise((done) => {
    let stream: http2.ClientHttp2Stream;
    try {
      stream = channel.session().request({ ':method': 'POST', ':path': MODEL_INFER, 'content-type': 'application/grpc', te: 'trailers', ...headers });
    } catch (error) {
      done({ status: `error: ${(error as Error).message}`, message: '', data: Buffer.alloc(0) });
      return;
    }
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    let finished = false;
    const finish = (status: string | undefined): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      const got = trailers['grpc-status'] ?? responseHeaders['grpc-status'];
      const message = trailers['grpc-message'] ?? responseHeaders['grpc-message'];
      done({ status: status ?? (got !== undefined ? String(got) : `rst ${stream.rstCode ?? '?'}`), message: String(message ?? ''), data: Buffer.concat(chunks) });
    };
    const timer = setTimeout(() => {
      finish('timeout');
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }, timeoutMs);
    stream.on('response', (h) => (responseHeaders = h));
    stream.on('trailers', (t) => (trailers = t));
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('error', () => undefined);
    stream.on('close', () => finish(undefined));
    stream.end(data);
  });
}

// ---------------------------------------------------------------------------
// Comparing two answers.

/** A body as what it means: JSON parsed, a binary inference answer as its JSON header and its bytes, else the bytes. */
function meaning(headers: Record<string, string>, body: Buffer): unknown {
  const inferenceHeader = headers['inference-header-content-length'];
  if (inferenceHeader !== undefined) {
    const split = Number(inferenceHeader);
    return { json: meaning({}, body.subarray(0, split)), binary: body.subarray(split).toString('hex') };
  }
  try {
    return { json: JSON.parse(body.toString('utf8')) as unknown };
  } catch {
    return { bytes: body.toString('latin1') };
  }
}

export function sameHttp(a: HttpOutcome, b: HttpOutcome): boolean {
  // Nothing answered is nothing answered, however the connection ended.
  if (a.kind !== 'answer' || b.kind !== 'answer') return a.kind === b.kind && (a.kind === 'none' || (a.kind === 'partial' && b.kind === 'partial' && a.head.slice(0, 12) === b.head.slice(0, 12)));
  return a.status === b.status && isDeepStrictEqual(meaning(a.headers, a.body), meaning(b.headers, b.body));
}

export const sameGrpc = (a: GrpcOutcome, b: GrpcOutcome): boolean => a.status === b.status && a.message === b.message && a.data.equals(b.data);

/**
 * A request carrying Triton's own `timeout` parameter (microseconds; the
 * mutations give it values from 0.5) that one engine's request finished
 * within and the other's did not: which wins is a race with the scheduler,
 * not a difference between the engines.
 */
function raceWithTimeout(c: FuzzCase, a: HttpOutcome | GrpcOutcome, b: HttpOutcome | GrpcOutcome): boolean {
  if (!c.mutations.some((m) => m.startsWith('parameter timeout') || m.includes('key timeout'))) return false;
  const succeeded = (o: HttpOutcome | GrpcOutcome): boolean => ('kind' in o ? o.kind === 'answer' && o.status === 200 : o.status === '0');
  // Triton's request timeout: CANCELLED, or UNAVAILABLE "Request timeout expired" (HTTP 503 / 400 as the front end maps it).
  const expired = (o: HttpOutcome | GrpcOutcome): boolean =>
    'kind' in o ? o.kind === 'answer' && (o.status === 503 || /timeout|cancel/i.test(o.body.toString('latin1'))) : o.status === '1' || o.status === '14';
  return (succeeded(a) && expired(b)) || (succeeded(b) && expired(a));
}

/** A timeout on one side only: worth a second, patient try. */
const timedOut = (o: HttpOutcome | GrpcOutcome): boolean => ('kind' in o ? o.kind !== 'answer' && o.how === 'timeout' : o.status === 'timeout');

export function describeOutcome(o: HttpOutcome | GrpcOutcome): string {
  if ('kind' in o) {
    if (o.kind === 'none') return `no answer (${o.how})`;
    if (o.kind === 'partial') return `partial answer (${o.how}): ${JSON.stringify(o.head)}`;
    const body = o.body.toString('latin1');
    return `${o.status} ${JSON.stringify(body.length > 400 ? `${body.slice(0, 400)}…` : body)}`;
  }
  return `grpc-status ${o.status} message ${JSON.stringify(o.message)} data ${o.data.length > 200 ? `${o.data.subarray(0, 200).toString('hex')}…` : o.data.toString('hex')}`;
}

// ---------------------------------------------------------------------------
// The run.

export interface Mismatch {
  case: FuzzCase;
  native: string;
  node: string;
}

export interface FuzzReport {
  cases: number;
  seed: number;
  seconds: number;
  casesPerSecond: number;
  mismatches: Mismatch[];
  /** Disagreements that a second, patient try resolved (timing on a loaded machine). */
  resolvedOnRetry: number;
  /** Disagreements on whether a request beat its own `timeout` parameter (raceWithTimeout). */
  timeoutRaces: number;
  /** Disagreements only in what followed the first request on the connection (its answer the same). */
  connectionLevel: number;
  /** Requests left unfinished that one engine answered early and the other waited on (the same answers once finished). */
  earlyAnswers: number;
  /** Disagreements that went away with the head and the body sent in separate writes (see runOne), and the first few. */
  segmentation: number;
  segmentationExamples: Mismatch[];
  /** Health checks every `checkEvery` cases: RSS (MB) and whether both engines answered both protocols. */
  checks: Array<{ after: number; rssMB: number; answered: boolean; failures: string[] }>;
  frontendsAnswered: boolean;
  rssGrowthMB: number;
  /** How often each kind of answer came: HTTP status or gRPC status; and the first case of each (to replay). */
  outcomes: Record<string, number>;
  firstCaseOf: Record<string, number>;
  answeredNatively: { http: number; grpc: number };
}

export interface FuzzOptions {
  cases: number;
  seed: number;
  concurrency?: number;
  checkEvery?: number;
  /** First-try timeout per exchange (ms). */
  timeoutMs?: number;
  /** Only these case indices (--replay). */
  only?: number[];
  log?: (line: string) => void;
}

interface Rig {
  server: Server;
  native: KServeFrontends;
  node: KServeFrontends;
  close(): Promise<void>;
}

async function startRig(): Promise<Rig> {
  const testCore = resolve(ROOT, 'build/testcore/libtritonserver.so');
  if (!process.env.TRITONSERVER_LIBRARY && existsSync(testCore)) process.env.TRITONSERVER_LIBRARY = testCore;
  // Imported here: the library is looked up from the environment set just above.
  const { Server } = await import('../lib/index.js');
  const { serveKServe } = await import('../lib/kserve/index.js');
  const server = await Server.start({
    modelRepository: resolve(ROOT, 'test/models'),
    modelControlMode: 'explicit',
    startupModels: ['identity_fp32', 'identity_int32', 'slow'],
    log: { info: false, warn: false, error: false },
  });
  const native = await serveKServe(server, { http: { port: 0, engine: 'native' }, grpc: { port: 0, engine: 'native' } });
  const node = await serveKServe(server, { http: { port: 0, engine: 'node' }, grpc: { port: 0, engine: 'node' } });
  return {
    server,
    native,
    node,
    close: async () => {
      await Promise.all([native.close(), node.close()]);
      await server.stop();
    },
  };
}

const HEALTH = Buffer.from('GET /v2/health/live HTTP/1.1\r\nHost: fuzz\r\n\r\n');

/** Both engines answer a plain request over each protocol. */
async function healthCheck(rig: Rig, channels: { native: GrpcChannel; node: GrpcChannel }): Promise<string[]> {
  const failures: string[] = [];
  const valid = writeHttp(HTTP_SEEDS[0]!.parts);
  const call = grpcFrame(encodePb(GRPC_SEEDS[0]!.request));
  for (const engine of ['native', 'node'] as const) {
    const port = rig[engine].http?.port ?? 0;
    for (const [what, bytes] of [
      ['health', HEALTH],
      ['inference', valid],
    ] as const) {
      const answer = await sendHttp(port, bytes, 10_000);
      if (answer.kind !== 'answer' || answer.status !== 200) failures.push(`${engine} HTTP ${what}: ${describeOutcome(answer)}`);
    }
    const answer = await sendGrpc(channels[engine], call, {}, 10_000);
    if (answer.status !== '0') failures.push(`${engine} gRPC ModelInfer: ${describeOutcome(answer)}`);
  }
  return failures;
}

function outcomeKey(o: HttpOutcome | GrpcOutcome): string {
  if ('kind' in o) return `http ${o.kind === 'answer' ? o.status : o.kind}`;
  return `grpc ${o.status}`;
}

export async function fuzzNetwork(options: FuzzOptions): Promise<FuzzReport> {
  const log = options.log ?? (() => undefined);
  const concurrency = options.concurrency ?? 8;
  const checkEvery = options.checkEvery ?? 250;
  const timeoutMs = options.timeoutMs ?? 1000;
  const rig = await startRig();
  const channels = { native: new GrpcChannel(rig.native.grpc?.port ?? 0), node: new GrpcChannel(rig.node.grpc?.port ?? 0) };
  const ports = { native: rig.native.http?.port ?? 0, node: rig.node.http?.port ?? 0 };
  const report: FuzzReport = {
    cases: 0,
    seed: options.seed,
    seconds: 0,
    casesPerSecond: 0,
    mismatches: [],
    resolvedOnRetry: 0,
    timeoutRaces: 0,
    connectionLevel: 0,
    earlyAnswers: 0,
    segmentation: 0,
    segmentationExamples: [],
    checks: [],
    frontendsAnswered: true,
    rssGrowthMB: 0,
    outcomes: {},
    firstCaseOf: {},
    answeredNatively: { http: 0, grpc: 0 },
  };
  const rssMB = (): number => Math.round(process.memoryUsage.rss() / 104857.6) / 10;

  const exchange = async (
    c: FuzzCase,
    timeout: number,
    together: boolean,
    splitAt?: number,
  ): Promise<{ native: HttpOutcome | GrpcOutcome; node: HttpOutcome | GrpcOutcome }> => {
    const send = (engine: 'native' | 'node'): Promise<HttpOutcome | GrpcOutcome> =>
      c.protocol === 'http' ? sendHttp(ports[engine], c.bytes, timeout, splitAt) : sendGrpc(channels[engine], c.bytes, c.grpcHeaders ?? {}, timeout);
    if (together) {
      const [native, node] = await Promise.all([send('native'), send('node')]);
      return { native, node };
    }
    return { native: await send('native'), node: await send('node') };
  };
  const same = (a: HttpOutcome | GrpcOutcome, b: HttpOutcome | GrpcOutcome): boolean =>
    'kind' in a && 'kind' in b ? sameHttp(a, b) : !('kind' in a) && !('kind' in b) ? sameGrpc(a, b) : false;

  const runOne = async (index: number): Promise<void> => {
    const c = makeCase(options.seed, index);
    let answers = await exchange(c, timeoutMs, true);
    if (!same(answers.native, answers.node)) {
      // Once more, one engine after the other, patiently: only what stays different counts.
      let again = await exchange(c, timedOut(answers.native) || timedOut(answers.node) ? 8000 : 3000, false);
      let compared = c;
      const end = c.protocol === 'http' ? firstRequestEnd(c.bytes) : undefined;
      if (!same(again.native, again.node) && end !== undefined && end < c.bytes.length) {
        // Bytes after the first request are a second one: how a connection
        // goes on is not compared (node:http answers a parse error there with
        // its own 400 and drops the first answer). The first request alone:
        compared = { ...c, bytes: c.bytes.subarray(0, end), mutations: [...c.mutations, `cut to the first request (${end} of ${c.bytes.length} bytes)`] };
        again = await exchange(compared, 8000, false);
        if (same(again.native, again.node)) report.connectionLevel++;
      }
      const completed = c.protocol === 'http' && (timedOut(again.native) || timedOut(again.node)) ? completedRequest(c.bytes) : undefined;
      if (!same(again.native, again.node) && completed !== undefined) {
        // A request the client never finished: one engine answered what it
        // had (node:http runs the handler once the head is in, and a 404 or a
        // 405 needs no body), the other waits for the rest. When the rest
        // comes, they must agree:
        compared = { ...c, bytes: completed, mutations: [...c.mutations, `completed (${completed.length - c.bytes.length} bytes added)`] };
        again = await exchange(compared, 8000, false);
        if (same(again.native, again.node)) report.earlyAnswers++;
      }
      const head = c.protocol === 'http' ? c.bytes.indexOf('\r\n\r\n') : -1;
      if (!same(again.native, again.node) && compared === c && head !== -1 && head + 4 < c.bytes.length) {
        // The head and the body in separate writes: a divergence that goes away
        // is a race between an early answer and an error further on (node:http
        // answers a broken body framing with its own 400 unless the handler
        // answered first), which TCP segmentation decides, not the engine.
        const split = await exchange(c, 8000, false, head + 4);
        if (same(split.native, split.node)) {
          report.segmentation++;
          report.segmentationExamples.push({ case: c, native: describeOutcome(again.native), node: describeOutcome(again.node) });
          again = split;
        }
      }
      if (same(again.native, again.node)) {
        if (compared === c) report.resolvedOnRetry++;
      } else if (raceWithTimeout(c, again.native, again.node)) {
        report.timeoutRaces++;
      } else {
        answers = again;
        report.mismatches.push({ case: compared, native: describeOutcome(again.native), node: describeOutcome(again.node) });
        log(`MISMATCH case ${index} (${c.protocol}, ${c.seed}; ${compared.mutations.join('; ')})`);
      }
    }
    const key = outcomeKey(answers.node);
    report.outcomes[key] = (report.outcomes[key] ?? 0) + 1;
    report.firstCaseOf[key] = Math.min(report.firstCaseOf[key] ?? index, index);
    report.cases++;
  };

  const before = { http: rig.native.http?.answeredNatively ?? 0, grpc: rig.native.grpc?.answeredNatively ?? 0 };
  const started = performance.now();
  const startRss = rssMB();
  report.checks.push({ after: 0, rssMB: startRss, answered: true, failures: [] });
  try {
    const indices = options.only ?? Array.from({ length: options.cases }, (_, i) => i);
    let next = 0;
    let sinceCheck = 0;
    let checking: Promise<void> | undefined;
    const worker = async (): Promise<void> => {
      while (next < indices.length && report.frontendsAnswered) {
        // A check runs alone, between cases, so that its answers are not held up by a burst of them.
        while (checking) await checking;
        const index = indices[next++]!;
        await runOne(index);
        if (++sinceCheck >= checkEvery && !checking) {
          sinceCheck = 0;
          checking = (async () => {
            const failures = await healthCheck(rig, channels);
            report.checks.push({ after: report.cases, rssMB: rssMB(), answered: failures.length === 0, failures });
            if (failures.length > 0) {
              report.frontendsAnswered = false;
              log(`front ends stopped answering after ${report.cases} cases: ${failures.join('; ')}`);
            } else log(`${report.cases} cases, ${report.mismatches.length} mismatches, RSS ${rssMB()} MB`);
          })().finally(() => (checking = undefined));
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    while (checking) await checking;
    const failures = await healthCheck(rig, channels);
    report.checks.push({ after: report.cases, rssMB: rssMB(), answered: failures.length === 0, failures });
    if (failures.length > 0) report.frontendsAnswered = false;
  } finally {
    report.seconds = (performance.now() - started) / 1000;
    report.casesPerSecond = report.cases / report.seconds;
    // Growth from the first check after warm-up (the first cases allocate what later ones reuse).
    const warm = report.checks.find((check) => check.after > 0) ?? report.checks[0]!;
    report.rssGrowthMB = Math.round((rssMB() - warm.rssMB) * 10) / 10;
    report.answeredNatively = { http: (rig.native.http?.answeredNatively ?? 0) - before.http, grpc: (rig.native.grpc?.answeredNatively ?? 0) - before.grpc };
    channels.native.close();
    channels.node.close();
    await rig.close();
  }
  return report;
}

/** A mismatch as text: what was sent (hex) and both answers. */
export function formatMismatch(m: Mismatch): string {
  const hex = m.case.bytes.toString('hex');
  const shown = hex.length > 8192 ? `${hex.slice(0, 8192)}… (${m.case.bytes.length} bytes)` : hex;
  const headers = m.case.grpcHeaders && Object.keys(m.case.grpcHeaders).length > 0 ? `\n  grpc headers: ${JSON.stringify(m.case.grpcHeaders)}` : '';
  return [
    `case ${m.case.index} (${m.case.protocol}, seed request "${m.case.seed}"): ${m.case.mutations.join('; ')}${headers}`,
    `  bytes (${m.case.bytes.length}): ${shown}`,
    `  native: ${m.native}`,
    `  node:   ${m.node}`,
  ].join('\n');
}

// ---------------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      cases: { type: 'string', default: '2000' },
      seed: { type: 'string', default: '1' },
      concurrency: { type: 'string', default: '8' },
      replay: { type: 'string', multiple: true },
      json: { type: 'string' },
    },
  });
  const replay = values.replay?.map(Number);
  const seed = Number(values.seed);
  if (replay) {
    for (const index of replay) {
      const c = makeCase(seed, index);
      console.log(`case ${index} (${c.protocol}, ${c.seed}): ${c.mutations.join('; ')}\n  ${c.bytes.toString('hex')}`);
    }
  }
  const report = await fuzzNetwork({
    cases: Number(values.cases),
    seed,
    concurrency: Number(values.concurrency),
    ...(replay ? { only: replay } : {}),
    log: (line) => console.error(line),
  });
  console.log(`\n${report.cases} cases (seed ${report.seed}) in ${report.seconds.toFixed(1)} s: ${report.casesPerSecond.toFixed(1)} cases/s`);
  console.log(`answered by the native engines themselves: HTTP ${report.answeredNatively.http}, gRPC ${report.answeredNatively.grpc}`);
  console.log(`answers (node engine): ${Object.entries(report.outcomes).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ×${n}`).join(', ')}`);
  console.log(`RSS ${report.checks.map((c) => c.rssMB).join(' → ')} MB; growth after warm-up ${report.rssGrowthMB} MB`);
  console.log(`front ends answered throughout: ${report.frontendsAnswered ? 'yes' : `NO (${report.checks.flatMap((c) => c.failures).join('; ')})`}`);
  console.log(`disagreements resolved by a patient retry: ${report.resolvedOnRetry}; only after the first request (connection-level): ${report.connectionLevel}; an unfinished request answered early by one engine: ${report.earlyAnswers}; gone with the head and body in separate writes: ${report.segmentation}; a request against its own timeout parameter: ${report.timeoutRaces}`);
  for (const m of report.segmentationExamples.slice(0, 3)) console.log(`\nsegmentation-dependent (not counted as a mismatch):\n${formatMismatch(m)}`);
  console.log(`mismatches: ${report.mismatches.length}`);
  for (const m of report.mismatches.slice(0, 10)) console.log(`\n${formatMismatch(m)}`);
  if (values.json) {
    const json = {
      ...report,
      mismatches: report.mismatches.map((m) => ({ ...m, case: { ...m.case, bytes: m.case.bytes.toString('hex') } })),
    };
    await writeFile(values.json, `${JSON.stringify(json, null, 2)}\n`);
  }
  process.exit(report.mismatches.length > 0 || !report.frontendsAnswered ? 1 : 0);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
