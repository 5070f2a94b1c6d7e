/**
 * The protobuf wire form of KServe v2's inference messages, written by hand,
 * both ways: `ModelInferRequest` out and `ModelInferResponse` /
 * `ModelStreamInferResponse` in for the remote client, the reverse for the
 * gRPC front end. The generic codec (proto-loader over protobufjs) builds
 * objects for every field, default values and oneof names included, and
 * copies each tensor's bytes through them; on the hot path these write
 * tensors into the message once and read tensors as views of the received
 * message. Field numbers are those of inference.proto.
 */
import { Buffer } from 'node:buffer';

/** A parameter value (InferParameter's oneof): bigint for 64-bit values beyond 2^53. */
export type WireValue = string | number | boolean | bigint;

export interface WireInput {
  name: string;
  datatype: string;
  shape: readonly number[];
  bytes: Uint8Array;
}

export interface WireRequestedOutput {
  name: string;
  parameters: Record<string, WireValue> | undefined;
}

export interface WireInferRequest {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, WireValue>;
  inputs: WireInput[];
  outputs: WireRequestedOutput[];
}

export interface WireOutputTensor {
  name: string;
  datatype: string;
  shape: number[];
}

export interface WireInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, string | number | boolean>;
  outputs: WireOutputTensor[];
  /** Views of the received message. */
  raw_output_contents: Uint8Array[];
}

const VARINT = 0;
const FIXED64 = 1;
const BYTES = 2;
const FIXED32 = 5;

const key = (field: number, type: number): number => (field << 3) | type;

// ---------------------------------------------------------------------------
// Writing: sizes first, then one buffer.

function varintSize(value: number): number {
  let size = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 128);
    size++;
  }
  return size;
}

function bigVarintSize(value: bigint): number {
  let size = 1;
  while (value >= 0x80n) {
    value >>= 7n;
    size++;
  }
  return size;
}

const utf8Size = (text: string): number => Buffer.byteLength(text, 'utf8');

/** A 64-bit integer as protobuf writes it (negative: two's complement, 10 bytes). */
function int64Bits(value: number | bigint): bigint | number {
  if (typeof value === 'number' && value >= 0 && Number.isSafeInteger(value)) return value;
  return BigInt.asUintN(64, BigInt(value));
}

function parameterBody(value: WireValue): { field: number; size: number; bits?: number | bigint } {
  switch (typeof value) {
    case 'boolean':
      return { field: 1, size: 2 };
    case 'string':
      return { field: 3, size: 1 + lengthDelimitedSize(utf8Size(value)) };
    case 'bigint': {
      const bits = int64Bits(value);
      // uint64_param for values past int64's range, int64_param for the rest.
      const field = value > 0x7fff_ffff_ffff_ffffn ? 5 : 2;
      return { field, size: 1 + (typeof bits === 'bigint' ? bigVarintSize(bits) : varintSize(bits)), bits };
    }
    default: {
      if (Number.isInteger(value)) {
        const bits = int64Bits(value);
        return { field: 2, size: 1 + (typeof bits === 'bigint' ? bigVarintSize(bits) : varintSize(bits)), bits };
      }
      return { field: 4, size: 9 };
    }
  }
}

const lengthDelimitedSize = (size: number): number => varintSize(size) + size;

class Writer {
  readonly buffer: Buffer;
  offset = 0;

  constructor(size: number, allocate: (size: number) => Buffer = Buffer.allocUnsafe) {
    this.buffer = allocate(size);
  }

  varint(value: number): void {
    const buffer = this.buffer;
    while (value >= 0x80) {
      buffer[this.offset++] = (value % 128) | 0x80;
      value = Math.floor(value / 128);
    }
    buffer[this.offset++] = value;
  }

  bigVarint(value: bigint): void {
    while (value >= 0x80n) {
      this.buffer[this.offset++] = Number(value & 0x7fn) | 0x80;
      value >>= 7n;
    }
    this.buffer[this.offset++] = Number(value);
  }

  string(field: number, text: string, size: number): void {
    this.varint(key(field, BYTES));
    this.varint(size);
    this.offset += this.buffer.write(text, this.offset, 'utf8');
  }

