/**
 * Server options: one zod schema (the only source of the option types), its
 * validation with readable messages, and the pure translation of validated
 * options into the ordered list of `TRITONSERVER_ServerOptions*` calls that
 * the addon makes on a fresh `TRITONSERVER_ServerOptions`.
 *
 * Only options the caller set produce a call: everything left out keeps
 * Triton's own default inside Triton (documented on each field and collected
 * in {@link serverOptionDefaults}), and a library too old to have a setter is
 * never asked for it unless the option is actually used.
 */
import { z } from 'zod';

import { closest } from './check.js';
import { TritonError } from './errors.js';

// ---------------------------------------------------------------------------
// Numeric enum values of the C API (native/core/triton_api.h).

/** `TRITONSERVER_ModelControlMode` by option value. */
export const MODEL_CONTROL_MODES = { none: 0, poll: 1, explicit: 2 } as const;
/** `TRITONSERVER_RateLimitMode` by option value. */
export const RATE_LIMITER_MODES = { off: 0, execCount: 1 } as const;
/** `TRITONSERVER_InstanceGroupKind` by option value. */
export const INSTANCE_GROUP_KINDS = { auto: 0, cpu: 1, gpu: 2, model: 3 } as const;
/** `TRITONSERVER_LogFormat` by option value. */
export const LOG_FORMATS = { default: 0, iso8601: 1 } as const;

/**
 * Every `TRITONSERVER_ServerOptions*` setter that {@link serverOptionCalls}
 * can emit, without the `TRITONSERVER_` prefix. (`ServerOptionsNew` and
 * `ServerOptionsDelete` are the addon's own business and not listed.)
 */
export const SERVER_OPTION_FUNCTIONS = [
  'ServerOptionsSetModelRepositoryPath',
  'ServerOptionsSetServerId',
  'ServerOptionsSetModelControlMode',
  'ServerOptionsSetStartupModel',
  'ServerOptionsSetModelConfigName',
  'ServerOptionsSetStrictModelConfig',
  'ServerOptionsSetStrictReadiness',
  'ServerOptionsSetExitOnError',
  'ServerOptionsSetExitTimeout',
  'ServerOptionsSetRateLimiterMode',
  'ServerOptionsAddRateLimiterResource',
  'ServerOptionsSetPinnedMemoryPoolByteSize',
  'ServerOptionsSetCudaMemoryPoolByteSize',
  'ServerOptionsSetMinSupportedComputeCapability',
  'ServerOptionsSetBufferManagerThreadCount',
  'ServerOptionsSetModelLoadThreadCount',
  'ServerOptionsSetModelLoadRetryCount',
  'ServerOptionsSetModelNamespacing',
  'ServerOptionsSetEnablePeerAccess',
  'ServerOptionsSetBackendDirectory',
  'ServerOptionsSetRepoAgentDirectory',
  'ServerOptionsSetCacheDirectory',
  'ServerOptionsSetBackendConfig',
  'ServerOptionsSetHostPolicy',
  'ServerOptionsSetCacheConfig',
  'ServerOptionsSetModelLoadDeviceLimit',
  'ServerOptionsSetLogFile',
  'ServerOptionsSetLogInfo',
  'ServerOptionsSetLogWarn',
  'ServerOptionsSetLogError',
  'ServerOptionsSetLogVerbose',
  'ServerOptionsSetLogFormat',
  'ServerOptionsSetMetrics',
  'ServerOptionsSetGpuMetrics',
  'ServerOptionsSetCpuMetrics',
  'ServerOptionsSetMetricsInterval',
  'ServerOptionsSetMetricsConfig',
] as const;

/** A `TRITONSERVER_ServerOptions*` setter name without the `TRITONSERVER_` prefix. */
export type ServerOptionFunction = (typeof SERVER_OPTION_FUNCTIONS)[number];

/**
 * One C call on the server options object: the function, then its arguments
 * after the `TRITONSERVER_ServerOptions*` pointer, in C order. Enums are
 * passed as their numeric values, `uint64_t`/`size_t` as safe integers.
 */
export type OptionCall = readonly [fn: ServerOptionFunction, ...args: (string | number | boolean)[]];

/**
 * The option (path in {@link ServerOptions}) that makes each setter be
 * called — for error messages such as "option 'modelConfigName' needs a newer
 * libtritonserver".
 */
