import { readFileSync } from 'node:fs';

import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest';

import { TritonError } from '../lib/errors.js';
import { DATA_TYPE_INFO, DATA_TYPES, dataTypeFromEnum, type DataType } from '../lib/data-types.js';
import {
  bfloat16BitsToFloat32,
  dataTypeEnum,
  decodeBytes,
  encodeBytes,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  type InputValue,
  type NativeInput,
  normalizeInput,
  outputTensor,
  Tensor,
} from '../lib/tensor.js';

/** normalizeInput, then outputTensor over the very bytes the addon would hand Triton. */
function roundTrip(value: InputValue, expected?: DataType): { input: NativeInput; output: Tensor } {
  const input = normalizeInput('T', value, expected);
  const { buffer, byteOffset, byteLength } = input.data;
  const output = outputTensor('T', input.datatype, input.shape, buffer, byteOffset, byteLength);
  return { input, output };
}

function thrown(fn: () => unknown): TritonError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(TritonError);
    return error as TritonError;
  }
  throw new Error('expected an error');
}

function expectInvalid(fn: () => unknown, message: string): void {
  const error = thrown(fn);
  expect(error.code).toBe('INVALID_ARG');
  expect(error.message).toBe(message);
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

describe('data types', () => {
  it('match the TRITONSERVER_DataType values of native/core/triton_api.h', () => {
    const header = readFileSync(new URL('../native/core/triton_api.h', import.meta.url), 'utf8');
    const declared = new Map(
      [...header.matchAll(/TRITONSERVER_TYPE_(\w+) = (\d+)/g)].map((m) => [m[1] as string, Number(m[2])]),
    );
    declared.delete('INVALID');
    expect(declared.size).toBe(DATA_TYPES.length);
    for (const datatype of DATA_TYPES) {
      expect(dataTypeEnum(datatype)).toBe(declared.get(datatype));
      expect(DATA_TYPE_INFO[datatype].enum).toBe(declared.get(datatype));
      expect(dataTypeFromEnum(dataTypeEnum(datatype))).toBe(datatype);
    }
  });

  it('have element sizes (BYTES: variable)', () => {
    expect(DATA_TYPE_INFO.BOOL.byteSize).toBe(1);
    expect(DATA_TYPE_INFO.FP16.byteSize).toBe(2);
    expect(DATA_TYPE_INFO.BF16.byteSize).toBe(2);
    expect(DATA_TYPE_INFO.INT64.byteSize).toBe(8);
    expect(DATA_TYPE_INFO.BYTES.byteSize).toBeNull();
  });

  it('reject unknown values', () => {
    expectInvalid(() => dataTypeFromEnum(0), 'unknown TRITONSERVER_DataType value 0');
    expectInvalid(() => dataTypeFromEnum(15), 'unknown TRITONSERVER_DataType value 15');
    expectInvalid(() => dataTypeFromEnum(1.5), 'unknown TRITONSERVER_DataType value 1.5');
    expectInvalid(
      () => dataTypeEnum('FLOAT32' as DataType),
      `datatype: unknown datatype 'FLOAT32' (expected one of ${DATA_TYPES.join(', ')})`,
    );
  });
});

describe('round trip normalizeInput → outputTensor', () => {
  it('BOOL from boolean[] and from Uint8Array', () => {
    const { input, output } = roundTrip([true, false, true]);
    expect(input.datatype).toBe(1);
    expect(output.datatype).toBe('BOOL');
    expect(output.data).toEqual(new Uint8Array([1, 0, 1]));
    expect(output.toArray()).toEqual([true, false, true]);
    const bits = new Uint8Array([0, 1]);
    expect(roundTrip(bits, 'BOOL').output.toArray()).toEqual([false, true]);
    expect(roundTrip({ datatype: 'BOOL', shape: [2], data: [1, 0] }).output.toArray()).toEqual([true, false]);
  });

  const integerCases: Array<[DataType, ArrayLike<number>, new (values: number[]) => ArrayLike<number>]> = [
    ['UINT8', [0, 1, 127, 128, 255], Uint8Array],
    ['UINT16', [0, 1, 32768, 65535], Uint16Array],
    ['UINT32', [0, 1, 2 ** 31, 2 ** 32 - 1], Uint32Array],
    ['INT8', [-128, -1, 0, 1, 127], Int8Array],
    ['INT16', [-32768, -1, 0, 32767], Int16Array],
    ['INT32', [-(2 ** 31), -1, 0, 2 ** 31 - 1], Int32Array],
  ];

  it.each(integerCases)('%s extremes, from its TypedArray and from number[]', (datatype, values, Ctor) => {
    const typed = new Ctor([...(values as number[])]);
    const fromTyped = roundTrip(typed as unknown as InputValue);
    expect(fromTyped.output.datatype).toBe(datatype);
    expect(fromTyped.output.data).toEqual(typed);
    expect(fromTyped.output.data).toBeInstanceOf(Ctor);

    const fromNumbers = roundTrip({ datatype, shape: [values.length], data: [...(values as number[])] });
    expect(fromNumbers.output.data).toEqual(typed);
    expect(fromNumbers.output.toArray()).toEqual([...(values as number[])]);
  });

  it('INT64 and UINT64 extremes as bigint', () => {
    const int64 = new BigInt64Array([-(2n ** 63n), -1n, 0n, 1n, 2n ** 63n - 1n]);
    const a = roundTrip(int64);
    expect(a.output.datatype).toBe('INT64');
    expect(a.output.data).toEqual(int64);
    expect(a.output.toArray()).toEqual([-(2n ** 63n), -1n, 0n, 1n, 2n ** 63n - 1n]);

    const uint64 = new BigUint64Array([0n, 1n, 2n ** 63n, 2n ** 64n - 1n]);
    const b = roundTrip(uint64);
    expect(b.output.datatype).toBe('UINT64');
    expect(b.output.toArray()).toEqual([0n, 1n, 2n ** 63n, 2n ** 64n - 1n]);

    const mixed = roundTrip({ datatype: 'INT64', shape: [3], data: [Number.MIN_SAFE_INTEGER, 0, 2n ** 63n - 1n] as never });
    expect(mixed.output.toArray()).toEqual([BigInt(Number.MIN_SAFE_INTEGER), 0n, 2n ** 63n - 1n]);
    expect(roundTrip([2n ** 64n - 1n], 'UINT64').output.toArray()).toEqual([2n ** 64n - 1n]);
    expect(roundTrip([-5n]).output.datatype).toBe('INT64');
  });

  it('FP32 and FP64 exact values, signed zeros, Infinity and NaN', () => {
    const fp32 = new Float32Array([0, -0, 1.5, -Infinity, Infinity, Number.NaN, 3.4028234663852886e38, 1e-45]);
    const a = roundTrip(fp32);
    expect(a.output.datatype).toBe('FP32');
    expect(Object.is((a.output.data as Float32Array)[1], -0)).toBe(true);
    expect(a.output.data).toEqual(fp32);

    const values = [Number.MAX_VALUE, Number.MIN_VALUE, -0, Number.NaN, -Infinity, 0.1];
    const b = roundTrip({ datatype: 'FP64', shape: [2, 3], data: values });
    expect(b.output.shape).toEqual([2, 3]);
    expect(b.output.toArray()).toEqual(values);
    expect(Object.is(b.output.toArray()[2], -0)).toBe(true);

    const c = roundTrip({ datatype: 'FP32', shape: [3], data: [0.1, -0, Number.NaN] });
    expect(c.output.toArray()).toEqual([Math.fround(0.1), -0, Number.NaN]);
  });

  const fp16Bits = [
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [65504, 0x7bff],
    [-65504, 0xfbff],
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -24, 0x0001], // smallest subnormal
    [1023 * 2 ** -24, 0x03ff], // largest subnormal
    [2 ** -14, 0x0400], // smallest normal
    [0.5, 0x3800],
    [1 / 3, 0x3555],
    [0.1, 0x2e66],
    [65519, 0x7bff], // just below the rounding boundary: stays finite
    [1 + 2 ** -11, 0x3c00], // tie: to even (down)
    [1 + 3 * 2 ** -11, 0x3c02], // tie: to even (up)
    [2 ** -25, 0x0000], // tie between 0 and the smallest subnormal: to even (0)
    [3 * 2 ** -25, 0x0002], // tie between subnormals 1 and 2: to even
    [2 ** -25 + 2 ** -40, 0x0001], // just above the tie
    [2 ** -26, 0x0000], // underflows to zero
    [-(2 ** -26), 0x8000], // keeps the sign
    [1023.5 * 2 ** -24, 0x0400], // rounds up from the largest subnormal into the smallest normal
  ] as const;

  it.each(fp16Bits)('float32ToFloat16Bits(%d) = %i', (value, bits) => {
    expect(float32ToFloat16Bits(value)).toBe(bits);
  });

  it('FP16 bit patterns round trip from Uint16Array and from number[]', () => {
    const bits = new Uint16Array([0x0000, 0x8000, 0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x03ff, 0x0400]);
    const a = roundTrip(bits, 'FP16');
    expect(a.input.datatype).toBe(10);
    expect(a.input.data).toBe(bits);
    expect(a.output.datatype).toBe('FP16');
    expect(a.output.data).toBeInstanceOf(Uint16Array); // Node 20 has no Float16Array
    expect(a.output.data).toEqual(bits);
    const decoded = a.output.toArray();
    expect(decoded.slice(0, 6)).toEqual([0, -0, 1, 65504, Infinity, -Infinity]);
    expect(Object.is(decoded[1], -0)).toBe(true);
    expect(decoded[6]).toBeNaN();
    expect(decoded.slice(7)).toEqual([2 ** -24, 1023 * 2 ** -24, 2 ** -14]);

    const values = fp16Bits.map(([value]) => value);
    const b = roundTrip({ datatype: 'FP16', shape: [values.length], data: values });
    expect([...(b.output.data as Uint16Array)]).toEqual(fp16Bits.map(([, expected]) => expected));
    expect(roundTrip({ datatype: 'FP16', shape: [1], data: [Number.NaN] }).output.data).toEqual(new Uint16Array([0x7e00]));
  });

  it('BF16 bit patterns round trip from Uint16Array and from number[]', () => {
    const cases = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3f80],
      [-2, 0xc000],
      [Infinity, 0x7f80],
      [-Infinity, 0xff80],
      [3.3895313892515355e38, 0x7f7f], // largest finite
      [2 ** -126, 0x0080], // smallest normal
      [2 ** -133, 0x0001], // smallest subnormal
      [1 + 2 ** -8, 0x3f80], // tie: to even (down)
      [1 + 3 * 2 ** -8, 0x3f82], // tie: to even (up)
      [Math.PI, 0x4049],
    ] as const;
    for (const [value, bits] of cases) expect(float32ToBfloat16Bits(value)).toBe(bits);
    expect(float32ToBfloat16Bits(Number.NaN)).toBe(0x7fc0);

    const bits = new Uint16Array(cases.map(([, b]) => b));
    const a = roundTrip(bits, 'BF16');
    expect(a.input.datatype).toBe(14);
    expect(a.output.datatype).toBe('BF16');
    expect(a.output.data).toEqual(bits);
    expect(a.output.toArray()).toEqual(cases.map(([value]) => (value === Math.PI ? 3.140625 : value === 1 + 2 ** -8 ? 1 : value === 1 + 3 * 2 ** -8 ? 1.015625 : value)));

    const b = roundTrip({ datatype: 'BF16', shape: [cases.length], data: cases.map(([value]) => value) });
    expect(b.output.data).toEqual(bits);
  });

  it('BYTES with empty strings, multi-byte UTF-8 and binary bytes', () => {
    const binary = new Uint8Array([0, 255, 0x80, 0xc3, 0x28]);
    const elements = ['', 'héllo', '日本語', '😀', binary, '', 'a\u0000b'];
    const { input, output } = roundTrip(elements);
    expect(input.datatype).toBe(13);
    expect(input.shape).toEqual([7]);
    expect(output.datatype).toBe('BYTES');
    expect(output.size).toBe(7);
    const data = output.data as readonly Uint8Array[];
    expect(data).toHaveLength(7);
    expect(data[0]).toEqual(new Uint8Array(0));
    expect(data[1]).toEqual(utf8('héllo'));
    expect(data[2]).toEqual(utf8('日本語'));
    expect(data[3]).toEqual(new Uint8Array([0xf0, 0x9f, 0x98, 0x80]));
    expect(data[4]).toEqual(binary);
    expect(data[6]).toEqual(new Uint8Array([0x61, 0, 0x62]));
    const strings = output.strings();
    expect(strings[0]).toBe('');
    expect(strings.slice(1, 4)).toEqual(['héllo', '日本語', '😀']);
    expect(strings[4]).toBe('\u0000\ufffd\ufffd\ufffd(');
    expect(strings[6]).toBe('a\u0000b');
    expect(output.byteLength).toBe(0 + 6 + 9 + 4 + 5 + 0 + 3);
    // Element views share the output buffer: no copies.
    expect(data[1]?.buffer).toBe(input.data.buffer);
  });

  it('BYTES keep a leading byte-order mark and encode lone surrogates as U+FFFD', () => {
    const { output } = roundTrip(['\ufeffx', '\ud800']);
    expect(output.data).toEqual([new Uint8Array([0xef, 0xbb, 0xbf, 0x78]), new Uint8Array([0xef, 0xbf, 0xbd])]);
    expect(output.strings()).toEqual(['\ufeffx', '\ufffd']);
  });

  it('BYTES with a [2, 2] shape and Buffer elements', () => {
    const { output } = roundTrip({ shape: [2, 2], data: ['a', Buffer.from('bc'), '', 'd'] }, 'BYTES');
    expect(output.shape).toEqual([2, 2]);
    expect(output.strings()).toEqual(['a', 'bc', '', 'd']);
  });

  it('empty and scalar shapes', () => {
    const empty = roundTrip({ shape: [2, 0], data: new Float32Array(0) });
    expect(empty.output.shape).toEqual([2, 0]);
    expect(empty.output.size).toBe(0);
    expect(empty.output.byteLength).toBe(0);
    const emptyBytes = roundTrip({ datatype: 'BYTES', shape: [0], data: [] });
    expect(emptyBytes.output.data).toEqual([]);
    const scalar = roundTrip({ shape: [], data: new Int32Array([7]) });
    expect(scalar.output.shape).toEqual([]);
    expect(scalar.output.toArray()).toEqual([7]);
  });
});