  bytes(field: number, bytes: Uint8Array): void {
    this.varint(key(field, BYTES));
    this.varint(bytes.byteLength);
    this.buffer.set(bytes, this.offset);
    this.offset += bytes.byteLength;
  }

  double(value: number): void {
    this.buffer.writeDoubleLE(value, this.offset);
    this.offset += 8;
  }
}

/** The size of a `map<string, InferParameter>` field's entries, and a writer for them. */
function parameterMap(field: number, parameters: Record<string, WireValue> | undefined): { size: number; write(writer: Writer): void } {
  if (parameters === undefined) return { size: 0, write() {} };
  const entries: Array<{ name: string; nameSize: number; value: WireValue; body: ReturnType<typeof parameterBody>; entrySize: number }> = [];
  let size = 0;
  for (const name in parameters) {
    const value = parameters[name]!;
    const nameSize = utf8Size(name);
    const body = parameterBody(value);
    const entrySize = 1 + lengthDelimitedSize(nameSize) + 1 + lengthDelimitedSize(body.size);
    entries.push({ name, nameSize, value, body, entrySize });
    size += varintSize(key(field, BYTES)) + lengthDelimitedSize(entrySize);
  }
  return {
    size,
    write(writer) {
      for (const { name, nameSize, value, body, entrySize } of entries) {
        writer.varint(key(field, BYTES));
        writer.varint(entrySize);
        writer.string(1, name, nameSize);
        writer.varint(key(2, BYTES));
        writer.varint(body.size);
        switch (typeof value) {
          case 'boolean':
            writer.varint(key(1, VARINT));
            writer.varint(value ? 1 : 0);
            break;
          case 'string':
            writer.string(3, value, utf8Size(value));
            break;
          default:
            if (body.field === 4) {
              writer.varint(key(4, FIXED64));
              writer.double(value as number);
            } else {
              writer.varint(key(body.field, VARINT));
              if (typeof body.bits === 'bigint') writer.bigVarint(body.bits);
              else writer.varint(body.bits as number);
            }
        }
      }
    },
  };
}

function shapeSize(shape: readonly number[]): number {
  let size = 0;
  for (const dim of shape) size += varintSize(dim);
  return size;
}

/**
 * `ModelInferRequest` with every input's bytes in `raw_input_contents`.
 * `prefix` bytes are left free in front (for gRPC's 5-byte message header,
 * so that the tensors are copied once, into the frame).
 */
export function encodeModelInferRequest(request: WireInferRequest, prefix = 0): Buffer {
  const nameSize = utf8Size(request.model_name);
  const versionSize = utf8Size(request.model_version);
  const idSize = utf8Size(request.id);
  const parameters = parameterMap(4, request.parameters);
  let size = parameters.size;
  if (nameSize > 0) size += 1 + lengthDelimitedSize(nameSize);
  if (versionSize > 0) size += 1 + lengthDelimitedSize(versionSize);
  if (idSize > 0) size += 1 + lengthDelimitedSize(idSize);
  const inputs = request.inputs.map((input) => {
    const inputNameSize = utf8Size(input.name);
    const datatypeSize = utf8Size(input.datatype);
    const dims = shapeSize(input.shape);
    let body = 1 + lengthDelimitedSize(inputNameSize) + 1 + lengthDelimitedSize(datatypeSize);
    if (input.shape.length > 0) body += 1 + lengthDelimitedSize(dims);
    size += 1 + lengthDelimitedSize(body) + 1 + lengthDelimitedSize(input.bytes.byteLength);
    return { input, inputNameSize, datatypeSize, dims, body };
  });
  const outputs = request.outputs.map((output) => {
    const outputNameSize = utf8Size(output.name);
    const map = parameterMap(2, output.parameters);
    const body = 1 + lengthDelimitedSize(outputNameSize) + map.size;
    size += 1 + lengthDelimitedSize(body);
    return { outputNameSize, map, body, output };
  });

  const writer = new Writer(prefix + size);
  writer.offset = prefix;
  if (nameSize > 0) writer.string(1, request.model_name, nameSize);
  if (versionSize > 0) writer.string(2, request.model_version, versionSize);
  if (idSize > 0) writer.string(3, request.id, idSize);
  parameters.write(writer);
  for (const { input, inputNameSize, datatypeSize, dims, body } of inputs) {
    writer.varint(key(5, BYTES));
    writer.varint(body);
    writer.string(1, input.name, inputNameSize);
    writer.string(2, input.datatype, datatypeSize);
    if (input.shape.length > 0) {
      writer.varint(key(3, BYTES));
      writer.varint(dims);
      for (const dim of input.shape) writer.varint(dim);
    }
  }
  for (const { outputNameSize, map, body, output } of outputs) {
    writer.varint(key(6, BYTES));
    writer.varint(body);
    writer.string(1, output.name, outputNameSize);
    map.write(writer);
  }
  for (const { input } of inputs) writer.bytes(7, input.bytes);
  return writer.buffer;
}