export const SERVER_OPTION_FUNCTION_OPTION: Readonly<Record<ServerOptionFunction, string>> = {
  ServerOptionsSetModelRepositoryPath: 'modelRepository',
  ServerOptionsSetServerId: 'serverId',
  ServerOptionsSetModelControlMode: 'modelControlMode',
  ServerOptionsSetStartupModel: 'startupModels',
  ServerOptionsSetModelConfigName: 'modelConfigName',
  ServerOptionsSetStrictModelConfig: 'strictModelConfig',
  ServerOptionsSetStrictReadiness: 'strictReadiness',
  ServerOptionsSetExitOnError: 'exitOnError',
  ServerOptionsSetExitTimeout: 'exitTimeoutSeconds',
  ServerOptionsSetRateLimiterMode: 'rateLimiterMode',
  ServerOptionsAddRateLimiterResource: 'rateLimiterResources',
  ServerOptionsSetPinnedMemoryPoolByteSize: 'pinnedMemoryPoolBytes',
  ServerOptionsSetCudaMemoryPoolByteSize: 'cudaMemoryPoolBytes',
  ServerOptionsSetMinSupportedComputeCapability: 'minSupportedComputeCapability',
  ServerOptionsSetBufferManagerThreadCount: 'bufferManagerThreadCount',
  ServerOptionsSetModelLoadThreadCount: 'modelLoadThreadCount',
  ServerOptionsSetModelLoadRetryCount: 'modelLoadRetryCount',
  ServerOptionsSetModelNamespacing: 'modelNamespacing',
  ServerOptionsSetEnablePeerAccess: 'enablePeerAccess',
  ServerOptionsSetBackendDirectory: 'backendDirectory',
  ServerOptionsSetRepoAgentDirectory: 'repoAgentDirectory',
  ServerOptionsSetCacheDirectory: 'cacheDirectory',
  ServerOptionsSetBackendConfig: 'backendConfig',
  ServerOptionsSetHostPolicy: 'hostPolicies',
  ServerOptionsSetCacheConfig: 'cacheConfig',
  ServerOptionsSetModelLoadDeviceLimit: 'modelLoadDeviceLimits',
  ServerOptionsSetLogFile: 'log.file',
  ServerOptionsSetLogInfo: 'log.info',
  ServerOptionsSetLogWarn: 'log.warn',
  ServerOptionsSetLogError: 'log.error',
  ServerOptionsSetLogVerbose: 'log.verbose',
  ServerOptionsSetLogFormat: 'log.format',
  ServerOptionsSetMetrics: 'metrics.enabled',
  ServerOptionsSetGpuMetrics: 'metrics.gpu',
  ServerOptionsSetCpuMetrics: 'metrics.cpu',
  ServerOptionsSetMetricsInterval: 'metrics.intervalMs',
  ServerOptionsSetMetricsConfig: 'metrics.config',
};

// ---------------------------------------------------------------------------
// Building blocks.

const UINT32_MAX = 0xffff_ffff;
const INT32_MAX = 0x7fff_ffff;

const nonEmptyString = z.string().min(1);
/** A C `unsigned int`. */
const uint32 = z.number().int().min(0).max(UINT32_MAX);
/** A `uint64_t`/`size_t` byte size or count, limited to safe integers. */
const uint64 = z.number().int().min(0);
/** A key of a record indexed by CUDA device ordinal. */
const gpuDeviceKey = z
  .string()
  .refine((key) => /^(?:0|[1-9][0-9]{0,9})$/.test(key) && Number(key) <= INT32_MAX, {
    error: `expected a GPU device id (an integer from 0 to ${INT32_MAX})`,
  });
/** A setting value handed to Triton as text (`String(value)`). */
const settingValue = z.union([z.string(), z.number(), z.boolean()], {
  error: 'expected a string, a number or a boolean',
});
/** `{ [setting]: value }` */
const settings = z.record(nonEmptyString, settingValue);

const modelRepositoryPath = z.string().min(1);

const rateLimiterResource = z.strictObject({
  /** Resource name, as used in the models' `rate_limiter` config. */
  name: nonEmptyString,
  /** How many of the resource there are. */
  count: uint64,
  /**
   * The device the resource count is for. Default -1: the count is available
   * on *every* device. The device is ignored for resources that the model
   * configurations declare `global`.
   */
  device: z.number().int().min(-1).max(INT32_MAX).optional(),
});

const modelLoadDeviceLimit = z.strictObject({
  /** Device kind. Triton currently honours only 'gpu'. */
  kind: z.enum(['auto', 'cpu', 'gpu', 'model']),
  /** Device ordinal. */
  deviceId: z.number().int().min(0).max(INT32_MAX),
  /**
   * Memory-usage limit as a fraction in (0, 1]: loading a model on the device
   * is rejected while its memory use is above the limit.
   */
  fraction: z.number().gt(0).max(1),
});

/** Triton's cache configuration is JSON text: each value must serialize. */
const cacheSettings = z.record(z.string(), z.unknown()).superRefine((value, ctx) => {
  const problem = jsonProblem(value, new Set());
  if (problem !== undefined) {
    ctx.addIssue({ code: 'custom', message: `must be JSON-serializable (${problem})` });
  }
});

/** Why `value` would not survive `JSON.stringify`, or undefined if it would. */
function jsonProblem(value: unknown, seen: Set<object>): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined;
    case 'number':
      return Number.isFinite(value) ? undefined : `${value} is not a JSON number`;
    case 'object': {
      if (value === null) return undefined;
      if (seen.has(value)) return 'it contains a cycle';
      seen.add(value);
      const entries = Array.isArray(value) ? value : Object.values(value);
      for (const item of entries) {
        const problem = jsonProblem(item, seen);
        if (problem !== undefined) return problem;
      }
      seen.delete(value);
      return undefined;
    }
    default:
      return `a ${typeof value} is not JSON`;
  }
}

