/**
 * The KServe v2 inference codec: JSON tensors and Triton's binary tensor data
 * extension, both ways. Shared by the HTTP and gRPC front ends.
 *
 * Binary inputs become TypedArrays over the received body (no copy unless an
 * element would be misaligned); binary outputs are the output's own bytes,
 * handed to the socket as they are.
 */
import { Buffer } from 'node:buffer';
import { isObject } from '../check.js';
import { TritonError } from '../errors.js';
import { classify } from '../classification.js';
import type { SharedMemoryInput, SharedMemoryRange } from '../shared-memory.js';
import { JsonData, parseNetworkJson } from './json-reader.js';
import { checkHttpInputSource, checkSharedMemoryOutput, sharedMemoryInput, sharedMemoryParameters } from './shared-memory.js';
import type { InferenceRequest, InferenceResponse } from '../surface.js';
import { bytesTensor, encodeBytes, storageView, tensorBytes as storageBytes, type Tensor, type TensorInit } from '../tensor.js';
import { DATA_TYPE_INFO, DATA_TYPES, type DataType } from '../data-types.js';

/** A request parameter value as KServe carries it. */
export type ParameterValue = string | number | boolean;

/** One requested output: whether it goes back as binary data, and top-k classification. */
export interface OutputRequest {
  name: string;
  binary: boolean | undefined;
  classification: number | undefined;
  /** Written into a shared memory region (`shared_memory_*` parameters). */
  sharedMemory?: SharedMemoryRange | undefined;
}

/** An inference request decoded from the wire, ready for `model.infer`. */
export interface DecodedRequest {
  request: InferenceRequest;
  /** Requested outputs in order; undefined = all outputs. */
  outputs: OutputRequest[] | undefined;
  /** `binary_data_output`: the default for outputs that do not say. */
  binaryOutput: boolean;
}

function invalid(message: string): TritonError {
  return new TritonError('INVALID_ARG', message);
}



/** Checks a datatype name from the wire. */
export function checkDatatype(value: unknown, what: string): DataType {
  if (typeof value !== 'string' || !(DATA_TYPES as readonly string[]).includes(value)) {
    throw invalid(`invalid datatype for ${what}`);
  }
  return value as DataType;
}

/** Checks a shape from the wire: an array of non-negative integers. */
export function checkShape(value: unknown, what: string): number[] {
  if (!Array.isArray(value) || !value.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
    throw invalid(`unable to parse 'shape' for ${what}: expected an array of non-negative integers`);
  }
  return value as number[];
}

function elementCount(shape: readonly number[]): number {
  return shape.reduce((product, dim) => product * dim, 1);
}

/**
 * A TypedArray of `datatype` over `bytes` (a view when aligned, else one
 * copy). Throws INVALID_ARG when the size does not fit the shape.
 */
export function tensorFromBytes(
  name: string,
  datatype: DataType,
  shape: number[],
  bytes: Uint8Array,
): TensorInit | Tensor {
  const count = elementCount(shape);
  if (datatype === 'BYTES') {
    try {
      return bytesTensor(name, shape, bytes);
    } catch (error) {
      throw invalid(`input '${name}': ${(error as Error).message}`);
    }
  }
  const size = DATA_TYPE_INFO[datatype].byteSize as number;
  if (bytes.byteLength !== count * size) {
    throw invalid(
      `unexpected size for input '${name}', expecting ${count * size} bytes for shape [${shape.join(',')}] of ${datatype}, got ${bytes.byteLength}`,
    );
  }
  let source = bytes;
  if (source.byteOffset % size !== 0) source = new Uint8Array(bytes); // one copy, only when misaligned
  return { datatype, shape, data: storageView(datatype, source.buffer, source.byteOffset, count) as TensorInit['data'] };
}

/** Flattens (row-major) nested JSON arrays. */
function flatten(data: unknown, out: unknown[]): void {
  if (Array.isArray(data)) for (const item of data) flatten(item, out);
  else out.push(data);
}