describe('zero copy', () => {
  const arrays: Array<[string, ArrayBufferView]> = [
    ['Uint8Array', new Uint8Array(4)],
    ['Uint8ClampedArray', new Uint8ClampedArray(4)],
    ['Int8Array', new Int8Array(4)],
    ['Uint16Array', new Uint16Array(4)],
    ['Int16Array', new Int16Array(4)],
    ['Uint32Array', new Uint32Array(4)],
    ['Int32Array', new Int32Array(4)],
    ['BigInt64Array', new BigInt64Array(4)],
    ['BigUint64Array', new BigUint64Array(4)],
    ['Float32Array', new Float32Array(4)],
    ['Float64Array', new Float64Array(4)],
    ['Buffer', Buffer.alloc(4)],
  ];

  it.each(arrays)('passes a %s through as the same view', (_kind, array) => {
    const value = array as unknown as InputValue;
    expect(normalizeInput('X', value).data).toBe(array);
    expect(normalizeInput('X', { shape: [2, 2], data: value as never }).data).toBe(array);
    expect(normalizeInput('X', Tensor.from(value as never)).data).toBe(array);
  });

  it('passes a subarray view with its offset', () => {
    const whole = new Float32Array([1, 2, 3, 4]);
    const part = whole.subarray(1, 3);
    const input = normalizeInput('X', part);
    expect(input.data).toBe(part);
    expect(input.data.byteOffset).toBe(4);
  });

  it('wraps output memory without copying', () => {
    const buffer = new ArrayBuffer(24);
    new Float64Array(buffer).set([1, 2, 3]);
    const output = outputTensor('Y', 12, [3], buffer);
    expect((output.data as Float64Array).buffer).toBe(buffer);
    expect(output.toArray()).toEqual([1, 2, 3]);

    const inner = outputTensor('Y', 8, [2], buffer, 8, 8);
    expect((inner.data as Int32Array).buffer).toBe(buffer);
    expect((inner.data as Int32Array).byteOffset).toBe(8);
  });

  it('copies small outputs out of a shared buffer into arrays of their own, of every element type, bits intact', () => {
    // As the addon hands small outputs over: one buffer per drain, 8-byte aligned slots.
    const drain = (fill: number): ArrayBuffer => {
      const buffer = new ArrayBuffer(64);
      new Uint8Array(buffer).forEach((_, i, bytes) => (bytes[i] = (fill + i * 37) & 0xff));
      return buffer;
    };
    const expectCopy = (buffer: ArrayBuffer, datatype: number, count: number, offset: number): void => {
      const output = outputTensor('Y', datatype, [count], buffer, offset, count * (elementSizes[datatype] ?? 0), true);
      const data = output.data as ArrayBufferView;
      expect(data.buffer).not.toBe(buffer);
      expect(Array.from(new Uint8Array(data.buffer, data.byteOffset, data.byteLength))).toEqual(
        Array.from(new Uint8Array(buffer, offset, data.byteLength)),
      );
    };
    // TRITONSERVER_DataType values: BOOL 1, UINT8 2, UINT16 3, UINT32 4, UINT64 5, INT8 6,
    // INT16 7, INT32 8, INT64 9, FP16 10, FP32 11, FP64 12, BF16 14.
    const elementSizes: Record<number, number> = { 1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 2, 8: 4, 9: 8, 10: 2, 11: 4, 12: 8, 14: 2 };
    for (const fill of [0, 101]) {
      const buffer = drain(fill);
      for (const datatype of Object.keys(elementSizes).map(Number)) {
        expectCopy(buffer, datatype, 1, 8);
        expectCopy(buffer, datatype, 3, 16);
      }
    }
    // A float NaN with a payload keeps its bits.
    const nan = new ArrayBuffer(8);
    new Uint32Array(nan)[0] = 0x7fa00001;
    expectCopy(nan, 11, 1, 0);
    // The copies stay as they were when the shared buffer changes.
    const shared = drain(7);
    const copy = outputTensor('Y', 8, [2], shared, 8, 8, true);
    const before = Array.from(copy.data as Int32Array);
    new Uint8Array(shared).fill(0);
    expect(Array.from(copy.data as Int32Array)).toEqual(before);
  });

  it('copies only a misaligned numeric output', () => {
    const buffer = new ArrayBuffer(10);
    const bytes = new Uint8Array(buffer);
    bytes.set(new Uint8Array(new Float32Array([1.5, -2]).buffer), 2);
    const output = outputTensor('Y', 11, [2], buffer, 2, 8);
    expect(output.toArray()).toEqual([1.5, -2]);
    expect((output.data as Float32Array).buffer).not.toBe(buffer);
  });

  it('serializes a BYTES tensor once and reuses its wire form', () => {
    const tensor = Tensor.from(['a', 'bc']);
    const first = normalizeInput('S', tensor);
    const second = normalizeInput('S', tensor, 'BYTES');
    expect(second.data).toBe(first.data);
    expect([...new Uint8Array(first.data.buffer, first.data.byteOffset, first.data.byteLength)]).toEqual([
      1, 0, 0, 0, 0x61, 2, 0, 0, 0, 0x62, 0x63,
    ]);
  });

  it('forwards a BYTES output tensor as input without re-serializing', () => {
    const wire = encodeBytes(['x', 'yz']);
    const output = outputTensor('O', 13, [2], wire.buffer);
    expect(normalizeInput('I', output).data).toEqual(wire);
    expect(normalizeInput('I', output).data.buffer).toBe(wire.buffer);
  });
});

