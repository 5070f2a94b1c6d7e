/**
 * Typed tensors: Triton's data types, their JS representations, the
 * conversion of user input into what the addon hands to Triton, and the
 * zero-copy wrapping of Triton's output memory. Pure TypeScript.
 *
 * Per-request paths (normalizeInput, outputTensor) do no per-element work
 * and no copies for numeric TypedArrays; BYTES are serialized once into
 * Triton's wire form (per element: 4-byte little-endian length, then bytes).
 */
import { Buffer } from 'node:buffer';

import { checkInteger, invalidParameterError } from './check.js';
import { TritonError } from './errors.js';
import { DATA_TYPE_INFO, DATA_TYPES, type DataType, type DataTypeInfo } from './data-types.js';
import type { SharedMemoryInput } from './shared-memory.js';

/** The `TRITONSERVER_DataType` value of a data type; throws INVALID_ARG for unknown names. */
export function dataTypeEnum(datatype: DataType): number {
  return checkDataType(datatype, 'datatype').enum;
}

function checkDataType(datatype: unknown, label: string): DataTypeInfo {
  const info = typeof datatype === 'string' && Object.hasOwn(DATA_TYPE_INFO, datatype)
    ? DATA_TYPE_INFO[datatype as DataType]
    : undefined;
  if (info === undefined) {
    throw new TritonError(
      'INVALID_ARG',
      `${label}: unknown datatype ${describe(datatype)} (expected one of ${DATA_TYPES.join(', ')})`,
    );
  }
  return info;
}

// ---------------------------------------------------------------------------
// JS representations.

/**
 * A `Float16Array` (ES2025), typed structurally because the project's lib
 * does not declare it; it exists at run time only where the engine has it.
 */
export interface Float16ArrayLike extends ArrayBufferView {
  /** Number of elements. */
  readonly length: number;
  /** Bytes per element: 2. */
  readonly BYTES_PER_ELEMENT: number;
  /** Always `'Float16Array'`: how the package tells the array's kind (across realms too). */
  readonly [Symbol.toStringTag]: 'Float16Array';
  [index: number]: number;
}

type Float16ArrayConstructorLike = new (buffer: ArrayBufferLike, byteOffset?: number, length?: number) => Float16ArrayLike;

/** The runtime's Float16Array, if any (looked up per use: cheap, and lets tests stub it). */
function float16ArrayConstructor(): Float16ArrayConstructorLike | undefined {
  return (globalThis as { Float16Array?: Float16ArrayConstructorLike }).Float16Array;
}

/** Every TypedArray (DataView is not one). */
export type TypedArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array
  | Float16ArrayLike
  | Float32Array
  | Float64Array;

/** Tensor data by data type. */
export interface TensorDataMap {
  /** One byte per element, 0 (false) or 1 (true). */
  BOOL: Uint8Array;
  /** Unsigned 8-bit integers. */
  UINT8: Uint8Array;
  /** Unsigned 16-bit integers. */
  UINT16: Uint16Array;
  /** Unsigned 32-bit integers. */
  UINT32: Uint32Array;
  /** Unsigned 64-bit integers, as bigints. */
  UINT64: BigUint64Array;
  /** Signed 8-bit integers. */
  INT8: Int8Array;
  /** Signed 16-bit integers. */
  INT16: Int16Array;
  /** Signed 32-bit integers. */
  INT32: Int32Array;
  /** Signed 64-bit integers, as bigints. */
  INT64: BigInt64Array;
  /**
   * IEEE half precision: a `Float16Array` where the runtime has one, else a
   * Uint16Array of the raw FP16 bits (see {@link float16BitsToFloat32}).
   */
  FP16: Float16ArrayLike | Uint16Array;
  /** IEEE single precision. */
  FP32: Float32Array;
  /** IEEE double precision. */
  FP64: Float64Array;
  /** Variable-length byte strings, one Uint8Array per element (see {@link Tensor.strings} for text). */
  BYTES: readonly Uint8Array[];
  /** bfloat16, as a Uint16Array of the raw bits (see {@link bfloat16BitsToFloat32}). */
  BF16: Uint16Array;
}

/** The data of a `Tensor<T>`. */
export type TensorData<T extends DataType> = TensorDataMap[T];

/** Plain JS values by data type, as returned by `Tensor.toArray()`. */
export interface TensorArrayMap {
  /** Booleans (element !== 0). */
  BOOL: boolean[];
  /** Numbers. */
  UINT8: number[];
  /** Numbers. */
  UINT16: number[];
  /** Numbers. */
  UINT32: number[];
  /** Bigints (64-bit values do not fit a number). */
  UINT64: bigint[];
  /** Numbers. */
  INT8: number[];
  /** Numbers. */
  INT16: number[];
  /** Numbers. */
  INT32: number[];
  /** Bigints (64-bit values do not fit a number). */
  INT64: bigint[];
  /** Numbers, decoded from half precision. */
  FP16: number[];
  /** Numbers. */
  FP32: number[];
  /** Numbers. */
  FP64: number[];
  /** A fresh array of the element views (the bytes are not copied). */
  BYTES: Uint8Array[];
  /** Numbers, decoded from bfloat16. */
  BF16: number[];
}

/** Data accepted as input. */
export type InputData =
  | TypedArray
  | readonly (string | Uint8Array)[]
  | readonly boolean[]
  | readonly number[]
  | readonly bigint[];

/** An input given as its parts; `datatype` defaults to the model's, then to what `data` implies. */
export interface TensorInit {
  /**
   * The data type. Default: the model's (from its metadata, when the caller
   * knows it), else the type `data` implies (Float32Array → FP32, ...).
   * Throws `TritonError('INVALID_ARG')` on infer when it contradicts the model's.
   */
  datatype?: DataType;
  /** Dimensions; their product must equal the number of elements of `data`. */
  shape: readonly number[];
  /** The elements, row-major; see {@link InputData}. */
  data: InputData;
}

/**
 * An input value: a Tensor, its parts, or bare data (shape `[length]`); for
 * the in-process server also a range of a shared memory region in place of
 * the data (`SharedMemoryInput`, see lib/shared-memory.ts).
 */
export type InputValue = Tensor | TensorInit | InputData | SharedMemoryInput;

