/**
 * Triton's classification extension, done in the package where Triton's
 * front ends would do it (in-process, and in the KServe front ends): an
 * output's top `k` values per batch row as BYTES `"<value>:<index>"`.
 */
import { TritonError } from './errors.js';
import { encodeBytes, outputTensor, type Tensor } from './tensor.js';
import { DATA_TYPE_INFO } from './data-types.js';

/**
 * Triton's classification extension: the top `k` values per batch row as
 * BYTES `"<value>:<index>"` strings (no labels: the model's label file is not
 * visible through the in-process API).
 */
export function classify(tensor: Tensor, k: number, batched: boolean): { shape: number[]; strings: string[] } {
  if (tensor.datatype === 'BYTES' || tensor.datatype === 'FP16' || tensor.datatype === 'BF16') {
    throw new TritonError('INVALID_ARG', `classification is not supported for output '${tensor.name}' of type ${tensor.datatype}`);
  }
  const values = tensor.toArray() as Array<number | bigint | boolean>;
  const rows = batched ? (tensor.shape[0] ?? 1) : 1;
  const perRow = rows === 0 ? 0 : values.length / rows;
  const count = Math.min(k, perRow);
  const strings: string[] = [];
  for (let row = 0; row < rows; row++) {
    const indices = Array.from({ length: perRow }, (_, i) => i);
    const value = (i: number): number => Number(values[row * perRow + i]);
    indices.sort((a, b) => value(b) - value(a) || a - b);
    for (const index of indices.slice(0, count)) {
      const v = values[row * perRow + index];
      const text = tensor.datatype === 'FP32' || tensor.datatype === 'FP64' ? (v as number).toFixed(6) : String(Number(v));
      strings.push(`${text}:${index}`);
    }
  }
  return { shape: batched ? [rows, count] : [count], strings };
}


/** The classification of `tensor` as a BYTES tensor of the same name. */
export function classificationTensor(tensor: Tensor, k: number, batched: boolean): Tensor {
  const { shape, strings } = classify(tensor, k, batched);
  const wire = encodeBytes(strings);
  return outputTensor(tensor.name, DATA_TYPE_INFO.BYTES.enum, shape, wire.buffer, wire.byteOffset, wire.byteLength);
}
