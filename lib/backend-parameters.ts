/**
 * The `parameters` that Triton's framework backends read from a model
 * configuration, typed. In `config.pbtxt` they are a map of strings
 * (`parameters { key: "intra_op_thread_count" value { string_value: "2" } }`)
 * that the backend parses when the model loads; a typo or a bad value shows
 * up only then, as a load failure. Here they are named, typed and checked
 * the way the backends parse them:
 *
 * - {@link onnxRuntimeParameters} / {@link pytorchParameters} write the map;
 * - {@link readOnnxRuntimeParameters} / {@link readPyTorchParameters} read it
 *   back from `model.config()`;
 * - `validateModelConfig` reports bad values of these keys (and of ONNX
 *   Runtime's `optimization.graph.level`) for models of these backends.
 *
 * Both backends parse booleans as true/on/1 or false/off/0 (any case), and
 * integers with C++'s `std::stoi`, which throws (an unhandled exception in
 * the backend) for values outside 32 bits: counts here are checked to fit.
 */
import { z } from 'zod';
import { TritonError } from './errors.js';

/** One `ModelParameter` of a config's `parameters` map (a type, not an interface, so it fits the schema's loose object). */
export type ModelParameterValue = {
  /** The value as text, as every backend parameter is written. */
  string_value: string;
};

/** The parts of a model configuration this module reads (structural, so model-config.ts can call it). */
export interface BackendParameterSource {
  /** The backend's name (`onnxruntime`, `pytorch`, ...). */
  backend?: string;
  /** The platform, which names the backend when `backend` is not set (`onnxruntime_onnx`, `pytorch_libtorch`). */
  platform?: string;
  /** The config's `parameters` map. */
  parameters?: Record<string, ModelParameterValue>;
  /** ONNX Runtime reads its graph optimization level here. */
  optimization?: {
    /** Graph optimizations. */
    graph?: {
      /** -1 basic, 1 extended, 2 none; any other value: all (the default). */
      level?: number;
    };
  };
}

/**
 * Parameters of Triton's ONNX Runtime backend (`backend: "onnxruntime"` or
 * `platform: "onnxruntime_onnx"`). Unset ones keep the backend's defaults.
 */
export interface OnnxRuntimeParameters {
  /** `intra_op_thread_count`: threads inside one operator; 0 (default) lets ONNX Runtime use one per core. */
  intraOpThreadCount?: number;
  /** `inter_op_thread_count`: threads across operators, used with `executionMode: 'parallel'`; 0 = ONNX Runtime's default. */
  interOpThreadCount?: number;
  /** `execution_mode`: operators one after another (`'sequential'`, the default) or independent branches at once. */
  executionMode?: 'sequential' | 'parallel';
  /** `enable_mem_arena`: ONNX Runtime's CPU memory arena (on by default). */
  enableMemArena?: boolean;
  /** `enable_mem_pattern`: plan memory from the first run's allocations (on by default). */
  enableMemPattern?: boolean;
  /** `memory.enable_memory_arena_shrinkage`: devices whose arena shrinks after each run, e.g. `'cpu:0'`. */
  memoryArenaShrinkage?: string;
  /** `session.use_device_allocator_for_initializers`: allocate weights outside the arena. */
  useDeviceAllocatorForInitializers?: boolean;
}

/**
 * Parameters of Triton's PyTorch (LibTorch) backend (`backend: "pytorch"` or
 * `platform: "pytorch_libtorch"`). Unset ones keep the backend's defaults.
 * The thread counts are LibTorch's, shared by every model in the process.
 */
export interface PyTorchParameters {
  /** `DISABLE_OPTIMIZED_EXECUTION`: skip TorchScript's profiling executor (slow first calls) at some speed cost. */
  disableOptimizedExecution?: boolean;
  /** `INFERENCE_MODE`: run under `torch::InferenceMode` (Triton's default: on). */
  inferenceMode?: boolean;
  /** `DISABLE_CUDNN` (GPU models). */
  disableCudnn?: boolean;
  /** `ENABLE_WEIGHT_SHARING`: instances on one device share the weights (never for stateful models). */
  enableWeightSharing?: boolean;
  /** `ENABLE_CACHE_CLEANING`: empty CUDA's cache after each execution (GPU models). */
  enableCacheCleaning?: boolean;
  /** `INTER_OP_THREAD_COUNT`: LibTorch's inter-op thread pool; 0 = LibTorch's default. */
  interOpThreadCount?: number;
  /** `INTRA_OP_THREAD_COUNT`: LibTorch's intra-op threads; 0 = LibTorch's default (one per core). */
  intraOpThreadCount?: number;
  /** `ENABLE_JIT_EXECUTOR`: TorchScript's JIT executor. */
  enableJitExecutor?: boolean;
  /** `ENABLE_JIT_PROFILING`: TorchScript's profiling mode. */
  enableJitProfiling?: boolean;
  /** `ENABLE_TENSOR_FUSER`: TorchScript's tensor fuser. */
  enableTensorFuser?: boolean;
}