describe('Float16Array where the runtime has it', () => {
  class FakeFloat16Array extends Uint16Array {
    override get [Symbol.toStringTag](): 'Uint16Array' {
      return 'Float16Array' as 'Uint16Array';
    }
  }
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it('wraps FP16 outputs and number[] inputs as Float16Array, and takes Float16Array as FP16', () => {
    vi.stubGlobal('Float16Array', FakeFloat16Array);
    const buffer = new Uint16Array([0x3c00, 0xc000]).buffer;
    const output = outputTensor('H', 10, [2], buffer);
    expect(output.data).toBeInstanceOf(FakeFloat16Array);
    expect((output.data as Uint16Array).buffer).toBe(buffer);

    const half = new FakeFloat16Array(2);
    const input = normalizeInput('H', half);
    expect(input.datatype).toBe(10);
    expect(input.data).toBe(half);
    expectInvalid(
      () => normalizeInput('H', half, 'UINT16'),
      "input 'H': a Float16Array cannot carry UINT16 data (expected Uint16Array)",
    );

    const tensor = Tensor.from([1, -2], { datatype: 'FP16' });
    expect(tensor.data).toBeInstanceOf(FakeFloat16Array);
    expect([...(tensor.data as Uint16Array)]).toEqual([0x3c00, 0xc000]);
  });
});