const logOptions = z.strictObject({
  /**
   * Log file (`ServerOptionsSetLogFile`). Default '' = the console.
   * Triton's logger is process-wide: log settings outlive the server and
   * are shared by every server in the process.
   */
  file: z.string().optional(),
  /** Info-level messages (`ServerOptionsSetLogInfo`). Default true. */
  info: z.boolean().optional(),
  /** Warning-level messages (`ServerOptionsSetLogWarn`). Default true. */
  warn: z.boolean().optional(),
  /** Error-level messages (`ServerOptionsSetLogError`). Default true. */
  error: z.boolean().optional(),
  /** Verbose level, 0 = off (`ServerOptionsSetLogVerbose`). Default 0. */
  verbose: z.number().int().min(0).max(INT32_MAX).optional(),
  /** Line format (`ServerOptionsSetLogFormat`: DEFAULT=0, ISO8601=1). Default 'default'. */
  format: z.enum(['default', 'iso8601']).optional(),
});

const metricsOptions = z.strictObject({
  /** Collect metrics at all (`ServerOptionsSetMetrics`). Default true (when Triton is built with metrics). */
  enabled: z.boolean().optional(),
  /** GPU metrics, if `enabled` too (`ServerOptionsSetGpuMetrics`). Default true (GPU builds). */
  gpu: z.boolean().optional(),
  /** CPU metrics, if `enabled` too (`ServerOptionsSetCpuMetrics`). Default true (when built with CPU metrics). */
  cpu: z.boolean().optional(),
  /** Interval between metric updates in ms (`ServerOptionsSetMetricsInterval`). Default 2000. */
  intervalMs: uint64.optional(),
  /**
   * `{ [group]: { [setting]: value } }` → `ServerOptionsSetMetricsConfig(group,
   * setting, String(value))` per setting. The group '' holds global settings
   * (e.g. `{ '': { summary_latencies: true } }`). Default: none.
   */
  config: z.record(z.string(), settings).optional(),
});

// ---------------------------------------------------------------------------
// The schema.

/**
 * Every Triton server option. Field names are camelCase of Triton's own; each
 * names the `TRITONSERVER_ServerOptions*` function it maps to and Triton's
 * default, which applies whenever the field is left out.
 */