// ---------------------------------------------------------------------------
// Reading.

/**
 * The most inputs, outputs, raw contents, dimensions and parameters one
 * received request may hold. Each becomes a JS object or an array slot,
 * about 50 to 200 times its couple of bytes on the wire: 8 M empty inputs in
 * a 16 MiB message took 1.6 GB (Triton's own server too). At this bound a
 * request's structure costs at most about 20 MB; its tensor data is checked
 * against the shapes before it is read (contentsOf).
 */
export const MAX_REQUEST_PARTS = 65_536;

/** A received request with more than MAX_REQUEST_PARTS parts. */
export class TooManyParts extends Error {}

/** What is left of a request's parts (MAX_REQUEST_PARTS), shared by the readers of its submessages. */
interface PartBudget {
  left: number;
  /** What the parts are, for the error. */
  what: string;
}

class Reader {
  offset: number;

  constructor(
    readonly buffer: Buffer,
    start: number,
    readonly end: number,
    readonly budget?: PartBudget,
  ) {
    this.offset = start;
  }

  /** Counts one part of a received request against its budget. */
  part(): void {
    if (this.budget !== undefined && --this.budget.left < 0) throw new TooManyParts(`more than ${MAX_REQUEST_PARTS} ${this.budget.what} in one request`);
  }

  get more(): boolean {
    return this.offset < this.end;
  }

  /** A varint as a number (exact up to 2^53; wire values past that only in parameters, read by bigVarint). */
  varint(): number {
    const buffer = this.buffer;
    let result = 0;
    let scale = 1;
    for (;;) {
      if (this.offset >= this.end) throw new Error('truncated varint');
      const byte = buffer[this.offset++]!;
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return result;
      scale *= 128;
      if (scale > 2 ** 63) throw new Error('varint longer than 10 bytes');
    }
  }

  /** An int64 field: a number (a negative one, ten bytes on the wire, read exactly through BigInt). */
  int64(): number {
    const start = this.offset;
    const value = this.varint();
    if (this.offset - start < 8) return value;
    this.offset = start;
    return integer(this.bigVarint(), true);
  }

  bigVarint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.offset >= this.end) throw new Error('truncated varint');
      const byte = this.buffer[this.offset++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return result;
      shift += 7n;
      if (shift > 63n) throw new Error('varint longer than 10 bytes');
    }
  }

  /** The bounds of a length-delimited field's payload. */
  span(): [number, number] {
    const length = this.varint();
    const start = this.offset;
    const end = start + length;
    if (end > this.end) throw new Error('length-delimited field runs past its message');
    this.offset = end;
    return [start, end];
  }

  string(): string {
    const [start, end] = this.span();
    return this.buffer.toString('utf8', start, end);
  }

  skip(type: number): void {
    switch (type) {
      case VARINT:
        this.varint();
        break;
      case FIXED64:
        this.offset += 8;
        break;
      case BYTES:
        this.span();
        break;
      case FIXED32:
        this.offset += 4;
        break;
      default:
        throw new Error(`unknown wire type ${type}`);
    }
    if (this.offset > this.end) throw new Error('field runs past its message');
  }

  sub(): Reader {
    const [start, end] = this.span();
    return new Reader(this.buffer, start, end, this.budget);
  }
}

/** A 64-bit integer read as two's complement (int64) or not (uint64): a number when exact. */
function integer(bits: bigint, signed: boolean): number {
  const value = signed ? BigInt.asIntN(64, bits) : bits;
  return Number(value);
}