/** An input as the addon takes it: `data` is the caller's own view for TypedArrays (no copy). @internal */
export interface NativeInput {
  /** The input's name, as the model declares it. */
  name: string;
  /** `TRITONSERVER_DataType` value. */
  datatype: number;
  /** Dimensions (a fresh array, validated: non-negative safe integers). */
  shape: number[];
  /** The bytes: the caller's TypedArray as is, converted array data, or BYTES in Triton's wire form. */
  data: ArrayBufferView;
}

/** The data type `Tensor.from` infers from the static type of its data. */
export type InferDataType<D> = D extends Float32Array
  ? 'FP32'
  : D extends Float64Array
    ? 'FP64'
    : D extends Float16ArrayLike
      ? 'FP16'
      : D extends Int8Array
        ? 'INT8'
        : D extends Int16Array
          ? 'INT16'
          : D extends Int32Array
            ? 'INT32'
            : D extends BigInt64Array
              ? 'INT64'
              : D extends BigUint64Array
                ? 'UINT64'
                : D extends Uint8ClampedArray
                  ? 'UINT8'
                  : D extends Uint8Array
                    ? 'UINT8'
                    : D extends Uint16Array
                      ? 'UINT16'
                      : D extends Uint32Array
                        ? 'UINT32'
                        : D extends readonly boolean[]
                          ? 'BOOL'
                          : D extends readonly (string | Uint8Array)[]
                            ? 'BYTES'
                            : D extends readonly bigint[]
                              ? 'INT64'
                              : DataType;

/** Options of `Tensor.from`. */
export interface TensorFromOptions<T extends DataType> {
  /** The tensor's name (used as the input name when it is passed by itself). Default `''`. */
  name?: string;
  /** Required for number[] data; picks FP16/BF16 for Uint16Array, BOOL for Uint8Array. */
  datatype?: T;
  /** Default `[length]`. */
  shape?: readonly number[];
}

// Per TypedArray kind (its Symbol.toStringTag, which works across realms and
// for Buffer): the data type it implies, and the data types it can carry.
const IMPLIED_DATATYPE: Readonly<Record<string, DataType>> = {
  Int8Array: 'INT8',
  Uint8Array: 'UINT8',
  Uint8ClampedArray: 'UINT8',
  Int16Array: 'INT16',
  Uint16Array: 'UINT16',
  Int32Array: 'INT32',
  Uint32Array: 'UINT32',
  BigInt64Array: 'INT64',
  BigUint64Array: 'UINT64',
  Float16Array: 'FP16',
  Float32Array: 'FP32',
  Float64Array: 'FP64',
};

const CARRIERS: { readonly [K in DataType]: readonly string[] } = {
  BOOL: ['Uint8Array'],
  UINT8: ['Uint8Array', 'Uint8ClampedArray'],
  UINT16: ['Uint16Array'],
  UINT32: ['Uint32Array'],
  UINT64: ['BigUint64Array'],
  INT8: ['Int8Array'],
  INT16: ['Int16Array'],
  INT32: ['Int32Array'],
  INT64: ['BigInt64Array'],
  FP16: ['Float16Array', 'Uint16Array'],
  FP32: ['Float32Array'],
  FP64: ['Float64Array'],
  BYTES: [],
  BF16: ['Uint16Array'],
};

const CARRIER_TEXT: { readonly [K in DataType]: string } = {
  BOOL: 'Uint8Array of 0/1 or boolean[]',
  UINT8: 'Uint8Array',
  UINT16: 'Uint16Array',
  UINT32: 'Uint32Array',
  UINT64: 'BigUint64Array',
  INT8: 'Int8Array',
  INT16: 'Int16Array',
  INT32: 'Int32Array',
  INT64: 'BigInt64Array',
  FP16: 'Float16Array or Uint16Array of FP16 bits',
  FP32: 'Float32Array',
  FP64: 'Float64Array',
  BYTES: 'an array of strings or Uint8Arrays',
  BF16: 'Uint16Array of BF16 bits',
};

type NumericDataType = Exclude<DataType, 'BYTES'>;
type ArrayConstructorOf = new (length: number) => ArrayBufferView & { readonly length: number };
type ViewConstructorOf = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => ArrayBufferView;

/** A view of `length` elements of a numeric type's storage array over existing memory. @internal */
export function storageView(datatype: Exclude<DataType, 'BYTES'>, buffer: ArrayBufferLike, byteOffset: number, length: number): ArrayBufferView {
  return new STORAGE[datatype](buffer, byteOffset, length);
}

/** The TypedArray that holds each type's bits (FP16: Uint16Array). */
const STORAGE: { readonly [K in NumericDataType]: ArrayConstructorOf & ViewConstructorOf } = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
  BF16: Uint16Array,
};

// By TRITONSERVER_DataType value, for outputs, which arrive as that number
// (an array read instead of keyed loads by name, which go megamorphic).
const ELEMENT_SIZE_BY_ENUM: number[] = [];
const STORAGE_BY_ENUM: Array<ArrayConstructorOf & ViewConstructorOf> = [];
for (const name of DATA_TYPES) {
  if (name === 'BYTES') continue;
  ELEMENT_SIZE_BY_ENUM[DATA_TYPE_INFO[name].enum] = DATA_TYPE_INFO[name].byteSize as number;
  STORAGE_BY_ENUM[DATA_TYPE_INFO[name].enum] = STORAGE[name];
}

/** The TypedArray kind of `value`, or undefined if it is not a TypedArray. */
function typedArrayKind(value: unknown): string | undefined {
  if (!ArrayBuffer.isView(value)) return undefined;
  const tag = (value as { [Symbol.toStringTag]?: unknown })[Symbol.toStringTag];
  return typeof tag === 'string' && Object.hasOwn(IMPLIED_DATATYPE, tag) ? tag : undefined;
}

// ---------------------------------------------------------------------------
// FP16 / BF16 bits.

function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const rest = value - floor;
  return rest > 0.5 || (rest === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
}

/**
 * IEEE-754 binary encoding of `x` with `expBits`/`mantBits`, rounding the
 * exact value of x to nearest, ties to even; overflow gives ±Infinity,
 * NaN the quiet NaN. Power-of-two scalings keep every step exact.
 */