export const serverOptionsSchema = z
  .strictObject({
    /**
     * Model repository path(s), absolute, one `ServerOptionsSetModelRepositoryPath`
     * call per path. Required. A model must be unique across all repositories.
     */
    modelRepository: z
      .union([modelRepositoryPath, z.array(modelRepositoryPath).min(1)], {
        error: (issue) =>
          issue.input === undefined
            ? 'is required'
            : `expected a model repository path or a non-empty array of paths, got ${describeValue(issue.input)}`,
      })
      .transform((value) => (typeof value === 'string' ? [value] : [...value])),
    /** Server identifier (`ServerOptionsSetServerId`). Default 'triton'. */
    serverId: nonEmptyString.optional(),
    /**
     * How models are loaded (`ServerOptionsSetModelControlMode`: NONE=0,
     * POLL=1, EXPLICIT=2). 'none': load everything at start, never change;
     * 'poll': load everything at start, `pollModelRepository()` applies repository
     * changes; 'explicit': load/unload only on request (plus `startupModels`).
     * Default 'poll' — the C API's default (the `tritonserver` CLI's is 'none').
     */
    modelControlMode: z.enum(['none', 'poll', 'explicit']).optional(),
    /**
     * Models to load at start in 'explicit' mode, one `ServerOptionsSetStartupModel`
     * call each; '*' loads every model. Only valid with `modelControlMode: 'explicit'`.
     * Default: none.
     */
    startupModels: z.array(nonEmptyString).optional(),
    /**
     * Name of the custom model configuration to load, `configs/<name>.pbtxt` in each
     * model directory, falling back to `config.pbtxt` (`ServerOptionsSetModelConfigName`,
     * API 1.31). No whitespace; '' means none. Default: '' (always `config.pbtxt`).
     */
    modelConfigName: z.string().regex(/^\S*$/, { error: 'expected a name without whitespace' }).optional(),
    /**
     * Require a complete `config.pbtxt`; false lets Triton auto-complete configs
     * from the model files (`ServerOptionsSetStrictModelConfig`). Default true.
     */
    strictModelConfig: z.boolean().optional(),
    /**
     * The server is ready only when every model is ready
     * (`ServerOptionsSetStrictReadiness`). Default true.
     */
    strictReadiness: z.boolean().optional(),
    /**
     * Fail server creation if any model fails to load
     * (`ServerOptionsSetExitOnError`). Default true.
     */
    exitOnError: z.boolean().optional(),
    /**
     * Seconds that stopping the server waits for in-flight requests and model
     * unloads (`ServerOptionsSetExitTimeout`). Default 30.
     */
    exitTimeoutSeconds: uint32.optional(),
    /**
     * Rate limiting (`ServerOptionsSetRateLimiterMode`: OFF=0, EXEC_COUNT=1).
     * 'execCount' schedules by execution count and the resources of
     * `rateLimiterResources`. Default 'off'.
     */
    rateLimiterMode: z.enum(['off', 'execCount']).optional(),
    /**
     * Resources for the rate limiter, one `ServerOptionsAddRateLimiterResource(name,
     * count, device ?? -1)` call each; device -1 means the count is available on
     * every device (and the device is ignored for global resources). Used only with
     * `rateLimiterMode: 'execCount'`. Default: none (Triton sizes each resource by
     * the largest need of the loaded models).
     */
    rateLimiterResources: z.array(rateLimiterResource).optional(),
    /**
     * Pinned (page-locked) host memory pool in bytes
     * (`ServerOptionsSetPinnedMemoryPoolByteSize`). Default 268435456 (256 MiB).
     */
    pinnedMemoryPoolBytes: uint64.optional(),
    /**
     * CUDA memory pool in bytes per GPU, `{ [deviceId]: bytes }`, one
     * `ServerOptionsSetCudaMemoryPoolByteSize(device, bytes)` call each.
     * Default: 67108864 (64 MiB) on every supported GPU not listed.
     */
    cudaMemoryPoolBytes: z.record(gpuDeviceKey, uint64).optional(),
    /**
     * GPUs below this CUDA compute capability are not used
     * (`ServerOptionsSetMinSupportedComputeCapability`). Default 6.0 in
     * NVIDIA's GPU builds (0 without GPU support).
     */
    minSupportedComputeCapability: z.number().min(0).optional(),
    /**
     * Threads of the buffer manager, 0 = none
     * (`ServerOptionsSetBufferManagerThreadCount`). Default 0.
     */
    bufferManagerThreadCount: uint32.optional(),
    /**
     * Threads that load models concurrently, at least 1
     * (`ServerOptionsSetModelLoadThreadCount`). Default 4.
     */
    modelLoadThreadCount: uint32.min(1).optional(),
    /**
     * How often a failed model load is retried
     * (`ServerOptionsSetModelLoadRetryCount`, API 1.28). Default 0.
     */
    modelLoadRetryCount: uint32.optional(),
    /**
     * Allow models of the same name in different repositories, each in its own
     * namespace (`ServerOptionsSetModelNamespacing`, API 1.18). Default false.
     */
    modelNamespacing: z.boolean().optional(),
    /**
     * Try to enable CUDA peer access between GPUs
     * (`ServerOptionsSetEnablePeerAccess`, API 1.32). Default true.
     */
    enablePeerAccess: z.boolean().optional(),
    /**
     * Where backends are found, `<dir>/<backend>/libtriton_<backend>.so`
     * (`ServerOptionsSetBackendDirectory`). Default '/opt/tritonserver/backends'.
     */
    backendDirectory: nonEmptyString.optional(),
    /**
     * Where repository agents are found (`ServerOptionsSetRepoAgentDirectory`).
     * Default '/opt/tritonserver/repoagents'.
     */
    repoAgentDirectory: nonEmptyString.optional(),
    /**
     * Where cache implementations are found, `<dir>/<name>/libtritoncache_<name>.so`
     * (`ServerOptionsSetCacheDirectory`, API 1.20). Default '/opt/tritonserver/caches'.
     */
    cacheDirectory: nonEmptyString.optional(),
    /**
     * Backend settings, `{ [backend]: { [setting]: value } }`, one
     * `ServerOptionsSetBackendConfig(backend, setting, String(value))` call each
     * (e.g. `{ python: { 'shm-default-byte-size': 1048576 } }`). The backend ''
     * holds settings for all backends (e.g. `default-max-batch-size`). Default: none.
     */
    backendConfig: z.record(z.string(), settings).optional(),
    /**
     * Host policies, `{ [policy]: { [setting]: value } }`, one
     * `ServerOptionsSetHostPolicy(policy, setting, String(value))` call each;
     * Triton knows the settings 'numa-node' and 'cpu-cores'. Default: none.
     */
    hostPolicies: z.record(nonEmptyString, settings).optional(),
    /**
     * Response cache, `{ [cacheName]: config }`, one
     * `ServerOptionsSetCacheConfig(name, JSON.stringify(config))` call each
     * (API 1.20), e.g. `{ local: { size: 1048576 } }`. Triton supports one cache
     * at a time. Default: none (no response cache).
     */
    cacheConfig: z.record(nonEmptyString, cacheSettings).optional(),
    /**
     * Memory limits for model loading, one
     * `ServerOptionsSetModelLoadDeviceLimit(kind, deviceId, fraction)` call each
     * (kind: AUTO=0, CPU=1, GPU=2, MODEL=3). Default: no limit.
     */
    modelLoadDeviceLimits: z.array(modelLoadDeviceLimit).optional(),
    /** Logging (`ServerOptionsSetLog*`). Triton's logger is process-wide. */
    log: logOptions.optional(),
    /** Metrics (`ServerOptionsSetMetrics*`, `ServerOptionsSetGpuMetrics`, `ServerOptionsSetCpuMetrics`). */
    metrics: metricsOptions.optional(),
    /**
     * Where to load `libtritonserver.so` from; not sent to Triton. Default:
     * `TRITONSERVER_LIBRARY`, then `$TRITON_HOME/lib`, then `/opt/tritonserver/lib`,
     * then the loader path, then PyTriton's wheel.
     */
    libraryPath: nonEmptyString.optional(),
    /**
     * Copy outputs into JS-owned memory instead of wrapping Triton's output
     * buffers as external (zero-copy) ArrayBuffers — for runtimes that forbid
     * external buffers (Electron's V8 sandbox). Not sent to Triton. Default false.
     */
    outputCopy: z.boolean().optional(),
    /**
     * Reload a model whose instance the package found unhealthy (a Python
     * model whose stub process died: its requests fail with INTERNAL
     * `Stub process '<instance>' is not healthy.`) as the manual recipe does —
     * unload without waiting, then load — once, however many requests fail
     * meanwhile (docs/lifetimes.md "Models that heal"). Needs
     * `modelControlMode: 'explicit'`. Not sent to Triton. Default false.
     */
    recoverUnhealthyModels: z.boolean().optional(),
  })
  .refine(
    (options: unknown) => {
      if (typeof options !== 'object' || options === null) return true;
      const { recoverUnhealthyModels, modelControlMode } = options as Record<string, unknown>;
      return recoverUnhealthyModels !== true || modelControlMode === 'explicit';
    },
    {
      path: ['recoverUnhealthyModels'],
      when: () => true,
      error: (issue) => {
        const mode = (issue.input as Record<string, unknown>).modelControlMode;
        const actual = mode === undefined ? "unset, so Triton's default 'poll' applies" : `${describeValue(mode)}`;
        return `needs modelControlMode 'explicit' to reload models (modelControlMode is ${actual})`;
      },
    },
  )
  .refine(
    (options: unknown) => {
      if (typeof options !== 'object' || options === null) return true;
      const { startupModels, modelControlMode } = options as Record<string, unknown>;
      return !Array.isArray(startupModels) || startupModels.length === 0 || modelControlMode === 'explicit';
    },
    {
      path: ['startupModels'],
      when: () => true,
      error: (issue) => {
        const input = issue.input as Record<string, unknown>;
        const mode = input.modelControlMode;
        const actual =
          mode === undefined ? "unset, so Triton's default 'poll' applies" : `${describeValue(mode)}`;
        return `only valid with modelControlMode 'explicit' (modelControlMode is ${actual})`;
      },
    },
  );