function readParameter(reader: Reader): string | number | boolean | undefined {
  let value: string | number | boolean | undefined;
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    if (field === 1 && type === VARINT) value = reader.varint() !== 0;
    else if (field === 2 && type === VARINT) value = reader.int64();
    else if (field === 3 && type === BYTES) value = reader.string();
    else if (field === 4 && type === FIXED64) {
      value = reader.buffer.readDoubleLE(reader.offset);
      reader.offset += 8;
    } else if (field === 5 && type === VARINT) value = integer(reader.bigVarint(), false);
    else reader.skip(type);
  }
  return value;
}

function readMapEntry(reader: Reader, into: Record<string, string | number | boolean>): void {
  reader.part();
  let name = '';
  let value: string | number | boolean | undefined;
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    if (field === 1 && type === BYTES) name = reader.string();
    else if (field === 2 && type === BYTES) value = readParameter(reader.sub());
    else reader.skip(type);
  }
  if (value !== undefined) into[name] = value;
}

function readOutputTensor(reader: Reader): WireOutputTensor {
  const tensor: WireOutputTensor = { name: '', datatype: '', shape: [] };
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    if (field === 1 && type === BYTES) tensor.name = reader.string();
    else if (field === 2 && type === BYTES) tensor.datatype = reader.string();
    else if (field === 3 && type === BYTES) {
      const packed = reader.sub();
      while (packed.more) tensor.shape.push(packed.int64());
    } else if (field === 3 && type === VARINT) tensor.shape.push(reader.int64());
    else reader.skip(type);
  }
  return tensor;
}

/** Fields 1–4, which ModelInferRequest and ModelInferResponse share; false for any other field. */
function readCommonField(
  reader: Reader,
  field: number,
  into: { model_name: string; model_version: string; id: string; parameters: Record<string, string | number | boolean> },
): boolean {
  switch (field) {
    case 1:
      into.model_name = reader.string();
      return true;
    case 2:
      into.model_version = reader.string();
      return true;
    case 3:
      into.id = reader.string();
      return true;
    case 4:
      readMapEntry(reader.sub(), into.parameters);
      return true;
    default:
      return false;
  }
}

function readInferResponse(reader: Reader): WireInferResponse {
  const response: WireInferResponse = { model_name: '', model_version: '', id: '', parameters: {}, outputs: [], raw_output_contents: [] };
  const buffer = reader.buffer;
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    if (type !== BYTES) {
      reader.skip(type);
      continue;
    }
    if (readCommonField(reader, field, response)) continue;
    switch (field) {
      case 5:
        response.outputs.push(readOutputTensor(reader.sub()));
        break;
      case 6: {
        const [start, end] = reader.span();
        response.raw_output_contents.push(buffer.subarray(start, end));
        break;
      }
      default:
        reader.skip(type);
    }
  }
  return response;
}

/** Reads a `ModelInferResponse`; its raw outputs are views of `message`. Throws on malformed input. */
export function decodeModelInferResponse(message: Buffer): WireInferResponse {
  return readInferResponse(new Reader(message, 0, message.byteLength));
}

/** Reads a `ModelStreamInferResponse`: an error message, or a response. */
export function decodeModelStreamInferResponse(message: Buffer): { error_message: string; infer_response: WireInferResponse | null } {
  const reader = new Reader(message, 0, message.byteLength);
  let errorMessage = '';
  let response: WireInferResponse | null = null;
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    if (field === 1 && type === BYTES) errorMessage = reader.string();
    else if (field === 2 && type === BYTES) response = readInferResponse(reader.sub());
    else reader.skip(type);
  }
  return { error_message: errorMessage, infer_response: response };
}

// ---------------------------------------------------------------------------
// The front end's direction: requests in, responses out.

/** `InferTensorContents` by field name, as TypedArrays (bytes as views of the message). */
export interface WireContents {
  bool_contents: Uint8Array;
  int_contents: Int32Array;
  int64_contents: BigInt64Array;
  uint_contents: Uint32Array;
  uint64_contents: BigUint64Array;
  fp32_contents: Float32Array;
  fp64_contents: Float64Array;
  bytes_contents: Uint8Array[];
}

export type ContentsField = keyof WireContents;

/**
 * An input's `InferTensorContents`, counted but not read: how many elements
 * each field holds, and where the message lies. contentsOf() reads a field
 * once its count matched the shape, so that a count the shape does not
 * declare costs nothing.
 */