describe('FP16 and BF16 conversions', () => {
  it('every FP16 bit pattern decodes and re-encodes to itself (NaN to the quiet NaN)', () => {
    const wrong: number[] = [];
    for (let bits = 0; bits < 0x10000; bits++) {
      const value = float16BitsToFloat32(bits);
      const isNaN = (bits & 0x7c00) === 0x7c00 && (bits & 0x03ff) !== 0;
      if (float32ToFloat16Bits(value) !== (isNaN ? 0x7e00 : bits) || Number.isNaN(value) !== isNaN) wrong.push(bits);
    }
    expect(wrong).toEqual([]);
  });

  it('every FP16 midpoint rounds to the even neighbour', () => {
    const wrong: number[] = [];
    for (let bits = 0; bits < 0x7c00; bits++) {
      const middle = (float16BitsToFloat32(bits) + float16BitsToFloat32(bits + 1)) / 2;
      const even = bits % 2 === 0 ? bits : bits + 1;
      if (float32ToFloat16Bits(middle) !== even || float32ToFloat16Bits(-middle) !== (even | 0x8000)) wrong.push(bits);
    }
    expect(wrong).toEqual([]);
  });

  it('every BF16 bit pattern decodes and re-encodes to itself', () => {
    const wrong: number[] = [];
    for (let bits = 0; bits < 0x10000; bits++) {
      const value = bfloat16BitsToFloat32(bits);
      const isNaN = (bits & 0x7f80) === 0x7f80 && (bits & 0x007f) !== 0;
      if (float32ToBfloat16Bits(value) !== (isNaN ? 0x7fc0 : bits)) wrong.push(bits);
    }
    expect(wrong).toEqual([]);
  });

  it('BF16 of float32 values equals rounding the float32 bits to their top half', () => {
    const view = new DataView(new ArrayBuffer(4));
    const wrong: number[] = [];
    let seed = 0x2545f491;
    for (let i = 0; i < 100_000; i++) {
      seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
      view.setUint32(0, seed);
      const value = view.getFloat32(0);
      if (Number.isNaN(value)) continue;
      const reference = Math.floor((seed + 0x7fff + ((seed >>> 16) & 1)) / 0x10000) & 0xffff;
      if (float32ToBfloat16Bits(value) !== reference) wrong.push(seed);
    }
    expect(wrong).toEqual([]);
  });

  it('FP16 of values beyond the range rounds to Infinity', () => {
    expect(float32ToFloat16Bits(65520)).toBe(0x7c00);
    expect(float32ToFloat16Bits(-1e10)).toBe(0xfc00);
    expect(float32ToFloat16Bits(Number.MAX_VALUE)).toBe(0x7c00);
    expect(float32ToBfloat16Bits(3.4028234663852886e38)).toBe(0x7f80);
    expect(float32ToFloat16Bits(Number.MIN_VALUE)).toBe(0);
  });
});