/** Server options as the caller writes them. */
export type ServerOptions = z.input<typeof serverOptionsSchema>;
/** Validated server options: `modelRepository` is always an array; unset fields stay unset. */
export type ResolvedServerOptions = z.output<typeof serverOptionsSchema>;

// ---------------------------------------------------------------------------
// Triton's defaults.

/**
 * Triton's own defaults for every option (what applies to a field left out),
 * for documentation and for reading options back. These are *not* sent to
 * Triton. `cudaMemoryPoolBytes` is empty because Triton gives every supported
 * GPU not listed 64 MiB (`DEFAULT_CUDA_MEMORY_POOL_BYTES`).
 */
export const serverOptionDefaults = {
  /** `serverId`: the server identifier is `'triton'`. */
  serverId: 'triton',
  /** `modelControlMode`: `'poll'`, the C API's default (the `tritonserver` CLI's is `'none'`). */
  modelControlMode: 'poll',
  /** `startupModels`: none. */
  startupModels: [],
  /** `modelConfigName`: `''`, always `config.pbtxt`. */
  modelConfigName: '',
  /** `strictModelConfig`: true, a complete `config.pbtxt` is required. */
  strictModelConfig: true,
  /** `strictReadiness`: true, the server is ready only when every model is. */
  strictReadiness: true,
  /** `exitOnError`: true, server creation fails when a model fails to load. */
  exitOnError: true,
  /** `exitTimeoutSeconds`: 30 seconds. */
  exitTimeoutSeconds: 30,
  /** `rateLimiterMode`: `'off'`. */
  rateLimiterMode: 'off',
  /** `rateLimiterResources`: none (Triton sizes each resource by the largest need of the loaded models). */
  rateLimiterResources: [],
  /** `pinnedMemoryPoolBytes`: 268435456 bytes (256 MiB). */
  pinnedMemoryPoolBytes: 268_435_456,
  /** `cudaMemoryPoolBytes`: none listed, so 64 MiB on every supported GPU (67108864 bytes). */
  cudaMemoryPoolBytes: {},
  /** `minSupportedComputeCapability`: 6.0 in NVIDIA's GPU builds (0 without GPU support). */
  minSupportedComputeCapability: 6.0,
  /** `bufferManagerThreadCount`: 0, no buffer manager threads. */
  bufferManagerThreadCount: 0,
  /** `modelLoadThreadCount`: 4 threads. */
  modelLoadThreadCount: 4,
  /**
   * `modelLoadRetryCount`: 0, Triton's documented default. The in-process
   * options would leave the count unset (a failing load then retried without
   * end), so `Server.start` sets 0 itself where the library has the setter (API 1.28).
   */
  modelLoadRetryCount: 0,
  /** `modelNamespacing`: false. */
  modelNamespacing: false,
  /** `enablePeerAccess`: true. */
  enablePeerAccess: true,
  /**
   * `backendDirectory`: `'/opt/tritonserver/backends'`. `Server.start` uses
   * a `backends` directory beside the loaded library instead when there is one.
   */
  backendDirectory: '/opt/tritonserver/backends',
  /** `repoAgentDirectory`: `'/opt/tritonserver/repoagents'`. */
  repoAgentDirectory: '/opt/tritonserver/repoagents',
  /**
   * `cacheDirectory`: `'/opt/tritonserver/caches'`. `Server.start` uses a
   * `caches` directory beside the loaded library instead when there is one.
   */
  cacheDirectory: '/opt/tritonserver/caches',
  /** `backendConfig`: none. */
  backendConfig: {},
  /** `hostPolicies`: none. */
  hostPolicies: {},
  /** `cacheConfig`: none, no response cache. */
  cacheConfig: {},
  /** `modelLoadDeviceLimits`: none, no limit. */
  modelLoadDeviceLimits: [],
  /** `log`: Triton's logging defaults. */
  log: {
    /** `log.file`: `''`, the console. */
    file: '',
    /** `log.info`: true. */
    info: true,
    /** `log.warn`: true. */
    warn: true,
    /** `log.error`: true. */
    error: true,
    /** `log.verbose`: 0, off. */
    verbose: 0,
    /** `log.format`: `'default'`. */
    format: 'default',
  },
  /** `metrics`: Triton's metrics defaults. */
  metrics: {
    /** `metrics.enabled`: true (when Triton is built with metrics). */
    enabled: true,
    /** `metrics.gpu`: true (GPU builds). */
    gpu: true,
    /** `metrics.cpu`: true (when built with CPU metrics). */
    cpu: true,
    /** `metrics.intervalMs`: 2000 ms between metric updates. */
    intervalMs: 2000,
    /** `metrics.config`: none. */
    config: {},
  },
  /** `outputCopy` (the package's, not Triton's): false, outputs wrap Triton's buffers without a copy. */
  outputCopy: false,
  /** `recoverUnhealthyModels`: false, an unhealthy model is reported, not reloaded. */
  recoverUnhealthyModels: false,
} as const satisfies DefaultsShape;