export interface WireContentsRef {
  counts: Partial<Record<ContentsField, number>>;
  buffer: Buffer;
  start: number;
  end: number;
}

export interface WireReceivedInput {
  name: string;
  datatype: string;
  shape: number[];
  parameters: Record<string, string | number | boolean>;
  contents: WireContentsRef | undefined;
}

export interface WireReceivedRequest {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, string | number | boolean>;
  inputs: WireReceivedInput[];
  outputs: Array<{ name: string; parameters: Record<string, string | number | boolean> }>;
  /** Views of the received message. */
  raw_input_contents: Uint8Array[];
}

const CONTENTS_FIELDS = [
  undefined,
  'bool_contents',
  'int_contents',
  'int64_contents',
  'uint_contents',
  'uint64_contents',
  'fp32_contents',
  'fp64_contents',
  'bytes_contents',
] as const;

/** The wire type of each contents field's elements when not packed (bytes_contents is always length-delimited). */
const ELEMENT_TYPE = [undefined, VARINT, VARINT, VARINT, VARINT, VARINT, FIXED32, FIXED64, BYTES] as const;

/** How many varints fill `[start, end)` exactly; each at most 10 bytes. */
function countVarints(buffer: Buffer, start: number, end: number): number {
  let count = 0;
  let run = 0;
  for (let i = start; i < end; i++) {
    if (buffer[i]! < 0x80) {
      count++;
      run = 0;
    } else if (++run >= 10) throw new Error('varint longer than 10 bytes');
  }
  if (run > 0) throw new Error('truncated varint');
  return count;
}

/** Counts the elements of each field of an `InferTensorContents`, checking its framing; reads no value. */
function countContents(reader: Reader): WireContentsRef {
  const ref: WireContentsRef = { counts: {}, buffer: reader.buffer, start: reader.offset, end: reader.end };
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    const name = CONTENTS_FIELDS[field];
    if (name === undefined) {
      reader.skip(type);
      continue;
    }
    const element = ELEMENT_TYPE[field];
    let count = 1;
    if (type === BYTES && element !== BYTES) {
      const [start, end] = reader.span();
      const size = element === FIXED32 ? 4 : element === FIXED64 ? 8 : 0;
      if (size === 0) count = countVarints(reader.buffer, start, end);
      else if ((end - start) % size !== 0) throw new Error(`packed ${name} is not a whole number of ${size}-byte values`);
      else count = (end - start) / size;
    } else if (type === element) {
      reader.skip(type);
    } else {
      throw new Error(`${name} has wire type ${type}`);
    }
    ref.counts[name] = (ref.counts[name] ?? 0) + count;
  }
  return ref;
}

/**
 * The bytes_contents of a counted `InferTensorContents` in Triton's BYTES
 * wire form (each element a 4-byte little-endian length, then its bytes),
 * written without an object per element.
 */
export function bytesContentsWire(ref: WireContentsRef): Uint8Array {
  const each = (visit: (start: number, end: number) => void): void => {
    const reader = new Reader(ref.buffer, ref.start, ref.end);
    while (reader.more) {
      const tag = reader.varint();
      if (tag === key(8, BYTES)) visit(...reader.span());
      else reader.skip(tag & 7);
    }
  };
  let size = 0;
  each((start, end) => (size += 4 + end - start));
  const wire = Buffer.allocUnsafe(size);
  let at = 0;
  each((start, end) => {
    wire.writeUInt32LE(end - start, at);
    at += 4 + ref.buffer.copy(wire, at + 4, start, end);
  });
  return wire;
}

/** The TypedArray each numeric contents field is read into. */
const CONTENTS_STORAGE = {
  bool_contents: Uint8Array,
  int_contents: Int32Array,
  int64_contents: BigInt64Array,
  uint_contents: Uint32Array,
  uint64_contents: BigUint64Array,
  fp32_contents: Float32Array,
  fp64_contents: Float64Array,
} as const;