describe('Tensor.from', () => {
  it('infers the datatype from the array type', () => {
    expect(Tensor.from(new Float32Array(2)).datatype).toBe('FP32');
    expect(Tensor.from(new Uint16Array(2)).datatype).toBe('UINT16');
    expect(Tensor.from(new Uint16Array(2), { datatype: 'FP16' }).datatype).toBe('FP16');
    expect(Tensor.from(new Uint16Array(2), { datatype: 'BF16' }).datatype).toBe('BF16');
    expect(Tensor.from(new Uint8Array(2), { datatype: 'BOOL' }).datatype).toBe('BOOL');
    expect(Tensor.from([true]).datatype).toBe('BOOL');
    expect(Tensor.from(['x']).datatype).toBe('BYTES');
    expect(Tensor.from([new Uint8Array(1)]).datatype).toBe('BYTES');
    expect(Tensor.from([1n]).datatype).toBe('INT64');
    expect(Tensor.from([1, 2], { datatype: 'INT16' }).data).toEqual(new Int16Array([1, 2]));
  });

  it('types the tensor by its data', () => {
    expectTypeOf(Tensor.from(new Float32Array(1))).toEqualTypeOf<Tensor<'FP32'>>();
    expectTypeOf(Tensor.from(new BigInt64Array(1))).toEqualTypeOf<Tensor<'INT64'>>();
    expectTypeOf(Tensor.from(['a', 'b'])).toEqualTypeOf<Tensor<'BYTES'>>();
    expectTypeOf(Tensor.from(new Uint16Array(1), { datatype: 'FP16' })).toEqualTypeOf<Tensor<'FP16'>>();
    expectTypeOf(Tensor.from(new Float32Array(1)).data).toEqualTypeOf<Float32Array>();
    expectTypeOf(Tensor.from(['a']).data).toEqualTypeOf<readonly Uint8Array[]>();
    expectTypeOf(Tensor.from(new BigUint64Array(1)).toArray()).toEqualTypeOf<bigint[]>();
  });

  it('uses the given shape and name, and does not alias the shape', () => {
    const shape = [2, 3];
    const data = new Int32Array(6);
    const tensor = Tensor.from(data, { name: 'X', shape });
    shape[0] = 99;
    expect(tensor.name).toBe('X');
    expect(tensor.shape).toEqual([2, 3]);
    expect(tensor.size).toBe(6);
    expect(tensor.byteLength).toBe(24);
    expect(tensor.data).toBe(data);
  });

  it('names the tensor in errors', () => {
    expectInvalid(
      () => Tensor.from(new Float32Array(4), { name: 'X', shape: [3] }),
      "tensor 'X': shape [3] needs 3 elements but the data has 4",
    );
    expectInvalid(
      () => Tensor.from([1, 2]),
      "Tensor.from: a number[] needs a datatype (e.g. { datatype: 'FP32', shape, data }), or pass a TypedArray",
    );
  });

  it('strings() needs BYTES', () => {
    expectInvalid(() => Tensor.from(new Float32Array(1), { name: 'F' }).strings(), "tensor 'F' is FP32; strings() needs BYTES");
  });
});