/** Triton's CUDA memory pool size for a supported GPU not in `cudaMemoryPoolBytes`: 64 MiB. */
export const DEFAULT_CUDA_MEMORY_POOL_BYTES = 67_108_864;

type DeepReadonly<T> = T extends readonly (infer E)[]
  ? readonly DeepReadonly<E>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/** Every Triton option (all but `modelRepository` and `libraryPath`), fully present. */
type DefaultsShape = DeepReadonly<
  {
    [K in Exclude<keyof ResolvedServerOptions, 'modelRepository' | 'libraryPath' | 'log' | 'metrics'>]-?: Exclude<
      ResolvedServerOptions[K],
      undefined
    >;
  } & {
    log: Required<NonNullable<ResolvedServerOptions['log']>>;
    metrics: Required<NonNullable<ResolvedServerOptions['metrics']>>;
  }
>;

// ---------------------------------------------------------------------------
// Validation.

/**
 * Validates server options. Throws `TritonError('INVALID_ARG')` naming every
 * bad field by its path, e.g.
 * `invalid server options: modelControlMode: expected one of 'none' | 'poll' | 'explicit', got 'auto'`.
 */
export function parseServerOptions(input: unknown): ResolvedServerOptions {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new TritonError(
      'INVALID_ARG',
      `invalid server options: expected an object such as { modelRepository: '/models' }, got ${describeValue(input)}`,
    );
  }
  const result = serverOptionsSchema.safeParse(input, { error: issueMessage });
  if (result.success) return result.data;
  const problems = result.error.issues.flatMap(formatIssue);
  const message =
    problems.length === 1
      ? `invalid server options: ${problems[0]}`
      : `invalid server options:\n  ${problems.join('\n  ')}`;
  throw new TritonError('INVALID_ARG', message, { cause: result.error });
}

type RawIssue = z.core.$ZodRawIssue;