function encodeFloat(x: number, expBits: number, mantBits: number): number {
  const bias = (1 << (expBits - 1)) - 1;
  const infinity = ((1 << expBits) - 1) << mantBits;
  if (Number.isNaN(x)) return infinity | (1 << (mantBits - 1));
  const sign = x < 0 || Object.is(x, -0) ? 1 << (expBits + mantBits) : 0;
  const a = Math.abs(x);
  if (a === Infinity) return sign | infinity;
  const minExponent = 1 - bias;
  if (a < 2 ** minExponent) {
    // Subnormal: units of 2^(minExponent - mantBits); rounding up to 1 << mantBits is the smallest normal.
    return sign | roundHalfEven(a * 2 ** (mantBits - minExponent));
  }
  let exponent = Math.floor(Math.log2(a));
  if (2 ** exponent > a) exponent--;
  else if (2 ** (exponent + 1) <= a) exponent++;
  if (exponent > bias) return sign | infinity;
  const significand = roundHalfEven(a * 2 ** (mantBits - exponent)); // in [2^m, 2^(m+1)]
  const bits = ((exponent + bias) << mantBits) + significand - (1 << mantBits); // carry moves the exponent
  return sign | Math.min(bits, infinity);
}

function decodeFloat(bits: number, expBits: number, mantBits: number): number {
  const bias = (1 << (expBits - 1)) - 1;
  const maxExponent = (1 << expBits) - 1;
  const sign = (bits >>> (expBits + mantBits)) & 1 ? -1 : 1;
  const exponent = (bits >>> mantBits) & maxExponent;
  const mantissa = bits & ((1 << mantBits) - 1);
  if (exponent === 0) return sign * mantissa * 2 ** (1 - bias - mantBits);
  if (exponent === maxExponent) return mantissa === 0 ? sign * Infinity : Number.NaN;
  return sign * (mantissa + (1 << mantBits)) * 2 ** (exponent - bias - mantBits);
}

/**
 * The IEEE half-precision bits nearest to `x` (round to nearest, ties to
 * even; beyond ±65504 rounds to ±Infinity; NaN → 0x7e00). `x` is rounded
 * from its exact value, which for float32 inputs is the usual float32→half.
 */
export function float32ToFloat16Bits(x: number): number {
  checkNumber('float32ToFloat16Bits(x)', x);
  return encodeFloat(x, 5, 10);
}

/** The value of IEEE half-precision bits (exact). */
export function float16BitsToFloat32(bits: number): number {
  checkInteger('float16BitsToFloat32(bits)', bits, 0, 0xffff);
  return decodeFloat(bits, 5, 10);
}

/**
 * The bfloat16 bits nearest to `x` (round to nearest, ties to even; NaN →
 * 0x7fc0). For float32 inputs this equals rounding the float32's top half.
 */
export function float32ToBfloat16Bits(x: number): number {
  checkNumber('float32ToBfloat16Bits(x)', x);
  return encodeFloat(x, 8, 7);
}

/** The value of bfloat16 bits (exact). */
export function bfloat16BitsToFloat32(bits: number): number {
  checkInteger('bfloat16BitsToFloat32(bits)', bits, 0, 0xffff);
  return decodeFloat(bits, 8, 7);
}

function checkNumber(name: string, value: unknown): void {
  if (typeof value !== 'number') throw invalidParameterError(name, 'a number', value);
}

// ---------------------------------------------------------------------------
// BYTES wire form.

const LENGTH_PREFIX = 4;
const UINT32_MAX = 0xffff_ffff;

/**
 * Serializes BYTES elements into Triton's wire form: per element a 4-byte
 * little-endian length, then the bytes (strings UTF-8 encoded). One
 * allocation, each element written once.
 */
export function encodeBytes(elements: readonly (string | Uint8Array)[]): Uint8Array {
  if (!Array.isArray(elements)) throw invalidParameterError('encodeBytes(elements)', 'an array of strings or Uint8Arrays', elements);
  return serializeBytes(elements, 'BYTES data', 'exact');
}

/**
 * Up to this many UTF-16 units of strings in all, an input's strings are
 * written in one pass into room for their longest UTF-8 form (3 bytes per
 * unit) instead of being measured first: the request's view then ends where
 * the bytes do, and the spare room (at most 48 KiB) goes with the request.
 */
const ONE_PASS_UNITS = 16 * 1024;
/** ASCII strings this short are written by a loop here: a call into Buffer's C++ per string costs more. */
const SHORT_STRING = 16;

/**
 * Where a wire form goes: `exact`, a view of a whole buffer of its own
 * (encodeBytes(), whose result callers may use as a buffer); `own`, a buffer
 * of its own the view may end before (Tensor.from()); `input`, an infer()
 * input nobody else sees, which may be cut from the shared slab.
 */
type BytesForm = 'exact' | 'own' | 'input';

function serializeBytes(elements: readonly unknown[], label: string, form: BytesForm): Uint8Array {
  const count = elements.length;
  let units = 0;
  let binary = 0;
  for (let i = 0; i < count; i++) {
    const element = elements[i];
    if (typeof element === 'string') {
      units += element.length;
    } else if (typedArrayKind(element) === 'Uint8Array') {
      const length = (element as Uint8Array).byteLength;
      if (length > UINT32_MAX) throw tooLong(label, i, length);
      binary += length;
    } else {
      throw invalid(`${label}: BYTES element ${i} is ${describe(element)}; expected a string or a Uint8Array`);
    }
  }
  const onePass = form !== 'exact' && units <= ONE_PASS_UNITS;
  let total = LENGTH_PREFIX * count + binary;
  if (onePass) {
    total += 3 * units;
  } else if (units > 0) {
    for (let i = 0; i < count; i++) {
      const element = elements[i];
      if (typeof element !== 'string') continue;
      const length = Buffer.byteLength(element, 'utf8');
      if (length > UINT32_MAX) throw tooLong(label, i, length);
      total += length;
    }
  }

  const at = form === 'input' ? cutFromSlab(total) : -1;
  const wire = at < 0 ? new Uint8Array(total) : slab.subarray(at, at + total);
  const lengths = new DataView(wire.buffer, wire.byteOffset, total);
  let text: Buffer | undefined;
  let offset = 0;
  for (let i = 0; i < count; i++) {
    const element = elements[i] as string | Uint8Array;
    const start = offset + LENGTH_PREFIX;
    let length: number;
    if (typeof element === 'string') {
      length = writeShortAscii(element, wire, start);
      if (length < 0) {
        text ??= Buffer.from(wire.buffer, wire.byteOffset, total);
        length = text.write(element, start, total - start, 'utf8');
      }
    } else {
      wire.set(element, start);
      length = element.byteLength;
    }
    lengths.setUint32(offset, length, true);
    offset = start + length;
  }
  if (onePass) {
    if (offset === total) return wire;
    if (at >= 0) giveBackToSlab(at, total, offset);
    return wire.subarray(0, offset);
  }
  if (offset !== total) {
    throw new TritonError('INTERNAL', `${label}: BYTES serialization wrote ${offset} of ${total} bytes`);
  }
  return wire;
}