describe('normalizeInput errors', () => {
  const cases: Array<[string, () => unknown, string]> = [
    [
      'TypedArray of the wrong type',
      () => normalizeInput('INPUT0', new Float64Array(2), 'FP32'),
      "input 'INPUT0': a Float64Array cannot carry FP32 data (expected Float32Array)",
    ],
    [
      'Float32Array for FP16',
      () => normalizeInput('INPUT0', new Float32Array(2), 'FP16'),
      "input 'INPUT0': a Float32Array cannot carry FP16 data (expected Float16Array or Uint16Array of FP16 bits)",
    ],
    [
      'Int8Array for BOOL',
      () => normalizeInput('B', { datatype: 'BOOL', shape: [1], data: new Int8Array(1) }),
      "input 'B': a Int8Array cannot carry BOOL data (expected Uint8Array of 0/1 or boolean[])",
    ],
    [
      'Uint8Array for BYTES',
      () => normalizeInput('S', new Uint8Array(3), 'BYTES'),
      "input 'S': a Uint8Array cannot carry BYTES data (expected an array of strings or Uint8Arrays)",
    ],
    [
      'tensor of another datatype',
      () => normalizeInput('INPUT0', Tensor.from(new Float64Array(1)), 'FP32'),
      "input 'INPUT0': the tensor is FP64 but the model expects FP32",
    ],
    [
      'named datatype against the model',
      () => normalizeInput('INPUT0', { datatype: 'FP64', shape: [1], data: [1] }, 'FP32'),
      "input 'INPUT0': datatype FP64 was given but the model expects FP32",
    ],
    [
      'unknown datatype',
      () => normalizeInput('INPUT0', { datatype: 'FLOAT' as DataType, shape: [1], data: [1] }),
      `input 'INPUT0': unknown datatype 'FLOAT' (expected one of ${DATA_TYPES.join(', ')})`,
    ],
    [
      'element count',
      () => normalizeInput('INPUT0', { shape: [2, 3], data: new Float32Array(5) }),
      "input 'INPUT0': shape [2, 3] needs 6 elements but the data has 5",
    ],
    [
      'negative dimension',
      () => normalizeInput('INPUT0', { shape: [2, -1], data: new Float32Array(2) }),
      "input 'INPUT0': shape [2, -1] has an invalid dimension -1 at index 1 (dimensions are non-negative integers; -1 is only for model configurations)",
    ],
    [
      'fractional dimension',
      () => normalizeInput('INPUT0', { shape: [1.5], data: new Float32Array(1) }),
      "input 'INPUT0': shape [1.5] has an invalid dimension 1.5 at index 0 (dimensions are non-negative integers; -1 is only for model configurations)",
    ],
    [
      'string dimension',
      () => normalizeInput('INPUT0', { shape: ['2'] as never, data: new Float32Array(2) }),
      "input 'INPUT0': shape [2] has an invalid dimension '2' at index 0 (dimensions are non-negative integers; -1 is only for model configurations)",
    ],
    [
      'shape not an array',
      () => normalizeInput('INPUT0', { shape: 4 as never, data: new Float32Array(4) }),
      "input 'INPUT0': shape must be an array of dimensions, got 4",
    ],
    [
      'missing shape',
      () => normalizeInput('INPUT0', { data: new Float32Array(4) } as never),
      "input 'INPUT0': { datatype, shape, data } needs a shape",
    ],
    [
      'BYTES element of another type',
      () => normalizeInput('S', ['a', 'b', 42 as never]),
      "input 'S': BYTES element 2 is 42; expected a string or a Uint8Array",
    ],
    [
      'BYTES element that is another TypedArray',
      () => normalizeInput('S', { datatype: 'BYTES', shape: [1], data: [new Uint16Array(1)] as never }),
      "input 'S': BYTES element 0 is a Uint16Array; expected a string or a Uint8Array",
    ],
    ['UINT8 out of range', () => normalizeInput('N', [1, 300], 'UINT8'), "input 'N': element 1 (300) is out of range for UINT8 (0..255)"],
    ['INT8 out of range', () => normalizeInput('N', [-129], 'INT8'), "input 'N': element 0 (-129) is out of range for INT8 (-128..127)"],
    ['UINT32 negative', () => normalizeInput('N', [-1], 'UINT32'), "input 'N': element 0 (-1) is out of range for UINT32 (0..4294967295)"],
    ['INT32 fraction', () => normalizeInput('N', [0, 1.5], 'INT32'), "input 'N': element 1 (1.5) is not an integer (INT32)"],
    [
      'INT64 beyond safe integers',
      () => normalizeInput('N', [2 ** 53], 'INT64'),
      "input 'N': element 0 (9007199254740992) is not a safe integer; give INT64 values beyond 2^53 as bigint",
    ],
    [
      'UINT64 negative bigint',
      () => normalizeInput('N', [-1n], 'UINT64'),
      "input 'N': element 0 (-1) is out of range for UINT64 (0..18446744073709551615)",
    ],
    [
      'INT64 bigint overflow',
      () => normalizeInput('N', [2n ** 63n]),
      "input 'N': element 0 (9223372036854775808) is out of range for INT64 (-9223372036854775808..9223372036854775807)",
    ],
    [
      'bigint for INT32',
      () => normalizeInput('N', [1n], 'INT32'),
      "input 'N': element 0 is a bigint; bigint elements are only accepted for INT64 and UINT64",
    ],
    ['string in numbers', () => normalizeInput('N', { datatype: 'FP32', shape: [2], data: [1, '2'] as never }), "input 'N': element 1 is '2'; expected a number"],
    ['FP32 overflow', () => normalizeInput('N', [1e39], 'FP32'), "input 'N': element 0 (1e+39) is out of range for FP32 (max ±3.4028234663852886e38)"],
    ['FP16 overflow', () => normalizeInput('N', [1, 70000], 'FP16'), "input 'N': element 1 (70000) is out of range for FP16 (max ±65504)"],
    ['BF16 overflow', () => normalizeInput('N', [-1e39], 'BF16'), "input 'N': element 0 (-1e+39) is out of range for BF16 (max ±3.3895313892515355e38)"],
    ['BOOL from 2', () => normalizeInput('B', [true, 2 as never]), "input 'B': element 1 is 2; BOOL takes true/false (or 0/1)"],
    [
      'numbers without a datatype',
      () => normalizeInput('N', { shape: [2], data: [1, 2] }),
      "input 'N': a number[] needs a datatype (e.g. { datatype: 'FP32', shape, data }), or pass a TypedArray",
    ],
    [
      'empty array without a datatype',
      () => normalizeInput('N', []),
      "input 'N': cannot infer the datatype of an empty array; give a datatype",
    ],
    ['DataView', () => normalizeInput('D', new DataView(new ArrayBuffer(4)) as never), "input 'D': a DataView cannot carry tensor data (expected a TypedArray or an array)"],
    ['null', () => normalizeInput('X', null as never), "input 'X': expected a Tensor, a TypedArray, an array or { datatype, shape, data }, got null"],
    ['number', () => normalizeInput('X', 5 as never), "input 'X': expected a Tensor, a TypedArray, an array or { datatype, shape, data }, got 5"],
    ['data of another type', () => normalizeInput('X', { shape: [1], data: 'abc' as never }), "input 'X': data must be a TypedArray or an array, got 'abc'"],
  ];

  it.each(cases)('%s', (_label, fn, message) => {
    expectInvalid(fn, message);
  });
});

