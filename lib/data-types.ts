/**
 * Triton's data types: their names, `TRITONSERVER_DataType` values, element
 * sizes and JS representations. Below tensor.ts and shared-memory.ts, which
 * both describe tensors by them.
 */
import { TritonError } from './errors.js';

/** Triton's data types, in `TRITONSERVER_DataType` order (the enum value is index + 1). */
export const DATA_TYPES = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
  'BF16',
] as const;

/** A Triton tensor data type, named as in model metadata (`"FP32"`, `"BYTES"`, ...). */
export type DataType = (typeof DATA_TYPES)[number];

/** What the package knows about a data type. */
export interface DataTypeInfo {
  /** The `TRITONSERVER_DataType` value. */
  readonly enum: number;
  /** Bytes per element; null for BYTES (variable). */
  readonly byteSize: number | null;
  /** The JS representation of tensor data. */
  readonly array: string;
}

/** Enum value, element size and JS representation of every data type. */
export const DATA_TYPE_INFO: { readonly [K in DataType]: DataTypeInfo } = {
  BOOL: { enum: 1, byteSize: 1, array: 'Uint8Array (0 or 1; boolean[] accepted as input)' },
  UINT8: { enum: 2, byteSize: 1, array: 'Uint8Array' },
  UINT16: { enum: 3, byteSize: 2, array: 'Uint16Array' },
  UINT32: { enum: 4, byteSize: 4, array: 'Uint32Array' },
  UINT64: { enum: 5, byteSize: 8, array: 'BigUint64Array' },
  INT8: { enum: 6, byteSize: 1, array: 'Int8Array' },
  INT16: { enum: 7, byteSize: 2, array: 'Int16Array' },
  INT32: { enum: 8, byteSize: 4, array: 'Int32Array' },
  INT64: { enum: 9, byteSize: 8, array: 'BigInt64Array' },
  FP16: { enum: 10, byteSize: 2, array: 'Float16Array where the runtime has it, else Uint16Array of FP16 bits' },
  FP32: { enum: 11, byteSize: 4, array: 'Float32Array' },
  FP64: { enum: 12, byteSize: 8, array: 'Float64Array' },
  BYTES: { enum: 13, byteSize: null, array: 'Uint8Array[] (string or Uint8Array elements as input)' },
  BF16: { enum: 14, byteSize: 2, array: 'Uint16Array of BF16 bits' },
};

/** The data type of a `TRITONSERVER_DataType` value; throws INVALID_ARG for others. */
export function dataTypeFromEnum(value: number): DataType {
  const datatype = Number.isInteger(value) ? DATA_TYPES[value - 1] : undefined;
  if (datatype === undefined) {
    throw new TritonError('INVALID_ARG', `unknown TRITONSERVER_DataType value ${String(value)}`);
  }
  return datatype;
}