/**
 * The memory of small inputs the package makes from arrays is cut from a
 * slab, as Buffer.allocUnsafe() does from its pool but the package's own: a
 * backing store per request (malloc, and a free at a later GC; for 64 bytes
 * or less, made when the addon first reads the array) cost more than
 * encoding 32 short strings. Cuts are 8-byte aligned and never reused, so
 * each starts zeroed; a slab goes once no cut of it is referenced (Triton's
 * requests hold theirs until released). Nobody else sees them: Tensor.from()
 * makes buffers of their own, the caller's to keep or transfer.
 */
const SLAB_BYTES = 32 * 1024;
const SLAB_CUT_UP_TO = 2 * 1024;
let slab = new Uint8Array(0);
let slabUsed = 0;

/** Where `size` fresh bytes start in `slab` (which may be a new one), or -1 above SLAB_CUT_UP_TO. */
function cutFromSlab(size: number): number {
  if (size > SLAB_CUT_UP_TO) return -1;
  let at = (slabUsed + 7) & ~7;
  if (at + size > slab.length) {
    slab = new Uint8Array(SLAB_BYTES);
    at = 0;
  }
  slabUsed = at + size;
  return at;
}

/** The cut at `at` of `size` bytes used only `used`: the rest goes back if nothing was cut after it. */
function giveBackToSlab(at: number, size: number, used: number): void {
  if (slabUsed === at + size) slabUsed = at + used;
}

/** Writes `text` at `start` and returns its length if it is short and ASCII; otherwise -1 (what it wrote is overwritten). */
function writeShortAscii(text: string, wire: Uint8Array, start: number): number {
  const length = text.length;
  if (length > SHORT_STRING) return -1;
  for (let i = 0; i < length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) return -1;
    wire[start + i] = unit;
  }
  return length;
}

function tooLong(label: string, index: number, length: number): TritonError {
  return invalid(`${label}: BYTES element ${index} has ${length} bytes; at most ${UINT32_MAX} fit Triton's length prefix`);
}

/**
 * Counts the elements of a wire-form BYTES buffer, checking its structure.
 * Throws INTERNAL when malformed or when the count differs from `expected`.
 */
function countBytes(buffer: Uint8Array, expected: number | undefined, label: string): number {
  const end = buffer.byteLength;
  const view = new DataView(buffer.buffer, buffer.byteOffset, end);
  let count = 0;
  let offset = 0;
  while (offset < end) {
    offset = nextBytesElement(view, offset, count, label);
    count++;
  }
  if (expected !== undefined && count !== expected) {
    throw new TritonError('INTERNAL', `${label}: BYTES data has ${count} elements but the shape needs ${expected}`);
  }
  return count;
}

/** The offset after the element at `offset`; INTERNAL error if it does not fit. */
function nextBytesElement(view: DataView, offset: number, index: number, label: string): number {
  const end = view.byteLength;
  if (end - offset < LENGTH_PREFIX) {
    throw new TritonError(
      'INTERNAL',
      `${label}: malformed BYTES data: ${end - offset} trailing bytes at offset ${offset} cannot hold the length of element ${index}`,
    );
  }
  const length = view.getUint32(offset, true);
  const start = offset + LENGTH_PREFIX;
  if (length > end - start) {
    throw new TritonError(
      'INTERNAL',
      `${label}: malformed BYTES data: element ${index} at offset ${offset} claims ${length} bytes but only ${end - start} remain`,
    );
  }
  return start + length;
}

/**
 * Splits a wire-form BYTES buffer into its elements: views into `buffer`, no
 * copies. Throws `TritonError('INVALID_ARG')` if the buffer is malformed or,
 * when `expectedCount` is given, holds a different number of elements.
 */
export function decodeBytes(buffer: Uint8Array, expectedCount?: number): Uint8Array[] {
  if (!(buffer instanceof Uint8Array)) throw invalidParameterError('decodeBytes(buffer)', 'a Uint8Array', buffer);
  if (expectedCount !== undefined) checkInteger('decodeBytes(expectedCount)', expectedCount, 0);
  try {
    return splitBytes(buffer, expectedCount, 'decodeBytes');
  } catch (error) {
    // Malformed data here is the caller's argument, not Triton's output.
    if (error instanceof TritonError) throw new TritonError('INVALID_ARG', error.message);
    throw error;
  }
}

/**
 * @internal For the KServe decoders.
 * A BYTES tensor over its wire form, checked against `shape` as decodeBytes()
 * checks (INVALID_ARG): its elements become views only if `data` is read, so
 * many small elements received cost their bytes, not an object each.
 */
export function bytesTensor(name: string, shape: number[], wire: Uint8Array): Tensor<'BYTES'> {
  const size = shape.reduce((product, dim) => product * dim, 1);
  try {
    countBytes(wire, size, 'decodeBytes');
  } catch (error) {
    if (error instanceof TritonError) throw new TritonError('INVALID_ARG', error.message);
    throw error;
  }
  return constructTensor(name, 'BYTES', shape, size, undefined, wire);
}

function splitBytes(buffer: Uint8Array, expected: number | undefined, label: string): Uint8Array[] {
  const end = buffer.byteLength;
  const view = new DataView(buffer.buffer, buffer.byteOffset, end);
  const elements: Uint8Array[] = [];
  let offset = 0;
  while (offset < end) {
    const next = nextBytesElement(view, offset, elements.length, label);
    elements.push(buffer.subarray(offset + LENGTH_PREFIX, next));
    offset = next;
  }
  if (expected !== undefined && elements.length !== expected) {
    throw new TritonError(
      'INTERNAL',
      `${label}: BYTES data has ${elements.length} elements but the shape needs ${expected}`,
    );
  }
  return elements;
}