describe('BYTES wire form', () => {
  it('encodes length-prefixed little-endian elements', () => {
    expect([...encodeBytes(['ab', '', new Uint8Array([1, 2, 3])])]).toEqual([
      2, 0, 0, 0, 0x61, 0x62, 0, 0, 0, 0, 3, 0, 0, 0, 1, 2, 3,
    ]);
    const long = 'x'.repeat(300);
    expect([...encodeBytes([long]).subarray(0, 4)]).toEqual([44, 1, 0, 0]);
    expect(encodeBytes([])).toEqual(new Uint8Array(0));
  });

  it('encodes inputs the same whichever way each string is written', () => {
    const reference = (elements: Array<string | Uint8Array>): number[] =>
      elements.flatMap((element) => {
        const bytes = typeof element === 'string' ? Buffer.from(element, 'utf8') : Buffer.from(element);
        const prefix = Buffer.alloc(4);
        prefix.writeUInt32LE(bytes.length);
        return [...prefix, ...bytes];
      });
    const view = (elements: Array<string | Uint8Array>): number[] => {
      const { data } = normalizeInput('S', { datatype: 'BYTES', shape: [elements.length], data: elements });
      return [...new Uint8Array(data.buffer, data.byteOffset, data.byteLength)];
    };
    const mixed = [
      'item-7', // short ASCII: written here
      'x'.repeat(16), // the longest written here
      'y'.repeat(17), // by Buffer
      'héllo', // short, not ASCII
      '\ud800', // a lone surrogate: U+FFFD, 3 bytes for 1 unit
      '😀'.repeat(5),
      '',
      new Uint8Array([0, 255, 7]),
      'z'.repeat(300),
    ];
    expect(view(mixed)).toEqual(reference(mixed));
    expect([...encodeBytes(mixed)]).toEqual(reference(mixed));
    // Above 16 Ki UTF-16 units the strings are measured first.
    const big = ['a', 'é'.repeat(10_000), 'b'.repeat(7_000), 'c'];
    expect(view(big)).toEqual(reference(big));
    // encodeBytes() returns a view over the whole of its own buffer.
    for (const elements of [mixed, ['ab', 'é']]) {
      const wire = encodeBytes(elements);
      expect([wire.byteOffset, wire.buffer.byteLength]).toEqual([0, wire.byteLength]);
    }
  });

  it('gives each small input made from an array its own bytes of a shared slab, and a large one its own buffer', () => {
    const wire = (data: string[]): Uint8Array => {
      const { data: view } = normalizeInput('S', { datatype: 'BYTES', shape: [data.length], data });
      return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    };
    const first = wire(['a', 'bc']);
    const before = [...first];
    const others = Array.from({ length: 200 }, (_, i) => wire([`item-${i}`, 'x'.repeat(i % 20)]));
    expect([...first]).toEqual(before);
    // An input's unused room (kept for the longest UTF-8 form) goes back to
    // the slab: the next cut starts right after it (8-byte aligned).
    const neighbours = others.slice(1).filter((view, i) => view.buffer === others[i]!.buffer);
    expect(neighbours.length).toBeGreaterThan(100);
    for (let i = 1; i < others.length; i++) {
      const [before, after] = [others[i - 1]!, others[i]!];
      if (after.buffer !== before.buffer) continue; // a new slab
      expect(after.byteOffset).toBe(Math.ceil((before.byteOffset + before.byteLength) / 8) * 8);
    }
    const regions = [first, ...others].filter((view) => view.buffer === first.buffer);
    expect(regions.length).toBeGreaterThan(1);
    regions.sort((a, b) => a.byteOffset - b.byteOffset);
    for (let i = 1; i < regions.length; i++) {
      expect(regions[i]!.byteOffset).toBeGreaterThanOrEqual(regions[i - 1]!.byteOffset + regions[i - 1]!.byteLength);
    }
    const large = wire(['y'.repeat(3000)]);
    expect([large.byteOffset, large.buffer.byteLength >= 3004, large.buffer === first.buffer]).toEqual([0, true, false]);
    // Numbers too, each cut aligned for its type, the values intact.
    const u8 = normalizeInput('U', { datatype: 'UINT8', shape: [3], data: [1, 2, 3] }).data as Uint8Array;
    const i64 = normalizeInput('I', { datatype: 'INT64', shape: [2], data: [-5n, 2n ** 62n] }).data as BigInt64Array;
    const f64 = normalizeInput('F', { datatype: 'FP64', shape: [1], data: [0.25] }).data as Float64Array;
    for (const view of [u8, i64, f64]) expect(view.buffer.byteLength).toBeGreaterThan(view.byteLength);
    expect([i64.byteOffset % 8, f64.byteOffset % 8]).toEqual([0, 0]);
    expect([[...u8], [...i64], [...f64]]).toEqual([[1, 2, 3], [-5n, 2n ** 62n], [0.25]]);
    // A tensor's bytes are the caller's to keep or transfer: never cut from the slab.
    const a = Tensor.from(['a']).data[0] as Uint8Array;
    const b = Tensor.from(['b']).data[0] as Uint8Array;
    expect([a.buffer === b.buffer, a.buffer === first.buffer, Buffer.from(a).toString(), Buffer.from(b).toString()]).toEqual([false, false, 'a', 'b']);
    const numbers = Tensor.from([1, 2], { datatype: 'INT32' }).data as Int32Array;
    expect([numbers.buffer.byteLength, [...numbers]]).toEqual([8, [1, 2]]);
  });

  it('decodes into views without copying', () => {
    const wire = encodeBytes(['abc', '', 'd']);
    const elements = decodeBytes(wire, 3);
    expect(elements.map((e) => Buffer.from(e).toString())).toEqual(['abc', '', 'd']);
    for (const element of elements) expect(element.buffer).toBe(wire.buffer);
    expect(decodeBytes(new Uint8Array(0))).toEqual([]);
  });

  it('decodes from an offset into a larger buffer', () => {
    const backing = new Uint8Array(32);
    backing.set(encodeBytes(['hi']), 5);
    expect(decodeBytes(backing.subarray(5, 11), 1)).toEqual([utf8('hi')]);
  });

  const malformed: Array<[string, Uint8Array, number | undefined, string]> = [
    ['truncated length', new Uint8Array([1, 0, 0, 0, 0x61, 1, 0]), undefined, 'decodeBytes: malformed BYTES data: 2 trailing bytes at offset 5 cannot hold the length of element 1'],
    ['element past the end', new Uint8Array([5, 0, 0, 0, 1]), undefined, 'decodeBytes: malformed BYTES data: element 0 at offset 0 claims 5 bytes but only 1 remain'],
    ['too few elements', encodeBytes(['a']), 2, 'decodeBytes: BYTES data has 1 elements but the shape needs 2'],
    ['too many elements', encodeBytes(['a', 'b']), 1, 'decodeBytes: BYTES data has 2 elements but the shape needs 1'],
  ];

  // Malformed data given to decodeBytes is the caller's argument (from
  // Triton, the same problem is INTERNAL: outputTensor below).
  it.each(malformed)('rejects %s as INVALID_ARG', (_label, buffer, count, message) => {
    const error = thrown(() => decodeBytes(buffer, count));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe(message);
  });

  it('rejects elements that are neither strings nor Uint8Arrays', () => {
    expectInvalid(() => encodeBytes(['a', null as never]), 'BYTES data: BYTES element 1 is null; expected a string or a Uint8Array');
  });
});

