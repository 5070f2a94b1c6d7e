/**
 * Triton's model configuration (`ModelConfig` of model_config.proto) as a zod
 * schema, with Triton's snake_case field names, plus reading and writing
 * `config.pbtxt` (protobuf text format).
 *
 * Two tables describe the message and are kept in step by a test:
 * - the zod schema: the single source of the TypeScript types, checks value
 *   types; unknown fields are kept (loose objects), so configs written for a
 *   newer Triton still pass through;
 * - a field-kind table (`MODEL_CONFIG_MESSAGE`) for the text format, which has
 *   no schema of its own: which fields are repeated, maps, messages or enums,
 *   and the scalar type of the rest.
 *
 * 64-bit (and all other) integer fields accept numbers and numeric strings
 * (protobuf's JSON prints int64 as strings) and always come out as numbers.
 */
import { z } from 'zod';
import { backendParameterProblems } from './backend-parameters.js';
import { checkObject, invalidParameterError } from './check.js';
import { TritonError } from './errors.js';
import {
  formatPbPath,
  formatPbtxt,
  parsePbtxt,
  pb,
  type PbField,
  type PbMessage,
  type PbPosition,
} from './pbtxt.js';

// ---------------------------------------------------------------------------
// Enums (index = the enumerator's number in model_config.proto)

/** `data_type` names of a model config (`TYPE_*`); the tensor API's names are `DATA_TYPES` in tensor.ts. */
export const CONFIG_DATA_TYPES = [
  'TYPE_INVALID',
  'TYPE_BOOL',
  'TYPE_UINT8',
  'TYPE_UINT16',
  'TYPE_UINT32',
  'TYPE_UINT64',
  'TYPE_INT8',
  'TYPE_INT16',
  'TYPE_INT32',
  'TYPE_INT64',
  'TYPE_FP16',
  'TYPE_FP32',
  'TYPE_FP64',
  'TYPE_STRING',
  'TYPE_BF16',
] as const;
/** A config `data_type`, e.g. `'TYPE_FP32'`. */
export type DataTypeName = (typeof CONFIG_DATA_TYPES)[number];

export const INSTANCE_GROUP_KINDS = ['KIND_AUTO', 'KIND_GPU', 'KIND_CPU', 'KIND_MODEL'] as const;
export type InstanceGroupKind = (typeof INSTANCE_GROUP_KINDS)[number];

export const SECONDARY_DEVICE_KINDS = ['KIND_NVDLA'] as const;
export const INPUT_FORMATS = ['FORMAT_NONE', 'FORMAT_NHWC', 'FORMAT_NCHW'] as const;
export type InputFormat = (typeof INPUT_FORMATS)[number];

export const BATCH_INPUT_KINDS = [
  'BATCH_ELEMENT_COUNT',
  'BATCH_ACCUMULATED_ELEMENT_COUNT',
  'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO',
  'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE',
  'BATCH_ITEM_SHAPE',
  'BATCH_ITEM_SHAPE_FLATTEN',
] as const;
export const BATCH_OUTPUT_KINDS = ['BATCH_SCATTER_WITH_INPUT_SHAPE'] as const;
export const MODEL_PRIORITIES = ['PRIORITY_DEFAULT', 'PRIORITY_MAX', 'PRIORITY_MIN'] as const;
export const TIMEOUT_ACTIONS = ['REJECT', 'DELAY'] as const;
export type TimeoutAction = (typeof TIMEOUT_ACTIONS)[number];
export const SEQUENCE_CONTROL_KINDS = [
  'CONTROL_SEQUENCE_START',
  'CONTROL_SEQUENCE_READY',
  'CONTROL_SEQUENCE_END',
  'CONTROL_SEQUENCE_CORRID',
] as const;

// ---------------------------------------------------------------------------
// zod building blocks

type IntKind = 'int32' | 'uint32' | 'int64' | 'uint64';

const INT_LIMITS: Readonly<Record<IntKind, readonly [number, number]>> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  // 64-bit values are kept as JS numbers: exact up to 2^53.
  int64: [-(2 ** 63), 2 ** 63],
  uint64: [0, 2 ** 64],
};