type Kind = 'count' | 'bool' | 'text' | 'executionMode';

/** Field name -> [config key, how the backend parses it]. */
const ONNXRUNTIME_KEYS: Record<keyof OnnxRuntimeParameters, readonly [string, Kind]> = {
  intraOpThreadCount: ['intra_op_thread_count', 'count'],
  interOpThreadCount: ['inter_op_thread_count', 'count'],
  executionMode: ['execution_mode', 'executionMode'],
  enableMemArena: ['enable_mem_arena', 'bool'],
  enableMemPattern: ['enable_mem_pattern', 'bool'],
  memoryArenaShrinkage: ['memory.enable_memory_arena_shrinkage', 'text'],
  useDeviceAllocatorForInitializers: ['session.use_device_allocator_for_initializers', 'bool'],
};

const PYTORCH_KEYS: Record<keyof PyTorchParameters, readonly [string, Kind]> = {
  disableOptimizedExecution: ['DISABLE_OPTIMIZED_EXECUTION', 'bool'],
  inferenceMode: ['INFERENCE_MODE', 'bool'],
  disableCudnn: ['DISABLE_CUDNN', 'bool'],
  enableWeightSharing: ['ENABLE_WEIGHT_SHARING', 'bool'],
  enableCacheCleaning: ['ENABLE_CACHE_CLEANING', 'bool'],
  interOpThreadCount: ['INTER_OP_THREAD_COUNT', 'count'],
  intraOpThreadCount: ['INTRA_OP_THREAD_COUNT', 'count'],
  enableJitExecutor: ['ENABLE_JIT_EXECUTOR', 'bool'],
  enableJitProfiling: ['ENABLE_JIT_PROFILING', 'bool'],
  enableTensorFuser: ['ENABLE_TENSOR_FUSER', 'bool'],
};

const INT32_MAX = 2 ** 31 - 1;

/** The value a field of each kind takes in TypeScript. */
const FIELD: Record<Kind, z.ZodType> = {
  count: z.number().int().min(0).max(INT32_MAX),
  bool: z.boolean(),
  text: z.string().min(1),
  executionMode: z.enum(['sequential', 'parallel']),
};

/** A strict schema of optional fields, derived from a key table (one table per backend, no second list). */
function schemaOf(keys: Record<string, readonly [string, Kind]>): z.ZodType {
  return z.strictObject(Object.fromEntries(Object.entries(keys).map(([field, [, kind]]) => [field, FIELD[kind].optional()])));
}
const onnxRuntimeSchema = schemaOf(ONNXRUNTIME_KEYS);
const pytorchSchema = schemaOf(PYTORCH_KEYS);

function toStrings(
  what: string,
  schema: z.ZodType,
  keys: Record<string, readonly [string, Kind]>,
  values: unknown,
): Record<string, ModelParameterValue> {
  const parsed = schema.safeParse(values);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
    throw new TritonError('INVALID_ARG', `${what}: ${problems.join('; ')}`);
  }
  const out: Record<string, ModelParameterValue> = {};
  for (const [field, value] of Object.entries(parsed.data as Record<string, unknown>)) {
    if (value === undefined) continue;
    const [key, kind] = keys[field]!;
    const text = kind === 'executionMode' ? (value === 'parallel' ? '1' : '0') : String(value);
    out[key] = { string_value: text };
  }
  return out;
}

/**
 * The `parameters` map for Triton's ONNX Runtime backend, e.g.
 * `parameters: onnxRuntimeParameters({ intraOpThreadCount: 2 })`; spread it
 * with other entries to add your own. Throws `INVALID_ARG` on unknown fields
 * or bad values.
 */
export function onnxRuntimeParameters(values: OnnxRuntimeParameters): Record<string, ModelParameterValue> {
  return toStrings('onnxRuntimeParameters', onnxRuntimeSchema, ONNXRUNTIME_KEYS, values);
}

/** The `parameters` map for Triton's PyTorch backend; as {@link onnxRuntimeParameters}. */
export function pytorchParameters(values: PyTorchParameters): Record<string, ModelParameterValue> {
  return toStrings('pytorchParameters', pytorchSchema, PYTORCH_KEYS, values);
}

const TRUE = new Set(['true', 'on', '1']);
const FALSE = new Set(['false', 'off', '0']);
const COUNT_TEXT = /^[0-9]+$/;

