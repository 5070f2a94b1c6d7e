/**
 * Bound models: a TypeScript function served as a real Triton model. The
 * addon is also a Triton backend ("nodejs", native/backend/backend.cc); Triton's
 * scheduler (and dynamic batcher) forms the batches, and its instance
 * threads hand each one to the handler on the thread that bound the model.
 *
 * Triton finds the backend through the model's version directory: each
 * server gets a repository of its own in the temp directory whose
 * `<name>/<version>` is a link to the addon's directory, and the model's
 * config names the addon file as its `runtime`. The user's backend
 * directory is left alone.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { z } from 'zod';
import { ERROR_CODES, TritonError } from './errors.js';
import type { ModelConfigInput } from './model-config.js';
import {
  native,
  type NativeBoundFailure,
  type NativeBoundOutput,
  type NativeBoundRequest,
} from './native.js';
import { normalizeInput, outputTensor, type InputData, type Tensor, type TensorInit } from './tensor.js';
import { DATA_TYPES, type DataType } from './data-types.js';

const nonNegativeInt = z.number().int().nonnegative();
const tensorName = z.string().min(1).refine((name) => !name.includes('\0'), 'must not contain NUL characters');
const dims = z.array(z.number().int().min(-1)).max(64).readonly();

const inputSpecSchema = z.strictObject({
  /** The input's name. */
  name: tensorName,
  /** Its data type, as the package names them (`FP32`, `BYTES`, ...). */
  datatype: z.enum(DATA_TYPES),
  /** Dimensions without the batch dimension; -1 for any size. */
  dims,
  /** Requests may leave the input out. */
  optional: z.boolean().optional(),
});
const outputSpecSchema = z.strictObject({
  /** The output's name. */
  name: tensorName,
  /** Its data type. */
  datatype: z.enum(DATA_TYPES),
  /** Dimensions without the batch dimension; -1 for any size. */
  dims,
});

/** What `server.bindModel()` serves; see {@link BoundModelDefinition}. */
export const boundModelDefinitionSchema = z
  .strictObject({
    /** The model's name (unique among the bound models of the process). */
    name: z
      .string()
      .min(1)
      .refine((name) => !/[\0/\\]/.test(name) && name !== '.' && name !== '..', 'must be a model name (no /, \\ or NUL)'),
    /** The version it is served as. Default 1. */
    version: z.number().int().min(1).optional(),
    /** Its inputs. */
    inputs: z.array(inputSpecSchema).min(1).readonly(),
    /** Its outputs. */
    outputs: z.array(outputSpecSchema).min(1).readonly(),
    /** Triton's `max_batch_size`. Default 0. */
    maxBatchSize: nonNegativeInt.optional(),
    /** Triton's dynamic batcher (needs maxBatchSize > 0). */
    dynamicBatching: z
      .union([
        z.boolean(),
        z.strictObject({
          /** Batch sizes the batcher prefers to form. */
          preferredBatchSizes: z.array(z.number().int().positive()).readonly().optional(),
          /** How long a request may wait for others to join its batch. */
          maxQueueDelayMicroseconds: nonNegativeInt.optional(),
        }),
      ])
      .optional(),
    /** How many handler calls may run at once. Default 1. */
    instances: z.number().int().min(1).max(1024).optional(),
    /** A decoupled model (a stream of responses per request). */
    decoupled: z.boolean().optional(),
    /** The model config's parameters, as strings. */
    parameters: z.record(z.string(), z.string()).optional(),
  })
  .superRefine((definition, context) => {
    if (definition.dynamicBatching !== undefined && definition.dynamicBatching !== false && !(definition.maxBatchSize! > 0)) {
      context.addIssue({ code: 'custom', path: ['dynamicBatching'], message: 'needs maxBatchSize > 0' });
    }
    for (const list of ['inputs', 'outputs'] as const) {
      const names = definition[list].map((spec) => spec.name);
      const twice = names.find((name, i) => names.indexOf(name) !== i);
      if (twice !== undefined) context.addIssue({ code: 'custom', path: [list], message: `'${twice}' is named twice` });
    }
  });