/** A tensor from JSON `data` (flat or nested row-major; a large array still unparsed, counted). */
export function tensorFromJson(name: string, datatype: DataType, shape: number[], data: unknown): TensorInit {
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw invalid(
      `receiving ${datatype} data via JSON is not supported. Please use the binary data format for input '${name}'`,
    );
  }
  const count = elementCount(shape);
  const mismatch = (got: number): TritonError =>
    invalid(`unable to parse 'data' of input '${name}': expected ${count} elements for shape [${shape.join(',')}], got ${got}`);
  // Counted before it is built: values the shape does not declare are never made.
  if (data instanceof JsonData && data.count !== count) throw mismatch(data.count);
  const values: unknown[] = [];
  flatten(data instanceof JsonData ? data.parse() : data, values);
  if (values.length !== count) throw mismatch(values.length);
  const bad = (i: number, expected: string): TritonError =>
    invalid(`unable to parse 'data' of input '${name}': element ${i} is not ${expected}`);
  if (datatype === 'BYTES') {
    for (let i = 0; i < count; i++) if (typeof values[i] !== 'string') throw bad(i, 'a string');
    return { datatype, shape, data: values as string[] };
  }
  if (datatype === 'BOOL') {
    const out = new Uint8Array(count);
    for (let i = 0; i < count; i++) {
      const v = values[i];
      if (typeof v !== 'boolean') throw bad(i, 'a boolean');
      out[i] = v ? 1 : 0;
    }
    return { datatype, shape, data: out };
  }
  if (datatype === 'INT64' || datatype === 'UINT64') {
    const out = datatype === 'INT64' ? new BigInt64Array(count) : new BigUint64Array(count);
    for (let i = 0; i < count; i++) {
      const v = values[i];
      if (typeof v !== 'number' || !Number.isInteger(v)) throw bad(i, 'an integer');
      if (datatype === 'UINT64' && v < 0) throw bad(i, 'a non-negative integer');
      out[i] = BigInt(v);
    }
    return { datatype, shape, data: out };
  }
  // The lib's own conversion checks ranges and integer-ness per element.
  for (let i = 0; i < count; i++) if (typeof values[i] !== 'number') throw bad(i, 'a number');
  return { datatype, shape, data: values as number[] };
}

/** A request-level or tensor-level `parameters` object. */
export function checkParameters(value: unknown, what: string): Record<string, ParameterValue> {
  if (value === undefined) return {};
  if (!isObject(value)) throw invalid(`'parameters' of ${what} must be an object`);
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
      throw invalid(`parameter '${key}' has invalid type. It should be either 'int', 'bool', or 'string'.`);
    }
  }
  return value as Record<string, ParameterValue>;
}

// Parameters the protocol consumes itself; the rest go to Triton.
const PROTOCOL_PARAMETERS = new Set(['binary_data_output', 'timeout', 'priority', 'sequence_id', 'sequence_start', 'sequence_end']);

/**
 * The parts of a request both front ends share: id, request parameters
 * (sequence, priority, timeout, the rest passed on), requested outputs.
 */
export function requestFromParts(
  id: string | undefined,
  parameters: Record<string, ParameterValue>,
  inputs: Record<string, TensorInit | SharedMemoryInput>,
  outputs: OutputRequest[] | undefined,
): DecodedRequest {
  const request: InferenceRequest = { inputs };
  if (id !== undefined && id !== '') request.id = id;
  const passOn: Record<string, ParameterValue> = {};
  for (const [key, value] of Object.entries(parameters)) {
    if (key.startsWith('triton_')) {
      throw invalid("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.");
    }
    if (!PROTOCOL_PARAMETERS.has(key)) passOn[key] = value;
  }
  if (Object.keys(passOn).length > 0) request.parameters = passOn;
  const { priority, timeout, sequence_id: sequenceId, sequence_start: start, sequence_end: end } = parameters;
  if (priority !== undefined) {
    if (typeof priority !== 'number') throw invalid("parameter 'priority' must be an integer");
    request.priority = priority;
  }
  if (timeout !== undefined) {
    // KServe's `timeout` is in microseconds, as Triton reads it.
    if (typeof timeout !== 'number' || !(timeout > 0)) throw invalid("parameter 'timeout' must be a positive integer (microseconds)");
    request.timeoutMs = timeout / 1000;
  }
  if (sequenceId !== undefined && sequenceId !== 0 && sequenceId !== '') {
    if (typeof sequenceId === 'boolean') throw invalid("parameter 'sequence_id' must be an integer or a string");
    request.sequence = { id: sequenceId, start: start === true, end: end === true };
  }
  if (outputs !== undefined) {
    request.outputs = outputs.some((output) => output.sharedMemory !== undefined)
      ? Object.fromEntries(outputs.map((output) => [output.name, output.sharedMemory === undefined ? {} : { sharedMemory: output.sharedMemory }]))
      : outputs.map((output) => output.name);
  }
  return { request, outputs, binaryOutput: parameters.binary_data_output === true };
}