/** zod error map: readable text for every issue a schema did not word itself. */
function issueMessage(issue: RawIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      if (typeof issue.input === 'number' && !Number.isFinite(issue.input)) {
        return `expected a finite ${issue.expected === 'int' ? 'integer' : 'number'}, got ${issue.input}`;
      }
      return `expected ${typeName(issue.expected)}, got ${describeValue(issue.input)}`;
    case 'invalid_value':
      return `expected ${
        issue.values.length === 1 ? '' : 'one of '
      }${issue.values.map(describeValue).join(' | ')}, got ${describeValue(issue.input)}`;
    case 'too_small': {
      const min = Number(issue.minimum);
      if (issue.origin === 'string') return min === 1 ? 'must not be empty' : `must have at least ${min} characters`;
      if (issue.origin === 'array' || issue.origin === 'set') {
        return `must have at least ${min} item${min === 1 ? '' : 's'}`;
      }
      return `must be ${issue.inclusive === false ? '>' : '>='} ${min}, got ${describeValue(issue.input)}`;
    }
    case 'too_big': {
      const max = Number(issue.maximum);
      if (issue.origin === 'string') return `must have at most ${max} characters`;
      if (issue.origin === 'array' || issue.origin === 'set') return `must have at most ${max} items`;
      if (issue.origin === 'int' && max === Number.MAX_SAFE_INTEGER) {
        return `must be a safe integer (<= ${max}), got ${describeValue(issue.input)}`;
      }
      return `must be ${issue.inclusive === false ? '<' : '<='} ${max}, got ${describeValue(issue.input)}`;
    }
    case 'invalid_format':
      return `has an invalid format, got ${describeValue(issue.input)}`;
    case 'not_multiple_of':
      return `must be a multiple of ${String(issue.divisor)}`;
    case 'unrecognized_keys':
      // Worded per key by formatIssue (needs the path); this is a fallback.
      return `unknown option${issue.keys.length === 1 ? '' : 's'} ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
    case 'invalid_key':
      return 'has an invalid key';
    case 'invalid_union':
      return `got ${describeValue(issue.input)}, which matches none of the accepted forms`;
    default:
      return 'is invalid';
  }
}

/** Lines `path: message` for one final issue (several for unknown keys). */
function formatIssue(issue: z.core.$ZodIssue): string[] {
  if (issue.code === 'unrecognized_keys') {
    const known = knownKeys(issue.path);
    return issue.keys.map((key) => {
      const suggestion = known === undefined ? undefined : closest(key, known);
      return `${formatPath([...issue.path, key])}: unknown option${
        suggestion === undefined ? '' : ` (did you mean '${suggestion}'?)`
      }`;
    });
  }
  if (issue.code === 'invalid_key') {
    const inner = issue.issues.map((i) => i.message).join('; ');
    const key = issue.path[issue.path.length - 1];
    const parent = issue.path.slice(0, -1);
    return [`${formatPath(parent)}: key ${describeValue(key)}: ${inner}`];
  }
  return [`${formatPath(issue.path)}: ${issue.message}`];
}

/** Known field names of the (strict) object at `path`, for suggestions. */
function knownKeys(path: readonly PropertyKey[]): string[] | undefined {
  if (path.length === 0) return Object.keys(serverOptionsSchema.shape);
  if (path.length === 1 && path[0] === 'log') return Object.keys(logOptions.shape);
  if (path.length === 1 && path[0] === 'metrics') return Object.keys(metricsOptions.shape);
  if (path.length === 2 && path[0] === 'rateLimiterResources') return Object.keys(rateLimiterResource.shape);
  if (path.length === 2 && path[0] === 'modelLoadDeviceLimits') return Object.keys(modelLoadDeviceLimit.shape);
  return undefined;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `log.verbose`, `modelRepository[0]`, `backendConfig['my-backend'].x`; '(options)' for the root. */
function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'string' && IDENTIFIER.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(String(segment)).replace(/^"|"$/g, "'")}]`;
  }
  return out === '' ? '(options)' : out;
}

function typeName(expected: string): string {
  switch (expected) {
    case 'int':
      return 'an integer';
    case 'number':
      return 'a number';
    case 'string':
      return 'a string';
    case 'boolean':
      return 'a boolean';
    case 'array':
      return 'an array';
    case 'object':
    case 'record':
      return 'an object';
    default:
      return expected;
  }
}

/** A short, readable rendering of any value for messages. */
function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return `'${value.length > 60 ? `${value.slice(0, 57)}...` : value}'`;
    case 'number':
    case 'boolean':
    case 'bigint':
      return typeof value === 'bigint' ? `${value}n` : String(value);
    case 'undefined':
      return 'undefined';
    case 'object':
      if (value === null) return 'null';
      if (Array.isArray(value)) return 'an array';
      return 'an object';
    default:
      return `a ${typeof value}`;
  }
}

// ---------------------------------------------------------------------------
// Translation into C calls.

/**
 * The ordered C calls that apply `options` to a fresh `TRITONSERVER_ServerOptions`.
 * Pure: only options that are set produce calls; `libraryPath` and
 * `outputCopy` are not Triton options and produce none.
 */