/**
 * A bound model: its name and tensors as Triton's model config has them
 * (datatypes named as in the package's tensors), and how Triton schedules it.
 */
export interface BoundModelDefinition {
  /** The model's name (unique in the process among bound models). */
  name: string;
  /** The version it is served as. Default 1. */
  version?: number;
  /** Its inputs. */
  inputs: ReadonlyArray<{
    /** The input's name. */
    name: string;
    /** Its data type, as the package names them (`FP32`, `BYTES`, ...). */
    datatype: DataType;
    /** Dimensions without the batch dimension; -1 for any size. */
    dims: readonly number[];
    /** Requests may leave the input out. */
    optional?: boolean;
  }>;
  /** Its outputs. */
  outputs: ReadonlyArray<{
    /** The output's name. */
    name: string;
    /** Its data type. */
    datatype: DataType;
    /** Dimensions without the batch dimension; -1 for any size. */
    dims: readonly number[];
  }>;
  /** Triton's `max_batch_size`: > 0 adds a batch dimension to every tensor. Default 0. */
  maxBatchSize?: number;
  /** Triton's dynamic batcher (needs `maxBatchSize` > 0): `true`, or its preferred sizes and queue delay. */
  dynamicBatching?:
    | boolean
    | {
        /** Batch sizes the batcher prefers to form. */
        preferredBatchSizes?: readonly number[];
        /** How long a request may wait for others to join its batch. */
        maxQueueDelayMicroseconds?: number;
      };
  /** How many handler calls may run at once (Triton's instance count, KIND_CPU). Default 1. */
  instances?: number;
  /** A decoupled model: each request gets a stream of responses (an async iterable from the handler). */
  decoupled?: boolean;
  /** The model config's `parameters`, as strings. */
  parameters?: Record<string, string>;
}

/** One request of the batch a bound model's handler gets. */
export interface BoundRequest {
  /** The request's id ('' when it has none). */
  id: string;
  /**
   * Inputs by name, as Tensors: an input over 16 KiB is a view of Triton's
   * own input memory (no copy; the caller's memory: read it, do not write
   * it), detached (length 0) once the handler's batch has ended; smaller
   * ones are copies. Copy what must outlive the handler.
   */
  inputs: Record<string, Tensor>;
  /** The request's parameters. */
  parameters: Record<string, string | number | boolean>;
  /** The outputs the caller asked for (Triton lists every output when it asked for none). */
  requestedOutputs: string[];
  /** The sequence correlation id (0 for none). */
  correlationId: number;
  /** Aborted when the request is cancelled (the caller's AbortSignal, a timeout, a stop). */
  signal: AbortSignal;
}

/**
 * An output's value: a Tensor, `{ shape, data }`, or bare data, whose shape
 * is then the request's batch size (with `maxBatchSize` > 0) followed by the
 * declared dims (one -1 among them is worked out from the data's length).
 */
export type BoundOutputValue = Tensor | TensorInit | InputData;

/** One response: a value for each output to send (outputs not requested are left out). */
export type BoundOutputs = Record<string, BoundOutputValue>;

/** What the handler returns for one request: its outputs, or an Error that fails that request alone. */
export type BoundResult = BoundOutputs | Error;

/** What a decoupled model's handler returns for one request: its stream of responses. */
export type BoundStream = AsyncIterable<BoundOutputs> | Iterable<BoundOutputs>;

/** The batch as a whole. */
export interface BoundContext {
  /** The model's name. */
  model: string;
  /** The model's version. */
  version: number;
  /** The batch size Triton formed: the sum of the requests' batch dimensions (the request count without batching). */
  batchSize: number;
}

/**
 * A bound model's handler: it gets the batch Triton formed and returns one
 * result per request, in order (a decoupled model: one stream per request).
 * A handler that throws or rejects fails its batch's requests with its
 * message (INTERNAL unless it threw a TritonError).
 */