function describeInput(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `string ${JSON.stringify(value)}`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

/** An integer field: a number, or a numeric string (int64 in protobuf JSON), always output as a number. */
function integer(kind: IntKind) {
  const [min, max] = INT_LIMITS[kind];
  const unsigned = kind.startsWith('u');
  return z
    .union([z.number(), z.string()], {
      error: (iss) =>
        iss.input === undefined ? 'required' : `expected an integer (${kind}), got ${describeInput(iss.input)}`,
    })
    .transform((value, ctx): number => {
      const n = typeof value === 'number' ? value : /^\s*[-+]?\d+\s*$/.test(value) ? Number(value) : Number.NaN;
      if (!Number.isInteger(n)) {
        ctx.addIssue({ code: 'custom', message: `expected an integer (${kind}), got ${describeInput(value)}` });
        return z.NEVER;
      }
      if (n < min || n > max) {
        ctx.addIssue({
          code: 'custom',
          message: unsigned && n < 0 ? `must not be negative (${kind}), got ${n}` : `${n} is out of range for ${kind}`,
        });
        return z.NEVER;
      }
      return n;
    });
}

const int32 = integer('int32');
const uint32 = integer('uint32');
const int64 = integer('int64');
const uint64 = integer('uint64');
/** float/double: any JS number, including NaN and ±Infinity (the text format has nan/inf). */
const float = z.custom<number>((v) => typeof v === 'number', {
  error: (iss) => (iss.input === undefined ? 'required' : `expected a number, got ${describeInput(iss.input)}`),
});
const bool = z.boolean();
const str = z.string();

function stringMap<T extends z.ZodType>(value: T) {
  return z.record(z.string(), value);
}

/** `ModelTensorReshape` */
export const tensorReshapeSchema = z.looseObject({
  shape: z.array(int64).optional(),
});

/** `ModelInput`: an input the model requires. */
export const modelInputSchema = z.looseObject({
  name: str,
  data_type: z.enum(CONFIG_DATA_TYPES),
  format: z.enum(INPUT_FORMATS).optional(),
  dims: z.array(int64).optional(),
  reshape: tensorReshapeSchema.optional(),
  is_shape_tensor: bool.optional(),
  allow_ragged_batch: bool.optional(),
  optional: bool.optional(),
  is_non_linear_format_io: bool.optional(),
});

/** `ModelOutput`: an output the model produces. */
export const modelOutputSchema = z.looseObject({
  name: str,
  data_type: z.enum(CONFIG_DATA_TYPES),
  dims: z.array(int64).optional(),
  reshape: tensorReshapeSchema.optional(),
  label_filename: str.optional(),
  is_shape_tensor: bool.optional(),
  is_non_linear_format_io: bool.optional(),
});

/** `BatchInput` */
export const batchInputSchema = z.looseObject({
  kind: z.enum(BATCH_INPUT_KINDS).optional(),
  target_name: z.array(str).optional(),
  data_type: z.enum(CONFIG_DATA_TYPES).optional(),
  source_input: z.array(str).optional(),
});

/** `BatchOutput` */
export const batchOutputSchema = z.looseObject({
  target_name: z.array(str).optional(),
  kind: z.enum(BATCH_OUTPUT_KINDS).optional(),
  source_input: z.array(str).optional(),
});

/** `ModelVersionPolicy`: one of `latest`, `all`, `specific`. */
export const versionPolicySchema = z.looseObject({
  latest: z.looseObject({ num_versions: uint32.optional() }).optional(),
  all: z.looseObject({}).optional(),
  specific: z.looseObject({ versions: z.array(int64).optional() }).optional(),
});

const graphShapeSchema = z.looseObject({ dim: z.array(int64).optional() });

const graphSpecSchema = z.looseObject({
  batch_size: int32.optional(),
  input: stringMap(graphShapeSchema).optional(),
  graph_lower_bound: z
    .looseObject({
      batch_size: int32.optional(),
      input: stringMap(graphShapeSchema).optional(),
    })
    .optional(),
});

const acceleratorSchema = z.looseObject({
  name: str.optional(),
  parameters: stringMap(str).optional(),
});

const pinnedMemorySchema = z.looseObject({ enable: bool.optional() });

/** `ModelOptimizationPolicy` */
export const optimizationSchema = z.looseObject({
  graph: z.looseObject({ level: int32.optional() }).optional(),
  priority: z.enum(MODEL_PRIORITIES).optional(),
  cuda: z
    .looseObject({
      graphs: bool.optional(),
      busy_wait_events: bool.optional(),
      graph_spec: z.array(graphSpecSchema).optional(),
      output_copy_stream: bool.optional(),
    })
    .optional(),
  execution_accelerators: z
    .looseObject({
      gpu_execution_accelerator: z.array(acceleratorSchema).optional(),
      cpu_execution_accelerator: z.array(acceleratorSchema).optional(),
    })
    .optional(),
  input_pinned_memory: pinnedMemorySchema.optional(),
  output_pinned_memory: pinnedMemorySchema.optional(),
  gather_kernel_buffer_threshold: uint32.optional(),
  eager_batching: bool.optional(),
});

/** `ModelQueuePolicy` */
export const queuePolicySchema = z.looseObject({
  timeout_action: z.enum(TIMEOUT_ACTIONS).optional(),
  default_timeout_microseconds: uint64.optional(),
  allow_timeout_override: bool.optional(),
  max_queue_size: uint32.optional(),
});

/** `ModelDynamicBatching` */
export const dynamicBatchingSchema = z.looseObject({
  preferred_batch_size: z.array(int32).optional(),
  max_queue_delay_microseconds: uint64.optional(),
  preserve_ordering: bool.optional(),
  priority_levels: uint64.optional(),
  default_priority_level: uint64.optional(),
  default_queue_policy: queuePolicySchema.optional(),
  /** Keyed by priority level (protobuf JSON map keys are strings). */
  priority_queue_policy: z
    .record(z.string().regex(/^\d+$/, 'priority level keys must be non-negative integers'), queuePolicySchema)
    .optional(),
});

const sequenceControlSchema = z.looseObject({
  kind: z.enum(SEQUENCE_CONTROL_KINDS).optional(),
  int32_false_true: z.array(int32).optional(),
  fp32_false_true: z.array(float).optional(),
  bool_false_true: z.array(bool).optional(),
  data_type: z.enum(CONFIG_DATA_TYPES).optional(),
});

const sequenceInitialStateSchema = z.looseObject({
  data_type: z.enum(CONFIG_DATA_TYPES).optional(),
  dims: z.array(int64).optional(),
  zero_data: bool.optional(),
  data_file: str.optional(),
  name: str.optional(),
});

/** `ModelSequenceBatching` */
export const sequenceBatchingSchema = z.looseObject({
  direct: z
    .looseObject({
      max_queue_delay_microseconds: uint64.optional(),
      minimum_slot_utilization: float.optional(),
    })
    .optional(),
  oldest: z
    .looseObject({
      max_candidate_sequences: int32.optional(),
      preferred_batch_size: z.array(int32).optional(),
      max_queue_delay_microseconds: uint64.optional(),
      preserve_ordering: bool.optional(),
    })
    .optional(),
  max_sequence_idle_microseconds: uint64.optional(),
  control_input: z
    .array(
      z.looseObject({
        name: str.optional(),
        control: z.array(sequenceControlSchema).optional(),
      }),
    )
    .optional(),
  state: z
    .array(
      z.looseObject({
        input_name: str.optional(),
        output_name: str.optional(),
        data_type: z.enum(CONFIG_DATA_TYPES).optional(),
        dims: z.array(int64).optional(),
        initial_state: z.array(sequenceInitialStateSchema).optional(),
        use_same_buffer_for_input_output: bool.optional(),
        use_growable_memory: bool.optional(),
      }),
    )
    .optional(),
  iterative_sequence: bool.optional(),
});

/** `ModelEnsembling.Step`: maps are model tensor name → ensemble tensor name. */
export const ensembleStepSchema = z.looseObject({
  model_name: str,
  model_version: int64.optional(),
  input_map: stringMap(str).optional(),
  output_map: stringMap(str).optional(),
  model_namespace: str.optional(),
});

/** `ModelEnsembling` */
export const ensembleSchedulingSchema = z.looseObject({
  step: z.array(ensembleStepSchema).optional(),
  max_inflight_responses: uint32.optional(),
});

/** `ModelRateLimiter` */
export const rateLimiterSchema = z.looseObject({
  resources: z
    .array(
      z.looseObject({
        name: str.optional(),
        global: bool.optional(),
        count: uint32.optional(),
      }),
    )
    .optional(),
  priority: uint32.optional(),
});

/** `ModelInstanceGroup` */
export const instanceGroupSchema = z.looseObject({
  name: str.optional(),
  kind: z.enum(INSTANCE_GROUP_KINDS).optional(),
  count: int32.optional(),
  rate_limiter: rateLimiterSchema.optional(),
  gpus: z.array(int32).optional(),
  secondary_devices: z
    .array(
      z.looseObject({
        kind: z.enum(SECONDARY_DEVICE_KINDS).optional(),
        device_id: int64.optional(),
      }),
    )
    .optional(),
  profile: z.array(str).optional(),
  passive: bool.optional(),
  host_policy: str.optional(),
});

/** `ModelParameter` */
export const modelParameterSchema = z.looseObject({ string_value: str });

/** `ModelWarmup` */
export const modelWarmupSchema = z.looseObject({
  name: str.optional(),
  batch_size: uint32.optional(),
  inputs: stringMap(
    z.looseObject({
      data_type: z.enum(CONFIG_DATA_TYPES).optional(),
      dims: z.array(int64).optional(),
      zero_data: bool.optional(),
      random_data: bool.optional(),
      input_data_file: str.optional(),
    }),
  ).optional(),
  count: uint32.optional(),
});

/** `ModelMetrics` */
export const modelMetricsSchema = z.looseObject({
  metric_control: z
    .array(
      z.looseObject({
        metric_identifier: z.looseObject({ family: str.optional() }).optional(),
        histogram_options: z.looseObject({ buckets: z.array(float).optional() }).optional(),
      }),
    )
    .optional(),
});

/** Triton's `ModelConfig`, field for field, in the order Triton's docs use. */
export const modelConfigSchema = z.looseObject({
  /** The model name (the repository directory by default). */
  name: str.optional(),
  platform: str.optional(),
  backend: str.optional(),
  runtime: str.optional(),
  version_policy: versionPolicySchema.optional(),
  max_batch_size: int32.optional(),
  input: z.array(modelInputSchema).optional(),
  output: z.array(modelOutputSchema).optional(),
  batch_input: z.array(batchInputSchema).optional(),
  batch_output: z.array(batchOutputSchema).optional(),
  optimization: optimizationSchema.optional(),
  dynamic_batching: dynamicBatchingSchema.optional(),
  sequence_batching: sequenceBatchingSchema.optional(),
  ensemble_scheduling: ensembleSchedulingSchema.optional(),
  instance_group: z.array(instanceGroupSchema).optional(),
  default_model_filename: str.optional(),
  cc_model_filenames: stringMap(str).optional(),
  metric_tags: stringMap(str).optional(),
  parameters: stringMap(modelParameterSchema).optional(),
  model_warmup: z.array(modelWarmupSchema).optional(),
  model_operations: z.looseObject({ op_library_filename: z.array(str).optional() }).optional(),
  model_transaction_policy: z.looseObject({ decoupled: bool.optional() }).optional(),
  model_repository_agents: z
    .looseObject({
      agents: z
        .array(
          z.looseObject({
            name: str.optional(),
            parameters: stringMap(str).optional(),
          }),
        )
        .optional(),
    })
    .optional(),
  response_cache: z.looseObject({ enable: bool.optional() }).optional(),
  model_metrics: modelMetricsSchema.optional(),
});

/** A model configuration as this package returns it (integers as numbers). */
export type ModelConfig = z.infer<typeof modelConfigSchema>;
/** A model configuration as you may write it (int64 fields may be numeric strings). */
export type ModelConfigInput = z.input<typeof modelConfigSchema>;
/**
 * One input of a model configuration (`ModelInput`): `name`, `data_type`
 * (`TYPE_FP32`, ...) and `dims` (without the batch dimension when
 * `max_batch_size` > 0; -1 for a variable dimension), plus Triton's optional
 * fields (`optional`: the input may be left out of a request, default false).
 */
export type ModelInput = z.infer<typeof modelInputSchema>;
/**
 * One output of a model configuration (`ModelOutput`): `name`, `data_type`,
 * `dims` (as for inputs), and `label_filename` (the labels the
 * classification extension appends to its results).
 */
export type ModelOutput = z.infer<typeof modelOutputSchema>;
export type TensorReshape = z.infer<typeof tensorReshapeSchema>;
export type BatchInput = z.infer<typeof batchInputSchema>;
export type BatchOutput = z.infer<typeof batchOutputSchema>;
/**
 * Which versions of a model Triton serves (`ModelVersionPolicy`), one of
 * `latest: { num_versions }` (the highest N), `all: {}` or
 * `specific: { versions }`. Triton's default is `latest` with
 * `num_versions: 1`.
 */
export type VersionPolicy = z.infer<typeof versionPolicySchema>;
export type OptimizationPolicy = z.infer<typeof optimizationSchema>;
export type QueuePolicy = z.infer<typeof queuePolicySchema>;
/**
 * Triton's dynamic batcher (`ModelDynamicBatching`): requests queued
 * separately are run together, up to `max_batch_size`. Triton's defaults:
 * `max_queue_delay_microseconds` 0 (no waiting for more requests),
 * `preferred_batch_size` none (batches as large as possible),
 * `preserve_ordering` false, `priority_levels` 0 (one level), no queue limit.
 */
export type DynamicBatching = z.infer<typeof dynamicBatchingSchema>;
/**
 * Triton's sequence batcher (`ModelSequenceBatching`) for stateful models:
 * the requests of a sequence ({@link SequenceOptions}) go to one instance;
 * `direct` (the default strategy) or `oldest`, control inputs (START, END,
 * READY, CORRID) and implicit state. `max_sequence_idle_microseconds`
 * defaults to 1000000 (1 s) in Triton: a sequence idle longer is ended.
 */
export type SequenceBatching = z.infer<typeof sequenceBatchingSchema>;
/**
 * One step of an ensemble (`ModelEnsembling.Step`): the model it runs
 * (`model_version` -1 means the latest), and `input_map` /
 * `output_map` from that model's tensor names to the ensemble's.
 */
export type EnsembleStep = z.infer<typeof ensembleStepSchema>;
/**
 * An ensemble's scheduling (`ModelEnsembling`, the config's
 * `ensemble_scheduling`): its steps, run as soon as their inputs are ready,
 * and for decoupled steps `max_inflight_responses` (0, the default: no limit).
 */
export type EnsembleScheduling = z.infer<typeof ensembleSchedulingSchema>;
export type RateLimiter = z.infer<typeof rateLimiterSchema>;
/**
 * A group of execution instances of a model (`ModelInstanceGroup`):
 * `count` instances (default 1) of `kind` (`KIND_GPU` on each GPU of `gpus`,
 * by default every visible GPU; `KIND_CPU`; `KIND_MODEL`; `KIND_AUTO`).
 * A config without groups gets Triton's default: one instance on each
 * available GPU where the backend can use it, else on the CPU.
 */
export type InstanceGroup = z.infer<typeof instanceGroupSchema>;
export type ModelParameter = z.infer<typeof modelParameterSchema>;
export type ModelWarmup = z.infer<typeof modelWarmupSchema>;
export type ModelMetrics = z.infer<typeof modelMetricsSchema>;

// ---------------------------------------------------------------------------
// Field-kind table for the text format (mirrors the schema above)

const s = pb.scalar;
const e = pb.enumOf;
const m = pb.message;
const rep = pb.repeated;
const T = pb.type;

const RESHAPE = T('ModelTensorReshape', { shape: rep(s('int64')) });
const GRAPH_SHAPE = T('GraphSpec.Shape', { dim: rep(s('int64')) });
const ACCELERATOR = T('Accelerator', { name: s('string'), parameters: pb.map('string', s('string')) });
const PINNED = T('PinnedMemoryBuffer', { enable: s('bool') });
const QUEUE_POLICY = T('ModelQueuePolicy', {
  timeout_action: e(TIMEOUT_ACTIONS),
  default_timeout_microseconds: s('uint64'),
  allow_timeout_override: s('bool'),
  max_queue_size: s('uint32'),
});
const CONTROL = T('ModelSequenceBatching.Control', {
  kind: e(SEQUENCE_CONTROL_KINDS),
  int32_false_true: rep(s('int32')),
  fp32_false_true: rep(s('float')),
  bool_false_true: rep(s('bool')),
  data_type: e(CONFIG_DATA_TYPES),
});
const INITIAL_STATE = T('ModelSequenceBatching.InitialState', {
  data_type: e(CONFIG_DATA_TYPES),
  dims: rep(s('int64')),
  zero_data: s('bool'),
  data_file: s('string'),
  name: s('string'),
});

/** Field kinds of `ModelConfig`, derived from model_config.proto. */
export const MODEL_CONFIG_MESSAGE: PbMessage = T('ModelConfig', {
  name: s('string'),
  platform: s('string'),
  backend: s('string'),
  runtime: s('string'),
  version_policy: m(
    T('ModelVersionPolicy', {
      latest: m(T('Latest', { num_versions: s('uint32') })),
      all: m(T('All', {})),
      specific: m(T('Specific', { versions: rep(s('int64')) })),
    }),
  ),
  max_batch_size: s('int32'),
  input: rep(
    m(
      T('ModelInput', {
        name: s('string'),
        data_type: e(CONFIG_DATA_TYPES),
        format: e(INPUT_FORMATS),
        dims: rep(s('int64')),
        reshape: m(RESHAPE),
        is_shape_tensor: s('bool'),
        allow_ragged_batch: s('bool'),
        optional: s('bool'),
        is_non_linear_format_io: s('bool'),
      }),
    ),
  ),
  output: rep(
    m(
      T('ModelOutput', {
        name: s('string'),
        data_type: e(CONFIG_DATA_TYPES),
        dims: rep(s('int64')),
        reshape: m(RESHAPE),
        label_filename: s('string'),
        is_shape_tensor: s('bool'),
        is_non_linear_format_io: s('bool'),
      }),
    ),
  ),
  batch_input: rep(
    m(
      T('BatchInput', {
        kind: e(BATCH_INPUT_KINDS),
        target_name: rep(s('string')),
        data_type: e(CONFIG_DATA_TYPES),
        source_input: rep(s('string')),
      }),
    ),
  ),
  batch_output: rep(
    m(
      T('BatchOutput', {
        target_name: rep(s('string')),
        kind: e(BATCH_OUTPUT_KINDS),
        source_input: rep(s('string')),
      }),
    ),
  ),
  optimization: m(
    T('ModelOptimizationPolicy', {
      graph: m(T('Graph', { level: s('int32') })),
      priority: e(MODEL_PRIORITIES),
      cuda: m(
        T('Cuda', {
          graphs: s('bool'),
          busy_wait_events: s('bool'),
          graph_spec: rep(
            m(
              T('GraphSpec', {
                batch_size: s('int32'),
                input: pb.map('string', m(GRAPH_SHAPE)),
                graph_lower_bound: m(
                  T('GraphSpec.LowerBound', {
                    batch_size: s('int32'),
                    input: pb.map('string', m(GRAPH_SHAPE)),
                  }),
                ),
              }),
            ),
          ),
          output_copy_stream: s('bool'),
        }),
      ),
      execution_accelerators: m(
        T('ExecutionAccelerators', {
          gpu_execution_accelerator: rep(m(ACCELERATOR)),
          cpu_execution_accelerator: rep(m(ACCELERATOR)),
        }),
      ),
      input_pinned_memory: m(PINNED),
      output_pinned_memory: m(PINNED),
      gather_kernel_buffer_threshold: s('uint32'),
      eager_batching: s('bool'),
    }),
  ),
  dynamic_batching: m(
    T('ModelDynamicBatching', {
      preferred_batch_size: rep(s('int32')),
      max_queue_delay_microseconds: s('uint64'),
      preserve_ordering: s('bool'),
      priority_levels: s('uint64'),
      default_priority_level: s('uint64'),
      default_queue_policy: m(QUEUE_POLICY),
      priority_queue_policy: pb.map('uint64', m(QUEUE_POLICY)),
    }),
  ),
  sequence_batching: m(
    T('ModelSequenceBatching', {
      direct: m(
        T('StrategyDirect', {
          max_queue_delay_microseconds: s('uint64'),
          minimum_slot_utilization: s('float'),
        }),
      ),
      oldest: m(
        T('StrategyOldest', {
          max_candidate_sequences: s('int32'),
          preferred_batch_size: rep(s('int32')),
          max_queue_delay_microseconds: s('uint64'),
          preserve_ordering: s('bool'),
        }),
      ),
      max_sequence_idle_microseconds: s('uint64'),
      control_input: rep(m(T('ControlInput', { name: s('string'), control: rep(m(CONTROL)) }))),
      state: rep(
        m(
          T('State', {
            input_name: s('string'),
            output_name: s('string'),
            data_type: e(CONFIG_DATA_TYPES),
            dims: rep(s('int64')),
            initial_state: rep(m(INITIAL_STATE)),
            use_same_buffer_for_input_output: s('bool'),
            use_growable_memory: s('bool'),
          }),
        ),
      ),
      iterative_sequence: s('bool'),
    }),
  ),
  ensemble_scheduling: m(
    T('ModelEnsembling', {
      step: rep(
        m(
          T('Step', {
            model_name: s('string'),
            model_version: s('int64'),
            input_map: pb.map('string', s('string')),
            output_map: pb.map('string', s('string')),
            model_namespace: s('string'),
          }),
        ),
      ),
      max_inflight_responses: s('uint32'),
    }),
  ),
  instance_group: rep(
    m(
      T('ModelInstanceGroup', {
        name: s('string'),
        kind: e(INSTANCE_GROUP_KINDS),
        count: s('int32'),
        rate_limiter: m(
          T('ModelRateLimiter', {
            resources: rep(m(T('Resource', { name: s('string'), global: s('bool'), count: s('uint32') }))),
            priority: s('uint32'),
          }),
        ),
        gpus: rep(s('int32')),
        secondary_devices: rep(
          m(T('SecondaryDevice', { kind: e(SECONDARY_DEVICE_KINDS), device_id: s('int64') })),
        ),
        profile: rep(s('string')),
        passive: s('bool'),
        host_policy: s('string'),
      }),
    ),
  ),
  default_model_filename: s('string'),
  cc_model_filenames: pb.map('string', s('string')),
  metric_tags: pb.map('string', s('string')),
  parameters: pb.map('string', m(T('ModelParameter', { string_value: s('string') }))),
  model_warmup: rep(
    m(
      T('ModelWarmup', {
        name: s('string'),
        batch_size: s('uint32'),
        inputs: pb.map(
          'string',
          m(
            T('ModelWarmup.Input', {
              data_type: e(CONFIG_DATA_TYPES),
              dims: rep(s('int64')),
              zero_data: s('bool'),
              random_data: s('bool'),
              input_data_file: s('string'),
            }),
          ),
        ),
        count: s('uint32'),
      }),
    ),
  ),
  model_operations: m(T('ModelOperations', { op_library_filename: rep(s('string')) })),
  model_transaction_policy: m(T('ModelTransactionPolicy', { decoupled: s('bool') })),
  model_repository_agents: m(
    T('ModelRepositoryAgents', {
      agents: rep(m(T('Agent', { name: s('string'), parameters: pb.map('string', s('string')) }))),
    }),
  ),
  response_cache: m(T('ModelResponseCache', { enable: s('bool') })),
  model_metrics: m(
    T('ModelMetrics', {
      metric_control: rep(
        m(
          T('MetricControl', {
            metric_identifier: m(T('MetricIdentifier', { family: s('string') })),
            histogram_options: m(T('HistogramOptions', { buckets: rep(s('double')) })),
          }),
        ),
      ),
    }),
  ),
});

// ---------------------------------------------------------------------------
// Errors

/** Friendlier wording for zod's built-in issues (schema-level messages win). */
function issueMessage(iss: z.core.$ZodRawIssue): string | undefined {
  if (iss.code === 'invalid_type') {
    if (iss.input === undefined) return 'required';
    return `expected ${iss.expected}, got ${describeInput(iss.input)}`;
  }
  if (iss.code === 'invalid_key') {
    const inner = iss.issues.map((i) => i.message).join('; ');
    return inner === '' ? undefined : inner;
  }
  if (iss.code === 'invalid_value') {
    if (iss.input === undefined) return 'required';
    return `unknown value ${JSON.stringify(iss.input)}; expected one of ${iss.values.map(String).join(', ')}`;
  }
  return undefined;
}

interface Problem {
  path: string;
  message: string;
}

function schemaProblems(error: z.ZodError): Problem[] {
  return error.issues.map((issue) => ({
    path: formatPbPath(issue.path, MODEL_CONFIG_MESSAGE),
    message: issue.message,
  }));
}

function problemText(p: Problem): string {
  return p.path === '' ? p.message : `${p.path}: ${p.message}`;
}

function invalidConfig(problems: readonly string[], name: unknown): TritonError {
  const label = typeof name === 'string' && name !== '' ? ` ${JSON.stringify(name)}` : '';
  if (problems.length === 1) {
    return new TritonError('INVALID_ARG', `invalid model config${label}: ${problems[0] ?? ''}`);
  }
  return new TritonError(
    'INVALID_ARG',
    `invalid model config${label} (${problems.length} problems):\n${problems.map((p) => `  - ${p}`).join('\n')}`,
  );
}

function nameOf(input: unknown): unknown {
  return typeof input === 'object' && input !== null ? (input as { name?: unknown }).name : undefined;
}

// ---------------------------------------------------------------------------
// Semantic checks

/** Records a problem of the config at a field path. */
type AddProblem = (path: string, message: string) => void;

/** Inputs and outputs: usable data types, shapes of positive dims or -1, unique names. */
function tensorProblems(config: ModelConfig, add: AddProblem): void {
  const checkShape = (path: string, dims: readonly number[] | undefined): void => {
    dims?.forEach((d, i) => {
      if (d !== -1 && !(Number.isInteger(d) && d > 0)) {
        add(`${path}[${i}]`, `must be a positive integer or -1 (got ${d})`);
      }
    });
  };
  for (const [key, list] of [
    ['input', config.input],
    ['output', config.output],
  ] as const) {
    list?.forEach((tensor, i) => {
      if (tensor.data_type === 'TYPE_INVALID') add(`${key}[${i}].data_type`, 'TYPE_INVALID is not a usable data type');
      checkShape(`${key}[${i}].dims`, tensor.dims);
      checkShape(`${key}[${i}].reshape.shape`, tensor.reshape?.shape);
    });
    const seen = new Map<string, number>();
    list?.forEach((tensor, i) => {
      const first = seen.get(tensor.name);
      if (first !== undefined) {
        add(`${key}[${i}].name`, `duplicate ${key} name ${JSON.stringify(tensor.name)} (also ${key}[${first}])`);
      } else {
        seen.set(tensor.name, i);
      }
    });
  }
}

/** The scheduling choice and the version policy are oneofs in the proto: at most one of each. */
function schedulingProblems(config: ModelConfig, add: AddProblem): void {
  const schedulers = (['dynamic_batching', 'sequence_batching', 'ensemble_scheduling'] as const).filter(
    (k) => config[k] !== undefined,
  );
  if (schedulers.length > 1) {
    add(schedulers.join(', '), 'only one scheduling choice may be set');
  }
  const policy = config.version_policy;
  if (policy) {
    const set = (['latest', 'all', 'specific'] as const).filter((k) => policy[k] !== undefined);
    if (set.length > 1) add('version_policy', `only one of latest, all, specific may be set (got ${set.join(', ')})`);
  }
}

/** Dynamic batching against max_batch_size and its priority levels. */
function dynamicBatchingProblems(config: ModelConfig, add: AddProblem): void {
  const db = config.dynamic_batching;
  if (db) {
    const mbs = config.max_batch_size;
    if (mbs === 0) {
      add('dynamic_batching', 'not allowed when max_batch_size is 0 (batching disabled); set max_batch_size > 0');
    }
    db.preferred_batch_size?.forEach((size, i) => {
      const path = `dynamic_batching.preferred_batch_size[${i}]`;
      if (size <= 0) add(path, `must be a positive integer (got ${size})`);
      else if (mbs !== undefined && mbs > 0 && size > mbs) add(path, `${size} exceeds max_batch_size ${mbs}`);
    });
    const levels = db.priority_levels ?? 0;
    if (levels > 0 && db.default_priority_level !== undefined) {
      const d = db.default_priority_level;
      if (d < 1 || d > levels) {
        add('dynamic_batching.default_priority_level', `must be in [1, ${levels}] (priority_levels), got ${d}`);
      }
    }
  }
}

/** An ensemble's steps: each tensor produced once, consumed after it is produced, every output produced. */
function ensembleProblems(config: ModelConfig, add: AddProblem): void {
  const steps = config.ensemble_scheduling?.step ?? [];
  if (config.platform === 'ensemble') {
    if (config.ensemble_scheduling === undefined) {
      add('ensemble_scheduling', 'required when platform is "ensemble"');
    }
    const available = new Set((config.input ?? []).map((t) => t.name));
    const producer = new Map<string, number>();
    steps.forEach((step, i) => {
      for (const [tensor, ensembleTensor] of Object.entries(step.output_map ?? {})) {
        const first = producer.get(ensembleTensor);
        if (first !== undefined) {
          add(
            `ensemble_scheduling.step[${i}].output_map[${JSON.stringify(tensor)}]`,
            `ensemble tensor ${JSON.stringify(ensembleTensor)} is already produced by step[${first}]`,
          );
        } else {
          producer.set(ensembleTensor, i);
        }
      }
    });
    steps.forEach((step, i) => {
      for (const [tensor, ensembleTensor] of Object.entries(step.input_map ?? {})) {
        if (available.has(ensembleTensor)) continue;
        const later = producer.get(ensembleTensor);
        const hint = later !== undefined && later >= i ? ` (it is produced by step[${later}], which must come first)` : '';
        add(
          `ensemble_scheduling.step[${i}].input_map[${JSON.stringify(tensor)}]`,
          `${JSON.stringify(ensembleTensor)} is neither an ensemble input nor an output of an earlier step${hint}`,
        );
      }
      for (const ensembleTensor of Object.values(step.output_map ?? {})) available.add(ensembleTensor);
    });
    config.output?.forEach((out, i) => {
      if (!producer.has(out.name)) {
        add(`output[${i}].name`, `ensemble output ${JSON.stringify(out.name)} is not produced by any step (no output_map value names it)`);
      }
    });
  } else if (config.ensemble_scheduling !== undefined) {
    add('ensemble_scheduling', `only allowed when platform is "ensemble" (platform is ${JSON.stringify(config.platform ?? '')})`);
  }
}

/** Instance groups: GPU ids only where the kind takes GPUs, never negative. */
function instanceGroupProblems(config: ModelConfig, add: AddProblem): void {
  config.instance_group?.forEach((group, i) => {
    const kind = group.kind ?? 'KIND_AUTO';
    if ((kind === 'KIND_CPU' || kind === 'KIND_MODEL') && group.gpus !== undefined && group.gpus.length > 0) {
      add(`instance_group[${i}].gpus`, `not allowed for ${kind}`);
      return;
    }
    group.gpus?.forEach((gpu, j) => {
      if (gpu < 0) add(`instance_group[${i}].gpus[${j}]`, `must be a non-negative GPU id (got ${gpu})`);
    });
  });
}

/**
 * Checks that need more than one field at a time. Returns one
 * `<path>: <problem>` line per problem, in config order; empty when fine.
 *
 * - every `dims` / `reshape.shape` entry of an input or output is a positive
 *   integer or -1, and its data type is not `TYPE_INVALID`;
 * - `dynamic_batching` needs batching (`max_batch_size: 0` disables it);
 *   preferred batch sizes are positive and at most `max_batch_size`;
 *   `default_priority_level` lies in `[1, priority_levels]`;
 * - input names, and output names, are unique;
 * - at most one of `dynamic_batching`, `sequence_batching`,
 *   `ensemble_scheduling`, and of the version policies;
 * - an ensemble (`platform: "ensemble"`) has `ensemble_scheduling`; each
 *   step's `input_map` values are ensemble inputs or outputs of an earlier
 *   step; each ensemble tensor is produced by one step only; every ensemble
 *   output is produced by some step;
 * - instance groups: GPU ids are non-negative; `KIND_CPU`/`KIND_MODEL`
 *   groups list no GPUs;
 * - for ONNX Runtime and PyTorch models, the values of the backends' known
 *   `parameters` and ONNX Runtime's `optimization.graph.level` parse as the
 *   backend parses them (backend-parameters.ts).
 */
export function checkModelConfig(config: ModelConfig): string[] {
  checkObject('checkModelConfig(config)', config);
  const problems: string[] = [];
  const add: AddProblem = (path, message) => {
    problems.push(`${path}: ${message}`);
  };
  tensorProblems(config, add);
  schedulingProblems(config, add);
  dynamicBatchingProblems(config, add);
  ensembleProblems(config, add);
  instanceGroupProblems(config, add);
  // What the ONNX Runtime and PyTorch backends parse from parameters and optimization.
  problems.push(...backendParameterProblems(config));
  return problems;
}

// ---------------------------------------------------------------------------
// Public API

/**
 * Validates a model configuration you wrote: value types (with every wrong
 * field listed) and then {@link checkModelConfig}. Int64 strings become
 * numbers; unknown fields are kept. Throws `TritonError('INVALID_ARG')` whose
 * message lists every problem as `<path>: <what>`, e.g.
 * `input[0].dims[1]: must be a positive integer or -1 (got 0)`.
 */
export function validateModelConfig(input: unknown): ModelConfig {
  const parsed = modelConfigSchema.safeParse(input, { error: issueMessage });
  if (!parsed.success) {
    throw invalidConfig(schemaProblems(parsed.error).map(problemText), nameOf(input));
  }
  const problems = checkModelConfig(parsed.data);
  if (problems.length > 0) throw invalidConfig(problems, parsed.data.name);
  return parsed.data;
}

/**
 * Rewrites protobuf-JSON spellings the schema does not take: enums given by
 * number become names, "NaN"/"Infinity" floats become numbers, `null` fields
 * are dropped. Unknown fields pass through untouched.
 */
function normalizeProtoJson(value: unknown, field: PbField | undefined): unknown {
  if (field === undefined || value === null || value === undefined) return value;
  if (field.kind === 'map') {
    if (typeof value !== 'object' || Array.isArray(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (v !== null) out[k] = normalizeProtoJson(v, field.value);
    }
    return out;
  }
  if (field.repeated === true && Array.isArray(value)) {
    const single = { ...field, repeated: false };
    return value.map((v: unknown) => normalizeProtoJson(v, single));
  }
  switch (field.kind) {
    case 'enum':
      return typeof value === 'number' ? (field.values[value] ?? value) : value;
    case 'scalar':
      if ((field.type === 'float' || field.type === 'double') && typeof value === 'string') {
        const special: Record<string, number> = { NaN: Number.NaN, Infinity: Infinity, '-Infinity': -Infinity };
        return special[value] ?? value;
      }
      return value;
    case 'message': {
      if (typeof value !== 'object' || Array.isArray(value)) return value;
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) {
        if (v !== null) out[k] = normalizeProtoJson(v, field.message.fields[k]);
      }
      return out;
    }
  }
}

function lenientParse(value: unknown, what: string): ModelConfig {
  const normalized = normalizeProtoJson(value, pb.message(MODEL_CONFIG_MESSAGE));
  const parsed = modelConfigSchema.safeParse(normalized, { error: issueMessage });
  if (!parsed.success) {
    const problems = schemaProblems(parsed.error).map(problemText);
    throw new TritonError('INVALID_ARG', `${what}: ${problems.join('; ')}`);
  }
  return parsed.data;
}

/**
 * Reads the model configuration JSON that Triton returns (its config API):
 * tolerant of every field Triton fills in, of fields this package does not
 * know, of int64 values as strings and of enums as numbers. Runs no semantic
 * checks. Throws `TritonError('INVALID_ARG')` only for values of the wrong
 * type (e.g. a string where a message is expected), naming the path.
 */
export function parseModelConfigJson(value: unknown): ModelConfig {
  if (typeof value === 'string') {
    let json: unknown;
    try {
      json = JSON.parse(value);
    } catch (err) {
      throw new TritonError('INVALID_ARG', `model config JSON: ${(err as Error).message}`, { cause: err });
    }
    return lenientParse(json, 'model config JSON');
  }
  return lenientParse(value, 'model config JSON');
}

/**
 * Parses a `config.pbtxt` (protobuf text format). Syntax errors, unknown
 * enum names and values of the wrong type throw
 * `TritonError('INVALID_ARG', 'config.pbtxt:<line>:<col>: <what>')`. Like
 * Triton, it runs no semantic checks (use {@link validateModelConfig}).
 * Fields this package does not know are kept.
 */
export function parseModelConfig(text: string): ModelConfig {
  if (typeof text !== 'string') throw invalidParameterError('parseModelConfig(text)', 'the text of a config.pbtxt', text);
  const positions = new Map<string, PbPosition>();
  const raw = parsePbtxt(text, MODEL_CONFIG_MESSAGE, { source: 'config.pbtxt', positions });
  const parsed = modelConfigSchema.safeParse(raw, { error: issueMessage });
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map((issue) => {
    const path = formatPbPath(issue.path, MODEL_CONFIG_MESSAGE);
    const where = locate(positions, issue.path);
    const at = where ? `${where.line}:${where.column}` : '1:1';
    return `config.pbtxt:${at}: ${problemText({ path, message: issue.message })}`;
  });
  throw new TritonError('INVALID_ARG', lines.join('\n'));
}

/** The position of the deepest recorded value on `segments`' path. */
function locate(positions: Map<string, PbPosition>, segments: readonly PropertyKey[]): PbPosition | undefined {
  for (let n = segments.length; n > 0; n--) {
    const found = positions.get(formatPbPath(segments.slice(0, n), MODEL_CONFIG_MESSAGE));
    if (found) return found;
  }
  return undefined;
}

/**
 * Writes a model configuration as `config.pbtxt` text that Triton reads:
 * two-space indentation, fields in schema order (unknown fields after),
 * repeated scalars as `dims: [ -1, 3 ]`, maps as repeated `{ key value }`
 * entries. Checks value types (throws `TritonError('INVALID_ARG')`), but not
 * semantics.
 */
export function formatModelConfig(config: ModelConfig | ModelConfigInput): string {
  return formatPbtxt(lenientParse(config, 'cannot format model config'), MODEL_CONFIG_MESSAGE);
}