// ---------------------------------------------------------------------------
// Tensor.

let constructTensor!: <T extends DataType>(
  name: string,
  datatype: T,
  shape: number[],
  size: number,
  data: TensorData<T> | undefined,
  wire: Uint8Array | undefined,
) => Tensor<T>;
let tensorWire!: (tensor: Tensor) => Uint8Array | undefined;

/**
 * A named, typed, shaped block of data. Numeric data is a TypedArray (never
 * copied when given as one); BYTES data is kept in Triton's wire form and
 * split into element views on first use of `data`.
 */
export class Tensor<T extends DataType = DataType> {
  /** The tensor's name: the output's name for results, `''` when {@link Tensor.from} was given none. */
  readonly name: string;
  /** The data type, which decides the type of {@link Tensor.data} (see {@link TensorDataMap}). */
  readonly datatype: T;
  /** Dimensions, row-major; their product is {@link Tensor.size}. */
  readonly shape: number[];
  /** Number of elements (product of the shape). */
  readonly size: number;
  #data: TensorData<T> | undefined;
  /** BYTES only: the wire form, which owns the element bytes. */
  readonly #wire: Uint8Array | undefined;

  private constructor(
    name: string,
    datatype: T,
    shape: number[],
    size: number,
    data: TensorData<T> | undefined,
    wire: Uint8Array | undefined,
  ) {
    this.name = name;
    this.datatype = datatype;
    this.shape = shape;
    this.size = size;
    this.#data = data;
    this.#wire = wire;
  }

  static {
    constructTensor = (name, datatype, shape, size, data, wire) => new Tensor(name, datatype, shape, size, data, wire);
    tensorWire = (tensor) => tensor.#wire;
  }

  /**
   * A tensor from data. The data type is inferred from the array type unless
   * given (Uint16Array means UINT16 unless `datatype` says FP16 or BF16;
   * boolean[] → BOOL; string[]/Uint8Array[] → BYTES; bigint[] → INT64;
   * number[] needs `datatype`). `shape` defaults to `[length]`. TypedArrays
   * are used as they are, not copied.
   */
  static from<D extends InputData, T extends DataType = InferDataType<D>>(
    data: D,
    options: TensorFromOptions<T> = {},
  ): Tensor<T> {
    const name = options.name ?? '';
    const label = name === '' ? 'Tensor.from' : `tensor '${name}'`;
    if (options.datatype !== undefined) checkDataType(options.datatype, label);
    const parts = resolveParts(label, data, options.datatype, undefined, options.shape, false);
    const datatype = parts.datatype as T;
    if (datatype === 'BYTES') {
      return constructTensor(name, datatype, parts.shape, parts.size, undefined, parts.data as Uint8Array);
    }
    let view = parts.data;
    const Float16 = datatype === 'FP16' && parts.converted ? float16ArrayConstructor() : undefined;
    if (Float16 !== undefined) view = new Float16(view.buffer, view.byteOffset, parts.size);
    return constructTensor(name, datatype, parts.shape, parts.size, view as TensorData<T>, undefined);
  }

  /** The elements. BYTES: views into the tensor's wire-form buffer. */
  get data(): TensorData<T> {
    if (this.#data === undefined) {
      this.#data = splitBytes(this.#wire as Uint8Array, this.size, describeTensor(this)) as unknown as TensorData<T>;
    }
    return this.#data;
  }

  /** Bytes of data: the TypedArray's byteLength, or for BYTES the sum of element lengths. */
  get byteLength(): number {
    const wire = this.#wire;
    if (wire !== undefined) return wire.byteLength - LENGTH_PREFIX * this.size;
    return (this.#data as ArrayBufferView).byteLength;
  }

  /** BYTES only: each element decoded as UTF-8 (invalid sequences become U+FFFD). */
  strings(): string[] {
    const wire = this.#wire;
    if (wire === undefined) {
      throw invalid(`${describeTensor(this)} is ${this.datatype}; strings() needs BYTES`);
    }
    const text = Buffer.from(wire.buffer, wire.byteOffset, wire.byteLength);
    const out = new Array<string>(this.size);
    let offset = 0;
    for (let i = 0; i < this.size; i++) {
      const start = offset + LENGTH_PREFIX;
      const end = start + text.readUInt32LE(offset);
      out[i] = text.toString('utf8', start, end);
      offset = end;
    }
    return out;
  }

  /**
   * The elements as plain JS values: numbers (FP16/BF16 decoded), bigints for
   * 64-bit integers, booleans for BOOL, a fresh array of views for BYTES.
   */
  toArray(): TensorArrayMap[T] {
    const data = this.data as TensorData<DataType>;
    let out: TensorArrayMap[DataType];
    switch (this.datatype) {
      case 'BOOL':
        out = Array.from(data as Uint8Array, (v) => v !== 0);
        break;
      case 'BYTES':
        out = [...(data as readonly Uint8Array[])];
        break;
      case 'INT64':
      case 'UINT64':
        out = Array.from(data as BigInt64Array);
        break;
      case 'BF16':
        out = Array.from(data as Uint16Array, bfloat16BitsToFloat32);
        break;
      case 'FP16':
        out = typedArrayKind(data) === 'Float16Array'
          ? Array.from(data as ArrayLike<number>)
          : Array.from(data as Uint16Array, float16BitsToFloat32);
        break;
      default:
        out = Array.from(data as ArrayLike<number>);
    }
    return out as TensorArrayMap[T];
  }
}

function describeTensor(tensor: Tensor): string {
  return tensor.name === '' ? 'tensor' : `tensor '${tensor.name}'`;
}

// ---------------------------------------------------------------------------
// Inputs.

interface Parts {
  datatype: DataType;
  shape: number[];
  size: number;
  /** The caller's TypedArray, converted array data, or BYTES wire form. */
  data: ArrayBufferView;
  /** Whether `data` was made here from a JS array. */
  converted: boolean;
}

/**
 * The TypedArray a data type is stored in, where that array implies the
 * type (FP32 → Float32Array); BOOL, FP16 and BF16, whose arrays imply
 * another type, take normalizeInput's path.
 */
const OWN_CARRIER: Partial<Record<DataType, ViewConstructorOf>> = Object.fromEntries(
  Object.entries(STORAGE).filter(([datatype, View]) => IMPLIED_DATATYPE[View.name] === datatype),
);

/**
 * The common input forms read without intermediate objects: the data type's
 * own TypedArray, bare or as `{ shape, data }` (with no datatype or the
 * model's). Appends name, datatype enum, rank, dims… and data to `fields`
 * and returns the shape (the caller's, not copied: read at once); returns
 * undefined, appending nothing, for anything else, which normalizeInput
 * then takes (and explains when it is wrong).
 * @internal
 */
export function appendPlainInput<Name>(
  fields: Array<Name | number | ArrayBufferView>,
  name: Name,
  value: unknown,
  expected: DataType,
): readonly number[] | undefined {
  const carrier = OWN_CARRIER[expected];
  if (carrier === undefined || typeof value !== 'object' || value === null) return undefined;
  // isView: a real TypedArray, not an object posing with its constructor.
  if (ArrayBuffer.isView(value) && value.constructor === carrier) {
    const length = (value as TypedArray).length;
    fields.push(name, DATA_TYPE_INFO[expected].enum, 1, length, value as ArrayBufferView);
    return [length];
  }
  if (value.constructor !== Object) return undefined;
  const { data, shape, datatype } = value as { data?: unknown; shape?: unknown; datatype?: unknown };
  if (!ArrayBuffer.isView(data) || data.constructor !== carrier) return undefined;
  if ((datatype !== undefined && datatype !== expected) || !Array.isArray(shape)) return undefined;
  let product = 1;
  for (let i = 0; i < shape.length; i++) {
    const dim: unknown = shape[i];
    if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 0) return undefined;
    product *= dim;
  }
  if (product !== (data as TypedArray).length) return undefined;
  fields.push(name, DATA_TYPE_INFO[expected].enum, shape.length);
  for (let i = 0; i < shape.length; i++) fields.push(shape[i] as number);
  fields.push(data as ArrayBufferView);
  return shape as number[];
}