export type BoundHandler = (
  requests: BoundRequest[],
  context: BoundContext,
) => Array<BoundResult | BoundStream> | Promise<Array<BoundResult | BoundStream>>;

interface Binding {
  definition: ParsedDefinition;
  handler: BoundHandler;
  /** Dims of each output without the batch dimension. */
  outputs: Map<string, { datatype: DataType; dims: readonly number[] }>;
}

type ParsedDefinition = z.infer<typeof boundModelDefinitionSchema>;

const codeOf = (name: (typeof ERROR_CODES)[number]): number => ERROR_CODES.indexOf(name);

function failureOf(error: unknown, model: string): NativeBoundFailure {
  if (error instanceof TritonError) return [codeOf(error.code), error.message];
  const message = error instanceof Error ? error.message : String(error);
  return [codeOf('INTERNAL'), `bound model '${model}': ${message}`];
}

// ---------------------------------------------------------------------------
// This thread's handlers, and the batches they run.

const bindings = new Map<string, Binding>();
/** The requests of the batches running on this thread, for cancellation. */
const running = new Map<number, BatchRequest[]>();
let dispatcherSet = false;

function dispatch(model: string, batchId: number, requests: NativeBoundRequest[] | null, cancelledIndex?: number): void {
  if (requests === null) {
    running.get(batchId)?.[cancelledIndex ?? -1]?.cancel();
    return;
  }
  const binding = bindings.get(model);
  if (binding === undefined) {
    native.boundModels.finish(batchId, [codeOf('UNAVAILABLE'), `bound model '${model}' has no handler on this thread`]);
    return;
  }
  void runBatch(binding, batchId, requests);
}

async function runBatch(binding: Binding, batchId: number, natives: NativeBoundRequest[]): Promise<void> {
  const { name } = binding.definition;
  const requests = natives.map((request) => new BatchRequest(request));
  running.set(batchId, requests);
  try {
    const batched = (binding.definition.maxBatchSize ?? 0) > 0;
    const sizes = requests.map((request) => (batched ? batchSizeOf(request) : 1));
    const context: BoundContext = {
      model: name,
      version: binding.definition.version ?? 1,
      batchSize: sizes.reduce((a, b) => a + b, 0),
    };
    const results: unknown = await binding.handler(requests, context);
    if (!Array.isArray(results) || results.length !== requests.length) {
      throw new TritonError(
        'INTERNAL',
        `bound model '${name}': the handler must return an array with one result per request (${requests.length}), got ${describe(results)}`,
      );
    }
    if (binding.definition.decoupled === true) {
      await Promise.all(results.map((result, i) => stream(binding, batchId, i, requests[i]!, sizes[i]!, result)));
      native.boundModels.finish(batchId);
    } else {
      // Every answer and the end of the batch in one call.
      const answers = results.map((result, i) => encodeAnswer(binding, requests[i]!, sizes[i]!, result as BoundResult));
      native.boundModels.finish(batchId, null, answers);
    }
  } catch (error) {
    native.boundModels.finish(batchId, failureOf(error, name));
  } finally {
    running.delete(batchId);
  }
}

/**
 * A request of a running batch. Its AbortController is made on first use of
 * `signal` (most handlers never look), or aborted at once if the request was
 * cancelled before.
 */
class BatchRequest implements BoundRequest {
  readonly id: string;
  readonly inputs: Record<string, Tensor>;
  readonly parameters: Record<string, string | number | boolean>;
  readonly requestedOutputs: string[];
  readonly correlationId: number;
  #controller: AbortController | undefined;
  #cancelled = false;