function outputRequest(value: unknown, index: number): OutputRequest {
  if (!isObject(value) || typeof value.name !== 'string') throw invalid(`output ${index} needs a 'name'`);
  const parameters = checkParameters(value.parameters, `output '${value.name}'`);
  const binary = parameters.binary_data;
  const classification = parameters.classification;
  if (binary !== undefined && typeof binary !== 'boolean') throw invalid(`'binary_data' of output '${value.name}' must be a boolean`);
  if (classification !== undefined && !(Number.isInteger(classification) && (classification as number) > 0)) {
    throw invalid(`'classification' of output '${value.name}' must be a positive integer`);
  }
  checkSharedMemoryOutput(parameters);
  const sharedMemory = sharedMemoryParameters(parameters, value.name);
  return { name: value.name, binary, classification: classification as number | undefined, sharedMemory };
}

/**
 * Decodes an HTTP inference body: `headerLength` bytes of JSON, then the
 * binary data of the inputs that have `binary_data_size`, in order.
 * `headerLength` undefined means the whole body is JSON.
 */
export function decodeHttpInferRequest(body: Buffer, headerLength: number | undefined): DecodedRequest {
  const jsonEnd = headerLength ?? body.byteLength;
  const json = parseNetworkJson(body, { end: jsonEnd, inference: true });
  if (!isObject(json)) throw invalid('the inference request must be a JSON object');
  const { id, inputs, outputs } = json;
  if (id !== undefined && typeof id !== 'string') throw invalid("'id' must be a string");
  if (!Array.isArray(inputs)) throw invalid("the inference request needs an 'inputs' array");
  if (outputs !== undefined && !Array.isArray(outputs)) throw invalid("'outputs' must be an array");
  const parameters = checkParameters(json.parameters, 'the request');

  const decoded: Record<string, TensorInit | SharedMemoryInput> = {};
  let offset = jsonEnd;
  inputs.forEach((input: unknown, index) => {
    if (!isObject(input) || typeof input.name !== 'string') throw invalid(`input ${index} needs a 'name'`);
    const name = input.name;
    const what = `input '${name}'`;
    if (Object.hasOwn(decoded, name)) throw invalid(`input '${name}' is given more than once`);
    const datatype = checkDatatype(input.datatype, what);
    const shape = checkShape(input.shape, what);
    const inputParameters = checkParameters(input.parameters, what);
    const size = inputParameters.binary_data_size;
    const inShm = sharedMemoryParameters(inputParameters, name);
    if (inShm !== undefined) checkHttpInputSource(input.data !== undefined, size !== undefined, inShm !== undefined);
    if (inShm !== undefined) {
      decoded[name] = sharedMemoryInput(datatype, shape, inShm);
      return;
    }
    if (size !== undefined) {
      if (!Number.isSafeInteger(size) || (size as number) < 0) throw invalid(`'binary_data_size' of ${what} must be a non-negative integer`);
      if (headerLength === undefined) {
        throw invalid(
          "must specify valid 'Infer-Header-Content-Length' in request header and 'binary_data_size' when passing inputs in binary data format",
        );
      }
      const end = offset + (size as number);
      if (end > body.byteLength) {
        throw invalid(
          `unexpected size for input '${name}', expecting ${end - body.byteLength} additional bytes`,
        );
      }
      decoded[name] = tensorFromBytes(name, datatype, shape, body.subarray(offset, end));
      offset = end;
    } else {
      if (input.data === undefined) throw invalid(`${what} has neither 'data' nor 'binary_data_size'`);
      decoded[name] = tensorFromJson(name, datatype, shape, input.data);
    }
  });
  if (offset !== body.byteLength) throw invalid('unexpected additional input data after the binary inputs');
  return requestFromParts(id, parameters, decoded, outputs?.map(outputRequest));
}