/**
 * Converts one input into what the addon takes. TypedArrays are passed
 * through as the same view (no copy); JS arrays are converted once; BYTES
 * are serialized once (and a BYTES Tensor's wire form is reused). The data
 * type is the value's own (Tensor, `datatype` field, array type) or, when the
 * value does not name one, `expectedDatatype` (the model's). Shared memory
 * inputs are not taken here (the in-process server reads those itself).
 *
 * @param name - The input's name, used in error messages too.
 * @param value - The input as the caller gave it.
 * @param expectedDatatype - The model's data type for this input, if known.
 * @throws {@link TritonError} `INVALID_ARG` naming the input: unknown data
 *   type, a data type other than the model's, a shape that does not match the
 *   data, data of the wrong kind, or a shared memory input.
 * @internal
 */
export function normalizeInput(name: string, value: InputValue, expectedDatatype?: DataType): NativeInput {
  const label = `input '${name}'`;
  if (expectedDatatype !== undefined) checkDataType(expectedDatatype, `${label} (model metadata)`);

  if (value instanceof Tensor) {
    const datatype = value.datatype;
    if (expectedDatatype !== undefined && datatype !== expectedDatatype) {
      throw invalid(`${label}: the tensor is ${datatype} but the model expects ${expectedDatatype}`);
    }
    const shape = copyShape(label, value.shape, value.size);
    return { name, datatype: DATA_TYPE_INFO[datatype].enum, shape, data: tensorBytes(value) };
  }

  if (typeof value === 'object' && value !== null && !ArrayBuffer.isView(value) && 'sharedMemory' in value) {
    throw invalid(`${label}: shared memory inputs are read by the in-process server only (server.sharedMemory)`);
  }
  let parts: Parts;
  if (ArrayBuffer.isView(value) || Array.isArray(value)) {
    parts = resolveParts(label, value, undefined, expectedDatatype, undefined, true);
  } else if (typeof value === 'object' && value !== null && 'data' in value) {
    const init = value as TensorInit;
    if (init.datatype !== undefined) {
      checkDataType(init.datatype, label);
      if (expectedDatatype !== undefined && init.datatype !== expectedDatatype) {
        throw invalid(`${label}: datatype ${init.datatype} was given but the model expects ${expectedDatatype}`);
      }
    }
    if (init.shape === undefined) throw invalid(`${label}: { datatype, shape, data } needs a shape`);
    parts = resolveParts(label, init.data, init.datatype, expectedDatatype, init.shape, true);
  } else {
    throw invalid(
      `${label}: expected a Tensor, a TypedArray, an array or { datatype, shape, data }, got ${describe(value)}`,
    );
  }
  return { name, datatype: DATA_TYPE_INFO[parts.datatype].enum, shape: parts.shape, data: parts.data };
}

/**
 * Data type, shape and bytes of `data`; `named` is the value's own data type,
 * `expected` the model's; `forInput`: made for an infer() input, so memory
 * made from an array may be cut from the slab.
 */
function resolveParts(
  label: string,
  data: unknown,
  named: DataType | undefined,
  expected: DataType | undefined,
  shape: readonly number[] | undefined,
  forInput: boolean,
): Parts {
  let datatype = named ?? expected;
  let view: ArrayBufferView;
  let count: number;
  let converted = false;

  const kind = typedArrayKind(data);
  if (kind !== undefined) {
    const implied = IMPLIED_DATATYPE[kind] as DataType;
    datatype ??= implied;
    if (!CARRIERS[datatype].includes(kind)) {
      throw invalid(`${label}: a ${kind} cannot carry ${datatype} data (expected ${CARRIER_TEXT[datatype]})`);
    }
    view = data as ArrayBufferView;
    count = (data as TypedArray).length;
  } else if (Array.isArray(data)) {
    datatype ??= impliedByElements(label, data);
    view =
      datatype === 'BYTES'
        ? serializeBytes(data, label, forInput ? 'input' : 'own')
        : convertArray(label, data, datatype, forInput);
    count = data.length;
    converted = true;
  } else if (ArrayBuffer.isView(data)) {
    throw invalid(`${label}: a ${viewName(data)} cannot carry tensor data (expected a TypedArray or an array)`);
  } else {
    throw invalid(`${label}: data must be a TypedArray or an array, got ${describe(data)}`);
  }

  if (shape === undefined) return { datatype, shape: [count], size: count, data: view, converted };
  return { datatype, shape: copyShape(label, shape, count), size: count, data: view, converted };
}