/** A string value as the backend parses it, or undefined when it would refuse it. */
function parseValue(kind: Kind, text: string): unknown {
  switch (kind) {
    case 'bool': {
      const lower = text.toLowerCase();
      return TRUE.has(lower) ? true : FALSE.has(lower) ? false : undefined;
    }
    case 'count': {
      const n = COUNT_TEXT.test(text) ? Number(text) : NaN;
      return n <= INT32_MAX ? n : undefined;
    }
    case 'executionMode':
      return text === '0' ? 'sequential' : text === '1' ? 'parallel' : undefined;
    case 'text':
      return text;
  }
}

const EXPECTED: Record<Kind, string> = {
  bool: 'true, false, on, off, 1 or 0',
  count: `an integer from 0 to ${INT32_MAX}`,
  executionMode: '0 (sequential) or 1 (parallel)',
  text: 'a string',
};

function read<T>(keys: Record<string, readonly [string, Kind]>, source: BackendParameterSource): T {
  const out: Record<string, unknown> = {};
  for (const [field, [key, kind]] of Object.entries(keys)) {
    const text = source.parameters?.[key]?.string_value;
    if (text === undefined) continue;
    const value = parseValue(kind, text);
    if (value !== undefined) out[field] = value;
  }
  return out as T;
}

/** The ONNX Runtime backend's parameters set in a config (unparseable values left out; `validateModelConfig` reports them). */
export function readOnnxRuntimeParameters(config: BackendParameterSource): OnnxRuntimeParameters {
  return read<OnnxRuntimeParameters>(ONNXRUNTIME_KEYS, config);
}

/** The PyTorch backend's parameters set in a config; as {@link readOnnxRuntimeParameters}. */
export function readPyTorchParameters(config: BackendParameterSource): PyTorchParameters {
  return read<PyTorchParameters>(PYTORCH_KEYS, config);
}

/** An integer as C's strtol reads it: leading blanks, a sign, digits; the rest ignored. */
const STOI_PREFIX = /^[ \t\n\v\f\r]*([+-]?[0-9]+)/;

/**
 * `<path>: <what>` for every value of a known integer parameter that the
 * backend's `std::stoi` would throw `std::out_of_range` for. The backends
 * catch only `std::invalid_argument`, so such a value aborts the whole
 * process when Triton loads the model (TRITON_FACTS.md). A subset of
 * {@link backendParameterProblems}: what must never reach Triton.
 */
export function abortingParameterProblems(config: BackendParameterSource): string[] {
  const framework = frameworkOf(config);
  if (framework === undefined) return [];
  const keys = framework === 'onnxruntime' ? ONNXRUNTIME_KEYS : PYTORCH_KEYS;
  const problems: string[] = [];
  for (const [key, kind] of Object.values(keys)) {
    const text = config.parameters?.[key]?.string_value;
    if ((kind !== 'count' && kind !== 'executionMode') || text === undefined) continue;
    const digits = STOI_PREFIX.exec(text)?.[1];
    if (digits !== undefined && Math.abs(Number(digits)) > INT32_MAX + (digits.startsWith('-') ? 1 : 0)) {
      problems.push(`parameters[${JSON.stringify(key)}]: ${JSON.stringify(text)} is out of the backend's 32-bit range`);
    }
  }
  return problems;
}

/** Which framework backend serves a config, by `backend` or by the platform names Triton maps to it. */
function frameworkOf(config: BackendParameterSource): 'onnxruntime' | 'pytorch' | undefined {
  if (config.backend === 'onnxruntime' || (!config.backend && config.platform === 'onnxruntime_onnx')) return 'onnxruntime';
  if (config.backend === 'pytorch' || (!config.backend && config.platform === 'pytorch_libtorch')) return 'pytorch';
  return undefined;
}

/**
 * `<path>: <what>` for every value of a known backend parameter the backend
 * would refuse (or, for `std::stoi`'s out-of-range, crash on), and for an
 * ONNX Runtime graph level the backend would silently ignore.
 */
export function backendParameterProblems(config: BackendParameterSource): string[] {
  const framework = frameworkOf(config);
  if (framework === undefined) return [];
  const keys = framework === 'onnxruntime' ? ONNXRUNTIME_KEYS : PYTORCH_KEYS;
  const problems: string[] = [];
  for (const [key, kind] of Object.values(keys)) {
    const text = config.parameters?.[key]?.string_value;
    if (text !== undefined && parseValue(kind, text) === undefined) {
      problems.push(`parameters[${JSON.stringify(key)}]: must be ${EXPECTED[kind]} (got ${JSON.stringify(text)})`);
    }
  }
  const level = config.optimization?.graph?.level;
  if (framework === 'onnxruntime' && level !== undefined && ![-1, 0, 1, 2].includes(level)) {
    problems.push(
      `optimization.graph.level: must be -1 (basic), 1 (extended), 2 (none) or 0 (all, the default) for ONNX Runtime (got ${level})`,
    );
  }
  return problems;
}
