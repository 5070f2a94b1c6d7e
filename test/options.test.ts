import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { TritonError } from '../lib/errors.js';
import {
  type OptionCall,
  type ServerOptions,
  parseServerOptions,
  SERVER_OPTION_FUNCTION_OPTION,
  SERVER_OPTION_FUNCTIONS,
  serverOptionCalls,
  serverOptionDefaults,
  serverOptionsSchema,
} from '../lib/options.js';

const REPO = '/models';

/** The calls after the model repository call(s) for `options` plus a repository. */
function callsFor(options: Omit<ServerOptions, 'modelRepository'>): OptionCall[] {
  return serverOptionCalls(parseServerOptions({ modelRepository: REPO, ...options })).slice(1);
}

function invalid(input: unknown): TritonError {
  try {
    parseServerOptions(input);
  } catch (error) {
    expect(error).toBeInstanceOf(TritonError);
    expect((error as TritonError).code).toBe('INVALID_ARG');
    return error as TritonError;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

describe('serverOptionCalls', () => {
  it('emits only the model repository call when nothing else is set', () => {
    expect(serverOptionCalls(parseServerOptions({ modelRepository: REPO }))).toEqual([
      ['ServerOptionsSetModelRepositoryPath', REPO],
    ]);
  });

  it('emits one repository call per path, in order', () => {
    expect(serverOptionCalls(parseServerOptions({ modelRepository: ['/a', '/b', '/c'] }))).toEqual([
      ['ServerOptionsSetModelRepositoryPath', '/a'],
      ['ServerOptionsSetModelRepositoryPath', '/b'],
      ['ServerOptionsSetModelRepositoryPath', '/c'],
    ]);
  });

  const table: Array<[string, Omit<ServerOptions, 'modelRepository'>, OptionCall[]]> = [
    ['serverId', { serverId: 'node' }, [['ServerOptionsSetServerId', 'node']]],
    ['modelControlMode none', { modelControlMode: 'none' }, [['ServerOptionsSetModelControlMode', 0]]],
    ['modelControlMode poll', { modelControlMode: 'poll' }, [['ServerOptionsSetModelControlMode', 1]]],
    ['modelControlMode explicit', { modelControlMode: 'explicit' }, [['ServerOptionsSetModelControlMode', 2]]],
    [
      'startupModels',
      { modelControlMode: 'explicit', startupModels: ['add_sub', '*'] },
      [
        ['ServerOptionsSetModelControlMode', 2],
        ['ServerOptionsSetStartupModel', 'add_sub'],
        ['ServerOptionsSetStartupModel', '*'],
      ],
    ],
    ['modelConfigName', { modelConfigName: 'h100' }, [['ServerOptionsSetModelConfigName', 'h100']]],
    ['strictModelConfig', { strictModelConfig: false }, [['ServerOptionsSetStrictModelConfig', false]]],
    ['strictReadiness', { strictReadiness: false }, [['ServerOptionsSetStrictReadiness', false]]],
    ['exitOnError', { exitOnError: true }, [['ServerOptionsSetExitOnError', true]]],
    ['exitTimeoutSeconds', { exitTimeoutSeconds: 0 }, [['ServerOptionsSetExitTimeout', 0]]],
    ['rateLimiterMode off', { rateLimiterMode: 'off' }, [['ServerOptionsSetRateLimiterMode', 0]]],
    ['rateLimiterMode execCount', { rateLimiterMode: 'execCount' }, [['ServerOptionsSetRateLimiterMode', 1]]],
    [
      'rateLimiterResources',
      { rateLimiterResources: [{ name: 'R1', count: 4 }, { name: 'R2', count: 2, device: 1 }] },
      [
        ['ServerOptionsAddRateLimiterResource', 'R1', 4, -1],
        ['ServerOptionsAddRateLimiterResource', 'R2', 2, 1],
      ],
    ],
    [
      'pinnedMemoryPoolBytes',
      { pinnedMemoryPoolBytes: 2 ** 40 },
      [['ServerOptionsSetPinnedMemoryPoolByteSize', 2 ** 40]],
    ],
    [
      'cudaMemoryPoolBytes',
      { cudaMemoryPoolBytes: { 1: 1024, 0: 0 } },
      [
        ['ServerOptionsSetCudaMemoryPoolByteSize', 0, 0],
        ['ServerOptionsSetCudaMemoryPoolByteSize', 1, 1024],
      ],
    ],
    [
      'minSupportedComputeCapability',
      { minSupportedComputeCapability: 7.5 },
      [['ServerOptionsSetMinSupportedComputeCapability', 7.5]],
    ],
    [
      'bufferManagerThreadCount',
      { bufferManagerThreadCount: 2 },
      [['ServerOptionsSetBufferManagerThreadCount', 2]],
    ],
    ['modelLoadThreadCount', { modelLoadThreadCount: 8 }, [['ServerOptionsSetModelLoadThreadCount', 8]]],
    ['modelLoadRetryCount', { modelLoadRetryCount: 3 }, [['ServerOptionsSetModelLoadRetryCount', 3]]],
    ['modelNamespacing', { modelNamespacing: true }, [['ServerOptionsSetModelNamespacing', true]]],
    ['enablePeerAccess', { enablePeerAccess: false }, [['ServerOptionsSetEnablePeerAccess', false]]],
    ['backendDirectory', { backendDirectory: '/b' }, [['ServerOptionsSetBackendDirectory', '/b']]],
    ['repoAgentDirectory', { repoAgentDirectory: '/r' }, [['ServerOptionsSetRepoAgentDirectory', '/r']]],
    ['cacheDirectory', { cacheDirectory: '/c' }, [['ServerOptionsSetCacheDirectory', '/c']]],
    [
      'backendConfig',
      {
        backendConfig: {
          '': { 'default-max-batch-size': 4 },
          python: { 'shm-default-byte-size': 1048576, 'shm-region-prefix-name': 'x', verbose: true },
        },
      },
      [
        ['ServerOptionsSetBackendConfig', '', 'default-max-batch-size', '4'],
        ['ServerOptionsSetBackendConfig', 'python', 'shm-default-byte-size', '1048576'],
        ['ServerOptionsSetBackendConfig', 'python', 'shm-region-prefix-name', 'x'],
        ['ServerOptionsSetBackendConfig', 'python', 'verbose', 'true'],
      ],
    ],
    [
      'hostPolicies',
      { hostPolicies: { gpu_0: { 'numa-node': 0, 'cpu-cores': '0-15' } } },
      [
        ['ServerOptionsSetHostPolicy', 'gpu_0', 'numa-node', '0'],
        ['ServerOptionsSetHostPolicy', 'gpu_0', 'cpu-cores', '0-15'],
      ],
    ],
    [
      'cacheConfig',
      { cacheConfig: { local: { size: 1048576 }, redis: { host: 'h', port: 6379, tls: { on: false } } } },
      [
        ['ServerOptionsSetCacheConfig', 'local', '{"size":1048576}'],
        ['ServerOptionsSetCacheConfig', 'redis', '{"host":"h","port":6379,"tls":{"on":false}}'],
      ],
    ],
    [
      'modelLoadDeviceLimits',
      {
        modelLoadDeviceLimits: [
          { kind: 'gpu', deviceId: 0, fraction: 0.5 },
          { kind: 'auto', deviceId: 1, fraction: 1 },
          { kind: 'cpu', deviceId: 0, fraction: 0.25 },
          { kind: 'model', deviceId: 2, fraction: 0.75 },
        ],
      },
      [
        ['ServerOptionsSetModelLoadDeviceLimit', 2, 0, 0.5],
        ['ServerOptionsSetModelLoadDeviceLimit', 0, 1, 1],
        ['ServerOptionsSetModelLoadDeviceLimit', 1, 0, 0.25],
        ['ServerOptionsSetModelLoadDeviceLimit', 3, 2, 0.75],
      ],
    ],
    ['log.file', { log: { file: '/tmp/triton.log' } }, [['ServerOptionsSetLogFile', '/tmp/triton.log']]],
    ['log.file empty (console)', { log: { file: '' } }, [['ServerOptionsSetLogFile', '']]],
    ['log.info', { log: { info: false } }, [['ServerOptionsSetLogInfo', false]]],
    ['log.warn', { log: { warn: false } }, [['ServerOptionsSetLogWarn', false]]],
    ['log.error', { log: { error: true } }, [['ServerOptionsSetLogError', true]]],
    ['log.verbose', { log: { verbose: 2 } }, [['ServerOptionsSetLogVerbose', 2]]],
    ['log.format default', { log: { format: 'default' } }, [['ServerOptionsSetLogFormat', 0]]],
    ['log.format iso8601', { log: { format: 'iso8601' } }, [['ServerOptionsSetLogFormat', 1]]],
    ['log (empty)', { log: {} }, []],
    ['metrics.enabled', { metrics: { enabled: false } }, [['ServerOptionsSetMetrics', false]]],
    ['metrics.gpu', { metrics: { gpu: false } }, [['ServerOptionsSetGpuMetrics', false]]],
    ['metrics.cpu', { metrics: { cpu: true } }, [['ServerOptionsSetCpuMetrics', true]]],
    ['metrics.intervalMs', { metrics: { intervalMs: 500 } }, [['ServerOptionsSetMetricsInterval', 500]]],
    [
      'metrics.config',
      { metrics: { config: { '': { summary_latencies: true }, summary_quantiles: { q: '0.5:0.05' } } } },
      [
        ['ServerOptionsSetMetricsConfig', '', 'summary_latencies', 'true'],
        ['ServerOptionsSetMetricsConfig', 'summary_quantiles', 'q', '0.5:0.05'],
      ],
    ],
    ['libraryPath (not a Triton option)', { libraryPath: '/opt/x/libtritonserver.so' }, []],
    ['outputCopy (not a Triton option)', { outputCopy: true }, []],
  ];

  it.each(table)('%s', (_label, options, expected) => {
    expect(callsFor(options)).toEqual(expected);
  });

  it('covers every setter in SERVER_OPTION_FUNCTIONS', () => {
    const emitted = new Set(table.flatMap(([, options]) => callsFor(options).map(([fn]) => fn)));
    emitted.add('ServerOptionsSetModelRepositoryPath');
    expect([...emitted].sort()).toEqual([...SERVER_OPTION_FUNCTIONS].sort());
  });

  it('keeps a fixed order across all options', () => {
    const all = parseServerOptions({
      modelRepository: ['/m'],
      metrics: { enabled: true },
      log: { verbose: 1 },
      serverId: 'id',
      modelControlMode: 'explicit',
      startupModels: ['a'],
    });
    expect(serverOptionCalls(all).map(([fn]) => fn)).toEqual([
      'ServerOptionsSetModelRepositoryPath',
      'ServerOptionsSetServerId',
      'ServerOptionsSetModelControlMode',
      'ServerOptionsSetStartupModel',
      'ServerOptionsSetLogVerbose',
      'ServerOptionsSetMetrics',
    ]);
  });

  it('does not inject defaults into resolved options', () => {
    const resolved = parseServerOptions({ modelRepository: REPO, log: {} });
    expect(resolved).toEqual({ modelRepository: [REPO], log: {} });
  });

  it('does not alias the caller’s repository array', () => {
    const paths = ['/a'];
    const resolved = parseServerOptions({ modelRepository: paths });
    paths.push('/b');
    expect(resolved.modelRepository).toEqual(['/a']);
  });
});

describe('SERVER_OPTION_FUNCTIONS', () => {
  it('lists exactly the ServerOptions setters declared in native/core/triton_api.h', () => {
    const header = readFileSync(new URL('../native/core/triton_api.h', import.meta.url), 'utf8');
    const declared = [...header.matchAll(/X\(\s*\d+\s*,[^,]+,\s*(ServerOptions\w+)\s*,/g)]
      .map((m) => m[1])
      .filter((name) => name !== 'ServerOptionsNew' && name !== 'ServerOptionsDelete');
    expect([...SERVER_OPTION_FUNCTIONS].sort()).toEqual(declared.sort());
  });

  it('names the option behind every setter', () => {
    expect(Object.keys(SERVER_OPTION_FUNCTION_OPTION).sort()).toEqual([...SERVER_OPTION_FUNCTIONS].sort());
    const topLevel = Object.keys(serverOptionsSchema.shape);
    for (const option of Object.values(SERVER_OPTION_FUNCTION_OPTION)) {
      expect(topLevel).toContain(option.split('.')[0]);
    }
  });
});

describe('serverOptionDefaults', () => {
  it('documents Triton’s defaults for every Triton option', () => {
    const keys = Object.keys(serverOptionsSchema.shape).filter((k) => k !== 'modelRepository' && k !== 'libraryPath');
    expect(Object.keys(serverOptionDefaults).sort()).toEqual(keys.sort());
    expect(serverOptionDefaults).toMatchObject({
      serverId: 'triton',
      modelControlMode: 'poll',
      strictModelConfig: true,
      exitTimeoutSeconds: 30,
      pinnedMemoryPoolBytes: 256 * 1024 * 1024,
      modelLoadThreadCount: 4,
      log: { info: true, warn: true, error: true, verbose: 0, format: 'default' },
      metrics: { intervalMs: 2000 },
      outputCopy: false,
    });
  });

  it('is itself a valid set of options', () => {
    const { modelControlMode: _mode, ...rest } = serverOptionDefaults;
    const resolved = parseServerOptions({ modelRepository: REPO, ...structuredClone(rest) });
    expect(serverOptionCalls(resolved).length).toBeGreaterThan(20);
  });
});

describe('parseServerOptions errors', () => {
  const cases: Array<[string, unknown, string | RegExp]> = [
    [
      'bad enum',
      { modelRepository: REPO, modelControlMode: 'auto' },
      "invalid server options: modelControlMode: expected one of 'none' | 'poll' | 'explicit', got 'auto'",
    ],
    ['missing repository', {}, 'invalid server options: modelRepository: is required'],
    ['empty repository list', { modelRepository: [] }, 'modelRepository: must have at least 1 item'],
    ['empty repository path', { modelRepository: ['/a', ''] }, 'modelRepository[1]: must not be empty'],
    [
      'repository of the wrong type',
      { modelRepository: 42 },
      'modelRepository: expected a model repository path or a non-empty array of paths, got 42',
    ],
    ['negative size', { modelRepository: REPO, pinnedMemoryPoolBytes: -1 }, 'pinnedMemoryPoolBytes: must be >= 0, got -1'],
    [
      'unsafe size',
      { modelRepository: REPO, pinnedMemoryPoolBytes: 2 ** 60 },
      /pinnedMemoryPoolBytes: must be a safe integer/,
    ],
    ['fractional size', { modelRepository: REPO, pinnedMemoryPoolBytes: 1.5 }, 'pinnedMemoryPoolBytes: expected an integer, got 1.5'],
    ['size as string', { modelRepository: REPO, pinnedMemoryPoolBytes: '1' }, "pinnedMemoryPoolBytes: expected a number, got '1'"],
    ['NaN', { modelRepository: REPO, minSupportedComputeCapability: Number.NaN }, 'minSupportedComputeCapability: expected a finite number, got NaN'],
    ['Infinity', { modelRepository: REPO, metrics: { intervalMs: Infinity } }, 'metrics.intervalMs: expected a finite number, got Infinity'],
    ['uint32 overflow', { modelRepository: REPO, exitTimeoutSeconds: 2 ** 32 }, 'exitTimeoutSeconds: must be <= 4294967295'],
    ['zero load threads', { modelRepository: REPO, modelLoadThreadCount: 0 }, 'modelLoadThreadCount: must be >= 1, got 0'],
    ['boolean as string', { modelRepository: REPO, strictModelConfig: 'false' }, "strictModelConfig: expected a boolean, got 'false'"],
    ['null', { modelRepository: REPO, serverId: null }, 'serverId: expected a string, got null'],
    ['empty serverId', { modelRepository: REPO, serverId: '' }, 'serverId: must not be empty'],
    [
      'unknown key',
      { modelRepository: REPO, modelControlMod: 'explicit' },
      "modelControlMod: unknown option (did you mean 'modelControlMode'?)",
    ],
    ['unknown key without a near match', { modelRepository: REPO, grpcPort: 8001 }, /grpcPort: unknown option$/],
    ['unknown nested key', { modelRepository: REPO, log: { level: 1 } }, 'log.level: unknown option'],
    ['nested near match', { modelRepository: REPO, log: { verbos: 1 } }, "log.verbos: unknown option (did you mean 'verbose'?)"],
    ['negative log.verbose', { modelRepository: REPO, log: { verbose: -1 } }, 'log.verbose: must be >= 0, got -1'],
    [
      'bad log.format',
      { modelRepository: REPO, log: { format: 'json' } },
      "log.format: expected one of 'default' | 'iso8601', got 'json'",
    ],
    [
      'startupModels without explicit mode',
      { modelRepository: REPO, startupModels: ['a'] },
      "startupModels: only valid with modelControlMode 'explicit' (modelControlMode is unset, so Triton's default 'poll' applies)",
    ],
    [
      'startupModels with none mode',
      { modelRepository: REPO, modelControlMode: 'none', startupModels: ['a'] },
      "startupModels: only valid with modelControlMode 'explicit' (modelControlMode is 'none')",
    ],
    [
      'rate limiter device below -1',
      { modelRepository: REPO, rateLimiterResources: [{ name: 'R', count: 1, device: -2 }] },
      'rateLimiterResources[0].device: must be >= -1, got -2',
    ],
    [
      'rate limiter resource key typo',
      { modelRepository: REPO, rateLimiterResources: [{ name: 'R', count: 1, devices: 0 }] },
      "rateLimiterResources[0].devices: unknown option (did you mean 'device'?)",
    ],
    [
      'rate limiter mode',
      { modelRepository: REPO, rateLimiterMode: 'exec_count' },
      "rateLimiterMode: expected one of 'off' | 'execCount', got 'exec_count'",
    ],
    [
      'cuda pool device key',
      { modelRepository: REPO, cudaMemoryPoolBytes: { gpu0: 1 } },
      "cudaMemoryPoolBytes: key 'gpu0': expected a GPU device id (an integer from 0 to 2147483647)",
    ],
    ['cuda pool size', { modelRepository: REPO, cudaMemoryPoolBytes: { 0: -1 } }, "cudaMemoryPoolBytes['0']: must be >= 0, got -1"],
    [
      'backend setting value',
      { modelRepository: REPO, backendConfig: { 'my-backend': { x: [1] } } },
      "backendConfig['my-backend'].x: expected a string, a number or a boolean",
    ],
    ['host policy name', { modelRepository: REPO, hostPolicies: { '': { 'numa-node': 0 } } }, /hostPolicies: key '': /],
    [
      'cache config not JSON',
      { modelRepository: REPO, cacheConfig: { local: { size: 10n } } },
      'cacheConfig.local: must be JSON-serializable (a bigint is not JSON)',
    ],
    ['device limit fraction 0', { modelRepository: REPO, modelLoadDeviceLimits: [{ kind: 'gpu', deviceId: 0, fraction: 0 }] }, 'modelLoadDeviceLimits[0].fraction: must be > 0, got 0'],
    ['device limit fraction > 1', { modelRepository: REPO, modelLoadDeviceLimits: [{ kind: 'gpu', deviceId: 0, fraction: 1.5 }] }, 'modelLoadDeviceLimits[0].fraction: must be <= 1, got 1.5'],
    ['device limit kind', { modelRepository: REPO, modelLoadDeviceLimits: [{ kind: 'tpu', deviceId: 0, fraction: 1 }] }, "modelLoadDeviceLimits[0].kind: expected one of 'auto' | 'cpu' | 'gpu' | 'model', got 'tpu'"],
    ['device limit missing field', { modelRepository: REPO, modelLoadDeviceLimits: [{ kind: 'gpu', fraction: 1 }] }, 'modelLoadDeviceLimits[0].deviceId: is required'],
    ['modelConfigName with space', { modelRepository: REPO, modelConfigName: 'a b' }, 'modelConfigName: expected a name without whitespace'],
    ['not an object', undefined, 'invalid server options: expected an object'],
    ['an array', [REPO], 'invalid server options: expected an object'],
    ['metrics config value', { modelRepository: REPO, metrics: { config: { g: { s: null } } } }, 'metrics.config.g.s: expected a string, a number or a boolean'],
  ];

  it.each(cases)('%s', (_label, input, expected) => {
    const error = invalid(input);
    if (typeof expected === 'string') expect(error.message).toContain(expected);
    else expect(error.message).toMatch(expected);
  });

  it('names every bad field at once, one per line', () => {
    const error = invalid({
      modelRepository: REPO,
      modelControlMode: 'auto',
      pinnedMemoryPoolBytes: -1,
      log: { verbose: 'loud' },
      bogus: true,
    });
    expect(error.message.split('\n')).toEqual([
      'invalid server options:',
      "  modelControlMode: expected one of 'none' | 'poll' | 'explicit', got 'auto'",
      '  pinnedMemoryPoolBytes: must be >= 0, got -1',
      "  log.verbose: expected a number, got 'loud'",
      '  bogus: unknown option',
    ]);
  });

  it('keeps the zod error as the cause', () => {
    const error = invalid({ modelRepository: REPO, serverId: 1 });
    expect(error.cause).toBeDefined();
  });
});