/** The data type a JS array's elements imply. */
function impliedByElements(label: string, data: readonly unknown[]): DataType {
  if (data.length === 0) {
    throw invalid(`${label}: cannot infer the datatype of an empty array; give a datatype`);
  }
  const first = data[0];
  if (typeof first === 'string' || typedArrayKind(first) === 'Uint8Array') return 'BYTES';
  if (typeof first === 'boolean') return 'BOOL';
  if (typeof first === 'bigint') return 'INT64';
  if (typeof first === 'number') {
    throw invalid(
      `${label}: a number[] needs a datatype (e.g. { datatype: 'FP32', shape, data }), or pass a TypedArray`,
    );
  }
  throw invalid(`${label}: element 0 is ${describe(first)}; expected a number, bigint, boolean, string or Uint8Array`);
}

const INTEGER_RANGES: Readonly<Partial<Record<DataType, readonly [number, number]>>> = {
  UINT8: [0, 0xff],
  UINT16: [0, 0xffff],
  UINT32: [0, 0xffff_ffff],
  INT8: [-0x80, 0x7f],
  INT16: [-0x8000, 0x7fff],
  INT32: [-0x8000_0000, 0x7fff_ffff],
};

const BIGINT_RANGES: Readonly<Partial<Record<DataType, readonly [bigint, bigint]>>> = {
  INT64: [-(2n ** 63n), 2n ** 63n - 1n],
  UINT64: [0n, 2n ** 64n - 1n],
};

/**
 * Converts a JS array of numbers, bigints or booleans into `datatype`'s
 * storage, checking each element; `input`: made for an infer() input (its
 * memory may be cut from the slab).
 */
function convertArray(label: string, data: ArrayLike<unknown>, datatype: NumericDataType, input: boolean): ArrayBufferView {
  const count = data.length;
  const Storage = STORAGE[datatype];
  const at = input ? cutFromSlab(count * (DATA_TYPE_INFO[datatype].byteSize as number)) : -1;
  const out = (at < 0 ? new Storage(count) : new Storage(slab.buffer, at, count)) as unknown as {
    [index: number]: number | bigint;
  } & ArrayBufferView;
  const bad = (index: number, why: string): TritonError => invalid(`${label}: element ${index} ${why}`);

  if (datatype === 'BOOL') {
    for (let i = 0; i < count; i++) {
      const v = data[i];
      if (typeof v === 'boolean') out[i] = v ? 1 : 0;
      else if (v === 0 || v === 1) out[i] = v;
      else throw bad(i, `is ${describe(v)}; BOOL takes true/false (or 0/1)`);
    }
    return out;
  }

  const bigRange = BIGINT_RANGES[datatype];
  if (bigRange !== undefined) {
    const [min, max] = bigRange;
    for (let i = 0; i < count; i++) {
      const v = data[i];
      let b: bigint;
      if (typeof v === 'bigint') b = v;
      else if (typeof v === 'number' && Number.isSafeInteger(v)) b = BigInt(v);
      else if (typeof v === 'number') {
        throw bad(i, `(${v}) is not a safe integer; give ${datatype} values beyond 2^53 as bigint`);
      } else throw bad(i, `is ${describe(v)}; expected a number or bigint`);
      if (b < min || b > max) throw bad(i, `(${b}) is out of range for ${datatype} (${min}..${max})`);
      out[i] = b;
    }
    return out;
  }

  const intRange = INTEGER_RANGES[datatype];
  for (let i = 0; i < count; i++) {
    const v = data[i];
    if (typeof v !== 'number') {
      throw bad(
        i,
        typeof v === 'bigint'
          ? `is a bigint; bigint elements are only accepted for INT64 and UINT64`
          : `is ${describe(v)}; expected a number`,
      );
    }
    if (intRange !== undefined) {
      if (!Number.isInteger(v)) throw bad(i, `(${v}) is not an integer (${datatype})`);
      if (v < intRange[0] || v > intRange[1]) {
        throw bad(i, `(${v}) is out of range for ${datatype} (${intRange[0]}..${intRange[1]})`);
      }
      out[i] = v;
    } else if (datatype === 'FP64') {
      out[i] = v;
    } else if (datatype === 'FP32') {
      if (Number.isFinite(v) && !Number.isFinite(Math.fround(v))) {
        throw bad(i, `(${v}) is out of range for FP32 (max ±3.4028234663852886e38)`);
      }
      out[i] = v;
    } else {
      const bits = datatype === 'FP16' ? float32ToFloat16Bits(v) : float32ToBfloat16Bits(v);
      const infinity = datatype === 'FP16' ? 0x7c00 : 0x7f80;
      if (Number.isFinite(v) && (bits & 0x7fff) === infinity) {
        const max = datatype === 'FP16' ? '65504' : '3.3895313892515355e38';
        throw bad(i, `(${v}) is out of range for ${datatype} (max ±${max})`);
      }
      out[i] = bits;
    }
  }
  return out;
}

/**
 * @internal For the KServe decoders.
 * `datatype`'s storage for numbers held elsewhere (an Int32Array of a
 * protobuf's int_contents for INT8, say), each element checked as an array's
 * are: a range error names `label` and the element.
 */
export function numbersToStorage(label: string, data: ArrayLike<unknown>, datatype: NumericDataType): ArrayBufferView {
  return convertArray(label, data, datatype, false);
}

/** Validates a shape against an element count and returns a copy. */
function copyShape(label: string, shape: readonly number[], count: number): number[] {
  if (!Array.isArray(shape)) throw invalid(`${label}: shape must be an array of dimensions, got ${describe(shape)}`);
  const copy = new Array<number>(shape.length);
  let product = 1;
  for (let i = 0; i < shape.length; i++) {
    const dim = shape[i];
    if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 0) {
      throw invalid(
        `${label}: shape [${shape.map(String).join(', ')}] has an invalid dimension ${describe(dim)} at index ${i} ` +
          '(dimensions are non-negative integers; -1 is only for model configurations)',
      );
    }
    copy[i] = dim;
    product *= dim;
  }
  if (product !== count) {
    throw invalid(
      `${label}: shape [${shape.join(', ')}] needs ${product} element${product === 1 ? '' : 's'} but the data has ${count}`,
    );
  }
  return copy;
}