  constructor([id, inputs, parameters, requestedOutputs, correlationId]: NativeBoundRequest) {
    this.id = id;
    this.inputs = {};
    for (const [name, datatype, shape, data, offset, length] of inputs) {
      this.inputs[name] = outputTensor(name, datatype, shape, data, offset, length);
    }
    this.parameters = parameters.length === 0 ? {} : Object.fromEntries(parameters);
    this.requestedOutputs = requestedOutputs;
    this.correlationId = correlationId;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#cancelled) this.#controller.abort(cancelledError());
    }
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#cancelled;
  }

  cancel(): void {
    if (this.#cancelled) return;
    this.#cancelled = true;
    this.#controller?.abort(cancelledError());
  }
}

const cancelledError = (): TritonError => new TritonError('CANCELLED', 'the request was cancelled');

function batchSizeOf(request: BoundRequest): number {
  const first = Object.values(request.inputs)[0];
  return first?.shape[0] ?? 1;
}

/** One request's answer for the addon: its outputs, or a failure (a bad result fails that request only). */
function encodeAnswer(binding: Binding, request: BoundRequest, batchSize: number, result: BoundResult): NativeBoundOutput[] | NativeBoundFailure {
  if (result instanceof Error) return failureOf(result, binding.definition.name);
  try {
    return encodeOutputs(binding, request, batchSize, result);
  } catch (error) {
    return failureOf(error, binding.definition.name);
  }
}

async function stream(binding: Binding, batchId: number, index: number, request: BatchRequest, batchSize: number, result: unknown): Promise<void> {
  const { name } = binding.definition;
  if (result instanceof Error) {
    native.boundModels.send(batchId, index, null, failureOf(result, name), true);
    return;
  }
  if (!isIterable(result)) {
    const failure = new TritonError('INTERNAL', `bound model '${name}' is decoupled: the handler must return an async iterable per request, got ${describe(result)}`);
    native.boundModels.send(batchId, index, null, failureOf(failure, name), true);
    return;
  }
  try {
    for await (const outputs of result) {
      if (request.aborted) break;
      const answer = encodeAnswer(binding, request, batchSize, outputs);
      if (isFailure(answer)) native.boundModels.send(batchId, index, null, answer, false);
      else native.boundModels.send(batchId, index, answer, null, false);
    }
    native.boundModels.send(batchId, index, null, null, true);
  } catch (error) {
    native.boundModels.send(batchId, index, null, failureOf(error, name), true);
  }
}

function isFailure(answer: NativeBoundOutput[] | NativeBoundFailure): answer is NativeBoundFailure {
  return typeof answer[0] === 'number';
}

function isIterable(value: unknown): value is BoundStream {
  return (
    typeof value === 'object' &&
    value !== null &&
    (Symbol.asyncIterator in value || (Symbol.iterator in value && !Array.isArray(value) && !ArrayBuffer.isView(value)))
  );
}

