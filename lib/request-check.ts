/**
 * Checks of an inference request's own fields (not its inputs, which need
 * the model's metadata). Shared by the in-process and the remote model; it
 * loads nothing native.
 */
import {
  checkInteger,
  checkKnownKeys,
  checkObject,
  checkOptionalBoolean,
  checkOptionalSignal,
  checkOptionalString,
  checkPositiveNumber,
  invalidParameterError,
  isCString,
} from './check.js';
import type { InferenceRequest } from './surface.js';

export const REQUEST_FIELDS: ReadonlySet<string> = new Set([
  'inputs',
  'outputs',
  'id',
  'priority',
  'timeoutMs',
  'signal',
  'parameters',
  'sequence',
  'modelVersion',
  'trace',
]);
const SEQUENCE_FIELDS: ReadonlySet<string> = new Set(['id', 'start', 'end']);
const OUTPUT_SPEC_FIELDS: ReadonlySet<string> = new Set(['data', 'ifTooSmall', 'classification', 'sharedMemory']);
const TRACE_FIELDS: ReadonlySet<string> = new Set(['tracer', 'onTrace']);
/** setTimeout's limit; a longer delay would fire at once. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;
const UINT64_LIMIT = 2n ** 64n;

/** Checks the request's own fields (not its inputs, which need the model's metadata). */
export function checkRequest(request: unknown, known: ReadonlySet<string> = REQUEST_FIELDS): asserts request is InferenceRequest {
  checkObject('request', request);
  checkKnownKeys('request', request, known);
  const { inputs, outputs, id, priority, timeoutMs, signal, parameters, sequence, modelVersion } = request;
  checkObject('request.inputs', inputs);
  if (outputs !== undefined) {
    if (Array.isArray(outputs)) {
      if (!outputs.every((name) => isCString(name) && name !== '')) {
        throw invalidParameterError('request.outputs', 'an array of output names', outputs);
      }
    } else {
      checkObject('request.outputs', outputs);
      for (const name in outputs) {
        const spec = outputs[name];
        const label = `request.outputs[${JSON.stringify(name)}]`;
        if (!isCString(name)) throw invalidParameterError('request.outputs', 'output names without NUL characters', name);
        checkObject(label, spec);
        checkKnownKeys(label, spec, OUTPUT_SPEC_FIELDS);
        if (spec.data !== undefined && !(ArrayBuffer.isView(spec.data) && !(spec.data instanceof DataView))) {
          throw invalidParameterError(`${label}.data`, 'a TypedArray', spec.data);
        }
        if (spec.ifTooSmall !== undefined && spec.ifTooSmall !== 'error' && spec.ifTooSmall !== 'allocate') {
          throw invalidParameterError(`${label}.ifTooSmall`, "'error' or 'allocate'", spec.ifTooSmall);
        }
        if (spec.classification !== undefined) {
          checkInteger(`${label}.classification`, spec.classification, 1);
          if (spec.data !== undefined) throw invalidParameterError(`${label}.data`, 'no buffer for a classification (it is BYTES)', spec.data);
        }
        if (spec.sharedMemory !== undefined) {
          // Its fields are checked when the request is prepared (lib/shared-memory.ts).
          checkObject(`${label}.sharedMemory`, spec.sharedMemory);
          if (spec.data !== undefined || spec.classification !== undefined) {
            throw invalidParameterError(label, "'sharedMemory' without 'data' or 'classification'", Object.keys(spec));
          }
        }
      }
    }
  }
  checkOptionalString('request.id', id);
  if (priority !== undefined) checkInteger('request.priority', priority, 0, 0xffff_ffff);
  if (timeoutMs !== undefined) {
    checkPositiveNumber('request.timeoutMs', timeoutMs);
    if (timeoutMs > MAX_TIMEOUT_MS) throw invalidParameterError('request.timeoutMs', `at most ${MAX_TIMEOUT_MS}`, timeoutMs);
  }
  checkOptionalSignal('request.signal', signal);
  if (parameters !== undefined) {
    checkObject('request.parameters', parameters);
    for (const key in parameters) {
      const value = parameters[key];
      const ok =
        isCString(key) &&
        (typeof value === 'string' ? isCString(value) : typeof value === 'number' ? Number.isFinite(value) : typeof value === 'boolean');
      if (!ok) {
        throw invalidParameterError(`request.parameters[${JSON.stringify(key)}]`, 'a string, a finite number or a boolean', value);
      }
    }
  }
  if (sequence !== undefined) {
    checkObject('request.sequence', sequence);
    checkKnownKeys('request.sequence', sequence, SEQUENCE_FIELDS);
    const sid = sequence.id;
    const ok =
      typeof sid === 'string'
        ? sid !== '' && isCString(sid)
        : typeof sid === 'bigint'
          ? sid >= 0n && sid < UINT64_LIMIT
          : Number.isSafeInteger(sid) && (sid as number) >= 0;
    if (!ok) throw invalidParameterError('request.sequence.id', 'a non-negative integer, a bigint below 2^64 or a non-empty string', sid);
    checkOptionalBoolean('request.sequence.start', sequence.start);
    checkOptionalBoolean('request.sequence.end', sequence.end);
  }
  if (modelVersion !== undefined) checkInteger('request.modelVersion', modelVersion, -1);
  const { trace } = request;
  if (trace !== undefined && typeof trace !== 'boolean') {
    checkObject('request.trace', trace);
    checkKnownKeys('request.trace', trace, TRACE_FIELDS);
  }
}