export function serverOptionCalls(options: ResolvedServerOptions): OptionCall[] {
  const calls: OptionCall[] = [];
  const o = options;

  for (const path of o.modelRepository) calls.push(['ServerOptionsSetModelRepositoryPath', path]);
  if (o.serverId !== undefined) calls.push(['ServerOptionsSetServerId', o.serverId]);
  if (o.modelControlMode !== undefined) {
    calls.push(['ServerOptionsSetModelControlMode', MODEL_CONTROL_MODES[o.modelControlMode]]);
  }
  for (const model of o.startupModels ?? []) calls.push(['ServerOptionsSetStartupModel', model]);
  if (o.modelConfigName !== undefined) calls.push(['ServerOptionsSetModelConfigName', o.modelConfigName]);
  if (o.strictModelConfig !== undefined) calls.push(['ServerOptionsSetStrictModelConfig', o.strictModelConfig]);
  if (o.strictReadiness !== undefined) calls.push(['ServerOptionsSetStrictReadiness', o.strictReadiness]);
  if (o.exitOnError !== undefined) calls.push(['ServerOptionsSetExitOnError', o.exitOnError]);
  if (o.exitTimeoutSeconds !== undefined) calls.push(['ServerOptionsSetExitTimeout', o.exitTimeoutSeconds]);
  if (o.rateLimiterMode !== undefined) {
    calls.push(['ServerOptionsSetRateLimiterMode', RATE_LIMITER_MODES[o.rateLimiterMode]]);
  }
  for (const r of o.rateLimiterResources ?? []) {
    calls.push(['ServerOptionsAddRateLimiterResource', r.name, r.count, r.device ?? -1]);
  }
  if (o.pinnedMemoryPoolBytes !== undefined) {
    calls.push(['ServerOptionsSetPinnedMemoryPoolByteSize', o.pinnedMemoryPoolBytes]);
  }
  for (const [device, bytes] of Object.entries(o.cudaMemoryPoolBytes ?? {})) {
    calls.push(['ServerOptionsSetCudaMemoryPoolByteSize', Number(device), bytes]);
  }
  if (o.minSupportedComputeCapability !== undefined) {
    calls.push(['ServerOptionsSetMinSupportedComputeCapability', o.minSupportedComputeCapability]);
  }
  if (o.bufferManagerThreadCount !== undefined) {
    calls.push(['ServerOptionsSetBufferManagerThreadCount', o.bufferManagerThreadCount]);
  }
  if (o.modelLoadThreadCount !== undefined) {
    calls.push(['ServerOptionsSetModelLoadThreadCount', o.modelLoadThreadCount]);
  }
  if (o.modelLoadRetryCount !== undefined) {
    calls.push(['ServerOptionsSetModelLoadRetryCount', o.modelLoadRetryCount]);
  }
  if (o.modelNamespacing !== undefined) calls.push(['ServerOptionsSetModelNamespacing', o.modelNamespacing]);
  if (o.enablePeerAccess !== undefined) calls.push(['ServerOptionsSetEnablePeerAccess', o.enablePeerAccess]);
  if (o.backendDirectory !== undefined) calls.push(['ServerOptionsSetBackendDirectory', o.backendDirectory]);
  if (o.repoAgentDirectory !== undefined) calls.push(['ServerOptionsSetRepoAgentDirectory', o.repoAgentDirectory]);
  if (o.cacheDirectory !== undefined) calls.push(['ServerOptionsSetCacheDirectory', o.cacheDirectory]);
  for (const [backend, values] of Object.entries(o.backendConfig ?? {})) {
    for (const [setting, value] of Object.entries(values)) {
      calls.push(['ServerOptionsSetBackendConfig', backend, setting, String(value)]);
    }
  }
  for (const [policy, values] of Object.entries(o.hostPolicies ?? {})) {
    for (const [setting, value] of Object.entries(values)) {
      calls.push(['ServerOptionsSetHostPolicy', policy, setting, String(value)]);
    }
  }
  for (const [name, config] of Object.entries(o.cacheConfig ?? {})) {
    calls.push(['ServerOptionsSetCacheConfig', name, JSON.stringify(config)]);
  }
  for (const limit of o.modelLoadDeviceLimits ?? []) {
    calls.push([
      'ServerOptionsSetModelLoadDeviceLimit',
      INSTANCE_GROUP_KINDS[limit.kind],
      limit.deviceId,
      limit.fraction,
    ]);
  }

  const log = o.log;
  if (log !== undefined) {
    if (log.file !== undefined) calls.push(['ServerOptionsSetLogFile', log.file]);
    if (log.info !== undefined) calls.push(['ServerOptionsSetLogInfo', log.info]);
    if (log.warn !== undefined) calls.push(['ServerOptionsSetLogWarn', log.warn]);
    if (log.error !== undefined) calls.push(['ServerOptionsSetLogError', log.error]);
    if (log.verbose !== undefined) calls.push(['ServerOptionsSetLogVerbose', log.verbose]);
    if (log.format !== undefined) calls.push(['ServerOptionsSetLogFormat', LOG_FORMATS[log.format]]);
  }

  const metrics = o.metrics;
  if (metrics !== undefined) {
    if (metrics.enabled !== undefined) calls.push(['ServerOptionsSetMetrics', metrics.enabled]);
    if (metrics.gpu !== undefined) calls.push(['ServerOptionsSetGpuMetrics', metrics.gpu]);
    if (metrics.cpu !== undefined) calls.push(['ServerOptionsSetCpuMetrics', metrics.cpu]);
    if (metrics.intervalMs !== undefined) calls.push(['ServerOptionsSetMetricsInterval', metrics.intervalMs]);
    for (const [group, values] of Object.entries(metrics.config ?? {})) {
      for (const [setting, value] of Object.entries(values)) {
        calls.push(['ServerOptionsSetMetricsConfig', group, setting, String(value)]);
      }
    }
  }

  return calls;
}