/** Reads one field of a counted `InferTensorContents` (framing checked by countContents). */
export function contentsOf<F extends ContentsField>(ref: WireContentsRef, name: F): WireContents[F] {
  const field = CONTENTS_FIELDS.indexOf(name);
  const count = ref.counts[name] ?? 0;
  const out: unknown = name === 'bytes_contents' ? new Array<Uint8Array>(count) : new CONTENTS_STORAGE[name as Exclude<ContentsField, 'bytes_contents'>](count);
  const values = out as { [index: number]: unknown };
  let at = 0;
  const one = (reader: Reader): void => {
    const buffer = reader.buffer;
    switch (field) {
      case 1:
        values[at++] = reader.varint() !== 0 ? 1 : 0;
        break;
      case 2:
        values[at++] = reader.int64() | 0;
        break;
      case 3:
        values[at++] = BigInt.asIntN(64, reader.bigVarint());
        break;
      case 4:
        values[at++] = reader.varint() >>> 0;
        break;
      case 5:
        values[at++] = BigInt.asUintN(64, reader.bigVarint());
        break;
      case 6:
        values[at++] = buffer.readFloatLE(reader.offset);
        reader.offset += 4;
        break;
      case 7:
        values[at++] = buffer.readDoubleLE(reader.offset);
        reader.offset += 8;
        break;
      default: {
        const [start, end] = reader.span();
        values[at++] = buffer.subarray(start, end);
      }
    }
  };
  const reader = new Reader(ref.buffer, ref.start, ref.end);
  while (reader.more) {
    const tag = reader.varint();
    const type = tag & 7;
    if (tag >>> 3 !== field) reader.skip(type);
    else if (type === BYTES && field !== 8) {
      const packed = reader.sub();
      while (packed.more) one(packed);
    } else one(reader);
  }
  return out as WireContents[F];
}

function readInputTensor(reader: Reader): WireReceivedInput {
  reader.part();
  const input: WireReceivedInput = { name: '', datatype: '', shape: [], parameters: {}, contents: undefined };
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    if (field === 1 && type === BYTES) input.name = reader.string();
    else if (field === 2 && type === BYTES) input.datatype = reader.string();
    else if (field === 3 && type === BYTES) {
      const packed = reader.sub();
      while (packed.more) {
        reader.part();
        input.shape.push(packed.int64());
      }
    } else if (field === 3 && type === VARINT) {
      reader.part();
      input.shape.push(reader.int64());
    } else if (field === 4 && type === BYTES) readMapEntry(reader.sub(), input.parameters);
    else if (field === 5 && type === BYTES) input.contents = countContents(reader.sub());
    else reader.skip(type);
  }
  return input;
}

function readRequestedOutput(reader: Reader): { name: string; parameters: Record<string, string | number | boolean> } {
  reader.part();
  const output = { name: '', parameters: {} as Record<string, string | number | boolean> };
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    if (field === 1 && type === BYTES) output.name = reader.string();
    else if (field === 2 && type === BYTES) readMapEntry(reader.sub(), output.parameters);
    else reader.skip(type);
  }
  return output;
}

/**
 * Counts the top-level fields of a message a generic decoder will read
 * (protobufjs, for the gRPC front end's other methods) against
 * MAX_REQUEST_PARTS: their only repeated fields are top-level parameter maps,
 * whose entries would each become objects. Throws TooManyParts past it;
 * framing that is not protobuf is left to the decoder to report.
 */
export function checkMessageParts(message: Buffer): void {
  const reader = new Reader(message, 0, message.byteLength, { left: MAX_REQUEST_PARTS, what: 'fields' });
  try {
    while (reader.more) {
      reader.part();
      reader.skip(reader.varint() & 7);
    }
  } catch (error) {
    if (error instanceof TooManyParts) throw error;
  }
}

/** Reads a `ModelInferRequest` from `message[start, end)`; raw inputs are views of it. Throws on malformed input. */
export function decodeModelInferRequest(message: Buffer, start = 0, end = message.byteLength): WireReceivedRequest {
  const reader = new Reader(message, start, end, { left: MAX_REQUEST_PARTS, what: 'inputs, outputs, raw contents, dimensions and parameters' });
  const request: WireReceivedRequest = { model_name: '', model_version: '', id: '', parameters: {}, inputs: [], outputs: [], raw_input_contents: [] };
  while (reader.more) {
    const tag = reader.varint();
    const field = tag >>> 3;
    const type = tag & 7;
    if (type !== BYTES) {
      reader.skip(type);
      continue;
    }
    if (readCommonField(reader, field, request)) continue;
    switch (field) {
      case 5:
        request.inputs.push(readInputTensor(reader.sub()));
        break;
      case 6:
        request.outputs.push(readRequestedOutput(reader.sub()));
        break;
      case 7: {
        reader.part();
        const [from, to] = reader.span();
        request.raw_input_contents.push(message.subarray(from, to));
        break;
      }
      default:
        reader.skip(type);
    }
  }
  return request;
}