// ---------------------------------------------------------------------------
// Outputs.

/** The memory a tensor's elements are in (BYTES: its wire form). @internal */
export function tensorBytes(tensor: Tensor): ArrayBufferView {
  return tensorWire(tensor) ?? (tensor.data as ArrayBufferView);
}

/**
 * Wraps Triton output memory as a Tensor without copying: a TypedArray view
 * over `buffer` (FP16 as Float16Array where the runtime has it, else
 * Uint16Array bits; BF16 as Uint16Array bits), or for BYTES the wire form
 * whose elements become views on first use. Only a misaligned numeric
 * `byteOffset` forces a copy, and `copy` (bytes in the buffer the addon
 * shares between small outputs). Throws `TritonError('INTERNAL')` when the
 * bytes do not match the shape and `UNSUPPORTED` for an unknown data type.
 * @internal
 */
export function outputTensor(
  name: string,
  datatype: number,
  shape: number[],
  buffer: ArrayBufferLike,
  byteOffset = 0,
  byteLength: number = buffer.byteLength - byteOffset,
  copy = false,
): Tensor {
  const dt = Number.isInteger(datatype) ? DATA_TYPES[datatype - 1] : undefined;
  if (dt === undefined) {
    throw new TritonError('UNSUPPORTED', `output '${name}': unknown TRITONSERVER_DataType value ${datatype}`);
  }
  if (
    !Number.isSafeInteger(byteOffset) ||
    !Number.isSafeInteger(byteLength) ||
    byteOffset < 0 ||
    byteLength < 0 ||
    byteOffset + byteLength > buffer.byteLength
  ) {
    throw new TritonError(
      'INTERNAL',
      `output '${name}': bytes ${byteOffset}..${byteOffset + byteLength} lie outside its ${buffer.byteLength}-byte buffer`,
    );
  }
  const size = outputSize(name, shape);

  if (dt === 'BYTES') {
    let wire = new Uint8Array(buffer, byteOffset, byteLength);
    if (copy) wire = wire.slice();
    countBytes(wire, size, `output '${name}'`);
    return constructTensor(name, dt, shape, size, undefined, wire);
  }

  const elementSize = ELEMENT_SIZE_BY_ENUM[datatype]!;
  if (byteLength !== size * elementSize) {
    throw new TritonError(
      'INTERNAL',
      `output '${name}': ${byteLength} bytes do not match shape [${shape.join(', ')}] of ${dt} (${size * elementSize} expected)`,
    );
  }
  let source = buffer;
  let offset = byteOffset;
  if (offset % elementSize !== 0) {
    source = buffer.slice(offset, offset + byteLength);
    offset = 0;
  }
  const View: ViewConstructorOf = (dt === 'FP16' ? float16ArrayConstructor() : undefined) ?? STORAGE_BY_ENUM[datatype]!;
  type Data = TensorData<typeof dt>;
  if (copy && size <= COPY_BY_ELEMENT_UP_TO && isIntegerView(View)) {
    return constructTensor(name, dt, shape, size, copyElements(View, datatype, elementSize, source, offset / elementSize, size) as Data, undefined);
  }
  let data = new View(source, offset, size) as Data;
  // Every element type's view (Float16Array too) has slice().
  if (copy) data = (data as unknown as { slice(): Data }).slice();
  return constructTensor(name, dt, shape, size, data, undefined);
}

/**
 * Up to this many elements, a copied output is filled element by element
 * from a view of the whole source kept per data type, instead of a view of
 * its bytes and slice(): one typed array made instead of two (small outputs
 * share one source buffer per drain). Integer views only: 64-bit elements
 * would be read as BigInts, and a float read and written back may not keep
 * a NaN's bits.
 */
const COPY_BY_ELEMENT_UP_TO = 16;
const isIntegerView = (View: ViewConstructorOf): boolean =>
  View === Int32Array || View === Uint32Array || View === Uint8Array || View === Int8Array || View === Uint16Array || View === Int16Array;
const copySourceViews: Array<(ArrayLike<number> & { readonly buffer: ArrayBufferLike }) | undefined> = [];

function copyElements(
  View: ViewConstructorOf,
  datatype: number,
  elementSize: number,
  source: ArrayBufferLike,
  first: number,
  count: number,
): unknown {
  let from = copySourceViews[datatype];
  if (from === undefined || from.buffer !== source) {
    from = copySourceViews[datatype] = new View(source, 0, Math.floor(source.byteLength / elementSize)) as unknown as ArrayLike<number> & {
      readonly buffer: ArrayBufferLike;
    };
  }
  const to = new (View as unknown as new (length: number) => { [index: number]: number })(count);
  for (let i = 0; i < count; i++) to[i] = from[first + i]!;
  return to;
}

function outputSize(name: string, shape: readonly number[]): number {
  let size = 1;
  for (const dim of shape) {
    if (!Number.isSafeInteger(dim) || dim < 0) {
      throw new TritonError('INTERNAL', `output '${name}': invalid shape [${shape.join(', ')}]`);
    }
    size *= dim;
  }
  return size;
}

// ---------------------------------------------------------------------------

function invalid(message: string): TritonError {
  return new TritonError('INVALID_ARG', message);
}

function viewName(value: ArrayBufferView): string {
  const tag = (value as { [Symbol.toStringTag]?: unknown })[Symbol.toStringTag];
  return typeof tag === 'string' ? tag : 'ArrayBufferView';
}

/** A short rendering of any value for messages. */
function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (ArrayBuffer.isView(value)) return `a ${viewName(value)}`;
  switch (typeof value) {
    case 'string':
      return `'${value.length > 40 ? `${value.slice(0, 37)}...` : value}'`;
    case 'number':
    case 'boolean':
      return String(value);
    case 'bigint':
      return `${value}n`;
    case 'undefined':
      return 'undefined';
    case 'object':
      return 'an object';
    default:
      return `a ${typeof value}`;
  }
}