function encodeOutputs(binding: Binding, request: BoundRequest, batchSize: number, result: BoundOutputs): NativeBoundOutput[] {
  const { name: model } = binding.definition;
  if (typeof result !== 'object' || result === null || Array.isArray(result) || ArrayBuffer.isView(result)) {
    throw new TritonError('INTERNAL', `bound model '${model}': a result must be an object of outputs by name, got ${describe(result)}`);
  }
  for (const name of Object.keys(result)) {
    if (!binding.outputs.has(name)) {
      throw new TritonError('INTERNAL', `bound model '${model}': the handler returned output '${name}', which the model does not declare`);
    }
  }
  const batched = (binding.definition.maxBatchSize ?? 0) > 0;
  return request.requestedOutputs.map((name) => {
    const spec = binding.outputs.get(name);
    const value = result[name];
    if (spec === undefined || value === undefined) {
      throw new TritonError('INTERNAL', `bound model '${model}': the handler's result has no output '${name}'`);
    }
    let encoded;
    try {
      encoded = normalizeInput(name, value, spec.datatype);
    } catch (error) {
      const message = (error as Error).message.replace(/^input '/, "output '");
      throw new TritonError('INTERNAL', `bound model '${model}': ${message}`);
    }
    const bare = ArrayBuffer.isView(value) || Array.isArray(value);
    const shape = bare ? declaredShape(model, name, batched ? [batchSize, ...spec.dims] : spec.dims, encoded.shape[0] ?? 0) : encoded.shape;
    return [name, encoded.datatype, shape, encoded.data];
  });
}

/** The declared shape for `count` elements: one -1 is worked out, the rest must match. */
function declaredShape(model: string, output: string, shape: readonly number[], count: number): number[] {
  const wildcards = shape.filter((d) => d === -1).length;
  const known = shape.reduce((product, d) => (d === -1 ? product : product * d), 1);
  if (wildcards === 1 && known > 0 && count % known === 0) return shape.map((d) => (d === -1 ? count / known : d));
  if (wildcards === 0 && known === count) return [...shape];
  throw new TritonError(
    'INTERNAL',
    `bound model '${model}': output '${output}' has ${count} elements, which do not fill shape [${shape.join(', ')}]` +
      (wildcards > 1 ? ' (give { shape, data } when more than one dimension is -1)' : ''),
  );
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (ArrayBuffer.isView(value)) return value.constructor.name;
  return typeof value;
}

/**
 * Batches Triton handed to bound models and not yet released, process-wide:
 * 0 once every bound model's requests are done (for leak checks).
 */
export function liveBoundBatches(): number {
  return native.boundModels.liveBatches();
}

// ---------------------------------------------------------------------------
// Per server: the repository the bound models are found in.

/** The server calls a bound model needs, so that this room does not import Server. */
export interface BoundModelHost {
  registerModelRepository(path: string): Promise<void>;
  loadModel(name: string, config: ModelConfigInput): Promise<void>;
  unloadModel(name: string): Promise<void>;
  removeAtEnd(path: string): void;
}

const TRITON_TYPE: Record<DataType, string> = Object.fromEntries(
  DATA_TYPES.map((datatype) => [datatype, datatype === 'BYTES' ? 'TYPE_STRING' : `TYPE_${datatype}`]),
) as Record<DataType, string>;

/** The Triton model config of a bound model. */
export function boundModelConfig(definition: ParsedDefinition, runtime: string): ModelConfigInput {
  const dynamic = definition.dynamicBatching;
  return {
    name: definition.name,
    backend: 'nodejs',
    runtime,
    max_batch_size: definition.maxBatchSize ?? 0,
    input: definition.inputs.map((spec) => ({
      name: spec.name,
      data_type: TRITON_TYPE[spec.datatype],
      dims: spec.dims,
      ...(spec.optional === true ? { optional: true } : {}),
    })),
    output: definition.outputs.map((spec) => ({ name: spec.name, data_type: TRITON_TYPE[spec.datatype], dims: spec.dims })),
    instance_group: [{ kind: 'KIND_CPU', count: definition.instances ?? 1 }],
    ...(dynamic === undefined || dynamic === false
      ? {}
      : {
          dynamic_batching: {
            ...(dynamic !== true && dynamic.preferredBatchSizes !== undefined ? { preferred_batch_size: dynamic.preferredBatchSizes } : {}),
            ...(dynamic !== true && dynamic.maxQueueDelayMicroseconds !== undefined
              ? { max_queue_delay_microseconds: dynamic.maxQueueDelayMicroseconds }
              : {}),
          },
        }),
    ...(definition.decoupled === true ? { model_transaction_policy: { decoupled: true } } : {}),
    ...(definition.parameters === undefined
      ? {}
      : { parameters: Object.fromEntries(Object.entries(definition.parameters).map(([key, value]) => [key, { string_value: value }])) }),
  } as ModelConfigInput;
}

export function parseBoundModelDefinition(definition: unknown): ParsedDefinition {
  const parsed = boundModelDefinitionSchema.safeParse(definition);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : 'definition'}: ${issue.message}`);
    throw new TritonError('INVALID_ARG', `bindModel: invalid definition: ${issues.join('; ')}`);
  }
  return parsed.data;
}

/**
 * The bound models of one Server object (its thread). The repository they
 * are found in belongs to the thread that started the server; threads
 * attached to it (Server.attach) put their models in the same one, so the
 * owner's stop removes everything, whatever happened to the workers.
 */
export class BoundModels {
  readonly #host: BoundModelHost;
  readonly #owner: boolean;
  #directory: string | undefined;
  #registering: Promise<string> | undefined;
  readonly #names = new Set<string>();

  /** `shared`: the owner's repository, for a thread attached to its server. */
  constructor(host: BoundModelHost, shared?: string) {
    this.#host = host;
    this.#owner = shared === undefined;
    this.#directory = shared;
  }

  /** The repository's path, made now if it was not (for share()). */
  directory(): string {
    if (this.#directory === undefined) {
      this.#directory = mkdtempSync(join(tmpdir(), 'tritonserver-node-bound-'));
      // A process exiting or a worker terminated without stop() removes it too.
      this.#host.removeAtEnd(this.#directory);
    }
    return this.#directory;
  }

  async bind(input: unknown, handler: unknown): Promise<string> {
    const definition = parseBoundModelDefinition(input);
    if (typeof handler !== 'function') {
      throw new TritonError('INVALID_ARG', `bindModel: the handler must be a function, got ${describe(handler)}`);
    }
    const { name } = definition;
    if (!dispatcherSet) {
      native.boundModels.setDispatcher(dispatch, !native.externalBuffersAllowed());
      dispatcherSet = true;
    }
    const addon = native.boundModels.addonPath();
    const repository = await this.#registered();
    native.boundModels.bind(name, definition.decoupled === true, (definition.maxBatchSize ?? 0) > 0);
    bindings.set(name, {
      definition,
      handler: handler as BoundHandler,
      outputs: new Map(definition.outputs.map((spec) => [spec.name, { datatype: spec.datatype, dims: spec.dims }])),
    });
    this.#names.add(name);
    try {
      const modelDir = join(repository, name);
      rmSync(modelDir, { recursive: true, force: true });
      mkdirSync(modelDir);
      symlinkSync(dirname(addon), join(modelDir, String(definition.version ?? 1)), 'dir');
      await this.#host.loadModel(name, boundModelConfig(definition, basename(addon)));
    } catch (error) {
      this.#forget(name);
      throw error;
    }
    return name;
  }

  /** Unloads the model and lets go of its handler. */
  async unbind(name: string): Promise<void> {
    if (!this.#names.has(name)) throw new TritonError('NOT_FOUND', `no model named '${name}' is bound to this server on this thread`);
    try {
      await this.#host.unloadModel(name);
    } finally {
      this.#forget(name);
    }
  }

  /** The model was unloaded (unloadModel): its handler goes, and its name is free again. */
  unloaded(name: string): void {
    if (this.#names.has(name)) this.#forget(name);
  }

  /** The server stopped (or this thread let go of it): every handler goes; the owner removes the repository. */
  close(): void {
    for (const name of [...this.#names]) this.#forget(name);
    if (this.#owner && this.#directory !== undefined) rmSync(this.#directory, { recursive: true, force: true });
  }

  #forget(name: string): void {
    this.#names.delete(name);
    bindings.delete(name);
    native.boundModels.unbind(name);
    if (this.#directory !== undefined) rmSync(join(this.#directory, name), { recursive: true, force: true });
  }

  /** Registered with Triton once, by whichever thread binds first. */
  #registered(): Promise<string> {
    this.#registering ??= (async () => {
      const path = this.directory();
      try {
        await this.#host.registerModelRepository(path);
      } catch (error) {
        // Another thread of the same server registered it first.
        if (!(error instanceof TritonError && error.code === 'ALREADY_EXISTS')) {
          this.#registering = undefined;
          throw error;
        }
      }
      return path;
    })();
    return this.#registering;
  }
}