// ---------------------------------------------------------------------------
// Responses.

/** The bytes of a tensor as the binary extension carries them. */
export function tensorBytes(tensor: Tensor): Uint8Array {
  // BYTES: the wire form Triton gave, never split into an object per element.
  const data = storageBytes(tensor);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

function jsonNumber(value: number | bigint): string {
  if (typeof value === 'bigint') return value.toString();
  return Number.isFinite(value) ? String(value) : 'null';
}

/** JSON text of a tensor's data, flat row-major (64-bit integers exact). */
export function tensorJsonData(tensor: Tensor): string {
  switch (tensor.datatype) {
    case 'FP16':
    case 'BF16':
      throw invalid(`sending ${tensor.datatype} data via JSON is not supported. Please use the binary data format for output`);
    case 'BYTES':
      return JSON.stringify(tensor.strings());
    case 'BOOL':
      return JSON.stringify(Array.from(tensor.data as Uint8Array, (v) => v !== 0));
    default: {
      const data = tensor.data as ArrayLike<number | bigint>;
      const parts = new Array<string>(data.length);
      for (let i = 0; i < data.length; i++) parts[i] = jsonNumber(data[i] as number | bigint);
      return `[${parts.join(',')}]`;
    }
  }
}

/** A response encoded for HTTP: the JSON header and the binary parts after it. */
export interface EncodedResponse {
  json: string;
  /** Binary output data in output order; empty when every output is JSON. */
  binary: Uint8Array[];
}

/** What the encoders read of a response. */
export type ResponseData = Pick<InferenceResponse, 'model' | 'id' | 'outputs' | 'parameters' | 'final' | 'sharedMemoryOutputs'>;

/**
 * Encodes a response as Triton's HTTP front end does: id, model_name,
 * model_version, parameters, outputs (JSON `data` or `binary_data_size`).
 */
export function encodeHttpInferResponse(
  response: ResponseData,
  decoded: DecodedRequest,
  batched: boolean,
): EncodedResponse {
  const requested = new Map((decoded.outputs ?? []).map((output) => [output.name, output]));
  const binary: Uint8Array[] = [];
  const outputs: string[] = [];
  for (const tensor of Object.values(response.outputs)) {
    const spec = requested.get(tensor.name);
    const asBinary = spec?.binary ?? decoded.binaryOutput;
    let datatype: string = tensor.datatype;
    let shape = tensor.shape;
    let bytes: Uint8Array | undefined;
    let data: string | undefined;
    if (spec?.classification !== undefined) {
      const classes = classify(tensor, spec.classification, batched);
      datatype = 'BYTES';
      shape = classes.shape;
      if (asBinary) bytes = encodeBytes(classes.strings);
      else data = JSON.stringify(classes.strings);
    } else if (asBinary) {
      bytes = tensorBytes(tensor);
    } else {
      data = tensorJsonData(tensor);
    }
    let text = `{"name":${JSON.stringify(tensor.name)},"datatype":"${datatype}","shape":[${shape.join(',')}]`;
    if (bytes !== undefined) {
      text += `,"parameters":{"binary_data_size":${bytes.byteLength}}}`;
      if (bytes.byteLength > 0) binary.push(bytes);
    } else {
      text += `,"data":${data}}`;
    }
    outputs.push(text);
  }
  // Written into shared memory: name, datatype and shape only (as Triton).
  for (const output of Object.values(response.sharedMemoryOutputs ?? {})) {
    outputs.push(`{"name":${JSON.stringify(output.name)},"datatype":"${output.datatype}","shape":[${output.shape.join(',')}]}`);
  }
  let json = '{';
  if (response.id !== '') json += `"id":${JSON.stringify(response.id)},`;
  json += `"model_name":${JSON.stringify(response.model.name)},"model_version":"${response.model.version}"`;
  if (Object.keys(response.parameters).length > 0) json += `,"parameters":${JSON.stringify(response.parameters)}`;
  json += `,"outputs":[${outputs.join(',')}]}`;
  return { json, binary };
}