describe('outputTensor errors', () => {
  it('rejects a byte size that does not match the shape', () => {
    const error = thrown(() => outputTensor('OUT', 11, [2, 2], new ArrayBuffer(12)));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toBe("output 'OUT': 12 bytes do not match shape [2, 2] of FP32 (16 expected)");
  });

  it('rejects an unknown datatype as UNSUPPORTED', () => {
    const error = thrown(() => outputTensor('OUT', 99, [1], new ArrayBuffer(4)));
    expect(error.code).toBe('UNSUPPORTED');
    expect(error.message).toBe("output 'OUT': unknown TRITONSERVER_DataType value 99");
  });

  it('rejects a range outside the buffer', () => {
    const error = thrown(() => outputTensor('OUT', 2, [4], new ArrayBuffer(4), 2, 4));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toBe("output 'OUT': bytes 2..6 lie outside its 4-byte buffer");
  });

  it('rejects BYTES whose element count does not match the shape', () => {
    const error = thrown(() => outputTensor('OUT', 13, [3], encodeBytes(['a', 'b']).buffer));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toBe("output 'OUT': BYTES data has 2 elements but the shape needs 3");
  });

  it('rejects a negative dimension', () => {
    const error = thrown(() => outputTensor('OUT', 2, [-1], new ArrayBuffer(0)));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toBe("output 'OUT': invalid shape [-1]");
  });
});