export interface WireSentResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, WireValue>;
  outputs: WireOutputTensor[];
  raw_output_contents: Uint8Array[];
}

/** Size and writer of a `ModelInferResponse` body. */
function inferResponseParts(response: WireSentResponse): { size: number; write(writer: Writer): void } {
  const nameSize = utf8Size(response.model_name);
  const versionSize = utf8Size(response.model_version);
  const idSize = utf8Size(response.id);
  const parameters = parameterMap(4, response.parameters);
  let size = parameters.size;
  if (nameSize > 0) size += 1 + lengthDelimitedSize(nameSize);
  if (versionSize > 0) size += 1 + lengthDelimitedSize(versionSize);
  if (idSize > 0) size += 1 + lengthDelimitedSize(idSize);
  const outputs = response.outputs.map((output) => {
    const outputNameSize = utf8Size(output.name);
    const datatypeSize = utf8Size(output.datatype);
    const dims = shapeSize(output.shape);
    let body = 0;
    if (outputNameSize > 0) body += 1 + lengthDelimitedSize(outputNameSize);
    if (datatypeSize > 0) body += 1 + lengthDelimitedSize(datatypeSize);
    if (output.shape.length > 0) body += 1 + lengthDelimitedSize(dims);
    size += 1 + lengthDelimitedSize(body);
    return { output, outputNameSize, datatypeSize, dims, body };
  });
  for (const raw of response.raw_output_contents) size += 1 + lengthDelimitedSize(raw.byteLength);
  return {
    size,
    write(writer) {
      if (nameSize > 0) writer.string(1, response.model_name, nameSize);
      if (versionSize > 0) writer.string(2, response.model_version, versionSize);
      if (idSize > 0) writer.string(3, response.id, idSize);
      parameters.write(writer);
      for (const { output, outputNameSize, datatypeSize, dims, body } of outputs) {
        writer.varint(key(5, BYTES));
        writer.varint(body);
        if (outputNameSize > 0) writer.string(1, output.name, outputNameSize);
        if (datatypeSize > 0) writer.string(2, output.datatype, datatypeSize);
        if (output.shape.length > 0) {
          writer.varint(key(3, BYTES));
          writer.varint(dims);
          for (const dim of output.shape) writer.varint(dim);
        }
      }
      for (const raw of response.raw_output_contents) writer.bytes(6, raw);
    },
  };
}

/**
 * `ModelInferResponse`, with `prefix` bytes left free in front (gRPC's
 * message header), in memory from `allocate` (exactly the size asked).
 */
export function encodeModelInferResponse(response: WireSentResponse, prefix = 0, allocate?: (size: number) => Buffer): Buffer {
  const parts = inferResponseParts(response);
  const writer = new Writer(prefix + parts.size, allocate);
  writer.offset = prefix;
  parts.write(writer);
  return writer.buffer;
}

/** `ModelStreamInferResponse`: an error message, or a response; `prefix` bytes left free in front. */
export function encodeModelStreamInferResponse(errorMessage: string, response: WireSentResponse | undefined, prefix = 0): Buffer {
  const errorSize = utf8Size(errorMessage);
  const parts = response === undefined ? undefined : inferResponseParts(response);
  let size = 0;
  if (errorSize > 0) size += 1 + lengthDelimitedSize(errorSize);
  if (parts !== undefined) size += 1 + lengthDelimitedSize(parts.size);
  const writer = new Writer(prefix + size);
  writer.offset = prefix;
  if (errorSize > 0) writer.string(1, errorMessage, errorSize);
  if (parts !== undefined) {
    writer.varint(key(2, BYTES));
    writer.varint(parts.size);
    parts.write(writer);
  }
  return writer.buffer;
}
