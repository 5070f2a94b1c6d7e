import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TritonError } from '../lib/errors.js';
import {
  checkModelConfig,
  formatModelConfig,
  MODEL_CONFIG_MESSAGE,
  modelConfigSchema,
  parseModelConfig,
  parseModelConfigJson,
  validateModelConfig,
  type ModelConfig,
  type ModelConfigInput,
} from '../lib/model-config.js';
import { writeModelRepository } from '../lib/model-repository.js';
import type { PbField, PbMessage } from '../lib/pbtxt.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixturesDir = path.join(here, 'fixtures', 'configs');
const modelsDir = path.join(here, 'models');

const FIXTURES = [
  'text_processor.pbtxt',
  'resnet50_pytorch.pbtxt',
  'ensemble_pipeline.pbtxt',
  'syntax_features.pbtxt',
] as const;

function fixture(name: (typeof FIXTURES)[number]): ModelConfig {
  return parseModelConfig(readFileSync(path.join(fixturesDir, name), 'utf8'));
}

function thrown(fn: () => unknown): TritonError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(TritonError);
    return err as TritonError;
  }
  throw new Error('expected a TritonError, but nothing was thrown');
}

async function rejection(promise: Promise<unknown>): Promise<TritonError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(TritonError);
    return err as TritonError;
  }
  throw new Error('expected a TritonError rejection, but the promise resolved');
}

/** Every `config.pbtxt` under test/models, found now (the directory may be empty or absent). */
function repositoryConfigs(): string[] {
  if (!existsSync(modelsDir)) return [];
  return readdirSync(modelsDir, { recursive: true, encoding: 'utf8' })
    .filter((rel) => path.basename(rel) === 'config.pbtxt')
    .map((rel) => path.join(modelsDir, rel))
    .filter((file) => statSync(file).isFile())
    .sort();
}

const fp32 = (name: string, dims: number[]) => ({ name, data_type: 'TYPE_FP32' as const, dims });

// ---------------------------------------------------------------------------

describe('config.pbtxt fixtures', () => {
  it('reads the Python text model', () => {
    expect(fixture('text_processor.pbtxt')).toEqual({
      name: 'text_processor',
      backend: 'python',
      max_batch_size: 16,
      input: [{ name: 'TEXT', data_type: 'TYPE_STRING', dims: [1] }],
      output: [{ name: 'PROCESSED_TEXT', data_type: 'TYPE_STRING', dims: [1] }],
      dynamic_batching: { max_queue_delay_microseconds: 500 },
      instance_group: [{ kind: 'KIND_CPU', count: 1 }],
    });
  });

  it('reads the PyTorch ResNet-50', () => {
    expect(fixture('resnet50_pytorch.pbtxt')).toEqual({
      name: 'resnet50_pytorch',
      platform: 'pytorch_libtorch',
      max_batch_size: 32,
      input: [{ name: 'INPUT__0', data_type: 'TYPE_FP32', format: 'FORMAT_NCHW', dims: [3, 224, 224] }],
      output: [{ name: 'OUTPUT__0', data_type: 'TYPE_FP32', dims: [1000], label_filename: 'imagenet_labels.txt' }],
      instance_group: [
        { kind: 'KIND_CPU', count: 2 },
        { kind: 'KIND_GPU', count: 1, gpus: [0] },
      ],
      dynamic_batching: { preferred_batch_size: [8, 16], max_queue_delay_microseconds: 100 },
    });
  });

  it('reads the ensemble with its maps', () => {
    const config = fixture('ensemble_pipeline.pbtxt');
    expect(config.platform).toBe('ensemble');
    expect(config.ensemble_scheduling?.step).toEqual([
      {
        model_name: 'preprocess',
        model_version: -1,
        input_map: { INPUT_0: 'RAW_IMAGE' },
        output_map: { OUTPUT_0: 'preprocessed_image' },
      },
      {
        model_name: 'resnet50_pytorch',
        model_version: -1,
        input_map: { INPUT__0: 'preprocessed_image' },
        output_map: { OUTPUT__0: 'CLASSIFICATION' },
      },
    ]);
  });

  it.each(['text_processor.pbtxt', 'resnet50_pytorch.pbtxt', 'ensemble_pipeline.pbtxt'] as const)(
    '%s passes validation unchanged',
    (name) => {
      const config = fixture(name);
      expect(checkModelConfig(config)).toEqual([]);
      expect(validateModelConfig(config)).toEqual(config);
    },
  );

  it('reads every syntax feature of the syntax fixture', () => {
    const c = fixture('syntax_features.pbtxt');
    expect(c.name).toBe('syntaxfeatures'); // adjacent strings
    expect(c.platform).toBe('onnxruntime_onnx'); // single quotes
    expect(c.max_batch_size).toBe(16); // hex
    expect(c.version_policy).toEqual({ specific: { versions: [1, 3] } });
    expect(c.input).toEqual([
      {
        name: 'INAA', // \x41 and \101
        data_type: 'TYPE_FP16',
        dims: [-1, 3],
        reshape: { shape: [3, -1] }, // < >
        allow_ragged_batch: true, // True
        optional: false, // f
      },
      { name: 'MASK', data_type: 'TYPE_BOOL', dims: [-1, 4], is_shape_tensor: false }, // repeated form, 0
    ]);
    expect(c.output).toEqual([
      { name: 'OUT', data_type: 'TYPE_BF16', dims: [-1] }, // "- 1"
      { name: 'TAB\tQUOTE"SQ\'BS\\NL\n', data_type: 'TYPE_FP32' }, // escapes, enum by number
    ]);
    expect(c.optimization).toEqual({
      priority: 'PRIORITY_MAX',
      cuda: { graphs: true, busy_wait_events: false, output_copy_stream: true },
      execution_accelerators: {
        gpu_execution_accelerator: [
          { name: 'tensorrt', parameters: { precision_mode: 'FP16', max_workspace_size_bytes: '1073741824' } },
        ],
      },
      input_pinned_memory: { enable: false },
    });
    expect(c.sequence_batching?.max_sequence_idle_microseconds).toBe(9007199254740991);
    expect(c.sequence_batching?.control_input).toEqual([
      { name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', fp32_false_true: [-0.5, 1000] }] },
      { name: 'READY', control: [{ kind: 'CONTROL_SEQUENCE_READY', bool_false_true: [false, true] }] },
    ]);
    expect(c.sequence_batching?.state?.[0]?.dims).toEqual([-9007199254740991]);
    expect(c.sequence_batching?.state?.[0]?.initial_state).toEqual([
      { data_type: 'TYPE_INT64', dims: [1], zero_data: true, name: 'zeros' },
    ]);
    expect(c.instance_group).toEqual([
      {
        kind: 'KIND_MODEL',
        count: 1,
        rate_limiter: { resources: [{ name: 'R1', global: true, count: 2 }], priority: 2 },
      },
    ]);
    expect(c.parameters).toEqual({
      single: { string_value: "it's ok" },
      listed: { string_value: 'é😀' },
      dup: { string_value: 'last one wins' },
    });
    expect(c.metric_tags).toEqual({ team: 'vision' });
    expect(c.cc_model_filenames).toEqual({});
    expect(c.model_warmup).toEqual([
      { name: 'warm', batch_size: 1, inputs: { IN: { data_type: 'TYPE_FP16', dims: [3], random_data: true } } },
    ]);
    expect(c.model_transaction_policy).toEqual({ decoupled: false });
    expect(c.response_cache).toEqual({ enable: true });
    expect(c.model_metrics?.metric_control?.[0]?.histogram_options?.buckets).toEqual([
      1,
      2.5,
      Number.NEGATIVE_INFINITY,
      Number.NaN,
      1e-7,
    ]);
    expect(c.dynamic_batching).toEqual({
      priority_levels: 2,
      priority_queue_policy: { '1': { timeout_action: 'DELAY', max_queue_size: 8 } },
    });
    expect(c['future_field']).toBe('FUTURE_ENUM');
    expect(c['future_block']).toEqual({ depth: 1.5, flag: true, note: 'n' });
  });
});

describe('parse(format(parse(x))) equals parse(x)', () => {
  it.each(FIXTURES)('fixture %s', (name) => {
    const first = fixture(name);
    const text = formatModelConfig(first);
    expect(parseModelConfig(text)).toEqual(first);
    // Formatting is stable too.
    expect(formatModelConfig(parseModelConfig(text))).toBe(text);
  });

  it('every config.pbtxt under test/models', () => {
    const failures: string[] = [];
    for (const file of repositoryConfigs()) {
      try {
        const first = parseModelConfig(readFileSync(file, 'utf8'));
        const again = parseModelConfig(formatModelConfig(first));
        expect(again).toEqual(first);
      } catch (err) {
        failures.push(`${path.relative(here, file)}: ${(err as Error).message}`);
      }
    }
    expect(failures).toEqual([]);
  });
});

describe('formatModelConfig', () => {
  it('writes the text Triton reads', () => {
    const text = formatModelConfig({
      name: 'm',
      backend: 'python',
      max_batch_size: 4,
      input: [{ name: 'IN', data_type: 'TYPE_STRING', dims: ['-1'] }],
      output: [fp32('OUT', [2, 3])],
      dynamic_batching: {},
      instance_group: [{ kind: 'KIND_GPU', gpus: [0, 1] }],
      parameters: { 'EXECUTION_ENV_PATH': { string_value: '$$TRITON_MODEL_DIRECTORY/env.tar.gz' } },
    });
    expect(text).toBe(
      [
        'name: "m"',
        'backend: "python"',
        'max_batch_size: 4',
        'input [',
        '  {',
        '    name: "IN"',
        '    data_type: TYPE_STRING',
        '    dims: [ -1 ]',
        '  }',
        ']',
        'output [',
        '  {',
        '    name: "OUT"',
        '    data_type: TYPE_FP32',
        '    dims: [ 2, 3 ]',
        '  }',
        ']',
        'dynamic_batching { }',
        'instance_group [',
        '  {',
        '    kind: KIND_GPU',
        '    gpus: [ 0, 1 ]',
        '  }',
        ']',
        'parameters {',
        '  key: "EXECUTION_ENV_PATH"',
        '  value {',
        '    string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz"',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
  });

  it('puts fields in schema order and unknown fields last', () => {
    const text = formatModelConfig({ max_batch_size: 1, custom_thing: 'x', name: 'm' } as ModelConfigInput);
    expect(text).toBe('name: "m"\nmax_batch_size: 1\ncustom_thing: "x"\n');
  });

  it('rejects values of the wrong type, naming the path', () => {
    const err = thrown(() => formatModelConfig({ input: [{ name: 'a', data_type: 'TYPE_NOPE' }] } as unknown as ModelConfig));
    expect(err.code).toBe('INVALID_ARG');
    expect(err.message).toBe(
      'cannot format model config: input[0].data_type: unknown value "TYPE_NOPE"; expected one of TYPE_INVALID, TYPE_BOOL, TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, TYPE_UINT64, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64, TYPE_STRING, TYPE_BF16',
    );
  });
});

describe('parseModelConfig errors name line and column', () => {
  it.each([
    ['name: "m"\nmax_batch_size 8', "config.pbtxt:2:16: expected ':' after field name 'max_batch_size', got '8'"],
    ['input [\n  { name: "a" data_type: TYPE_FLOAT }\n]', "config.pbtxt:2:26: unknown value 'TYPE_FLOAT' for enum field 'data_type' (expected one of TYPE_INVALID, TYPE_BOOL, TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, TYPE_UINT64, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64, TYPE_STRING, TYPE_BF16)"],
    ['input { name: "a" data_type: TYPE_FP32 dims: [ 1, x ] }', "config.pbtxt:1:51: expected an integer for field 'dims' (int64), got 'x'"],
    ['name: "a"\nname: "b"', "config.pbtxt:2:1: field 'name' is not repeated but is set more than once (first at 1:1)"],
    ['max_batch_size: 8\ndynamic_batching {\n  max_queue_delay_microseconds: -5\n}', "config.pbtxt:3:33: -5 is out of range for field 'max_queue_delay_microseconds' (uint64)"],
    ['instance_group [ { kind: KIND_GPU gpus: [ 0 ] }', "config.pbtxt:1:48: expected ',' or ']' in the list of 'instance_group', got end of input"],
    ['parameters { key: "k" value: "v" }', "config.pbtxt:1:30: expected '{' to start message field 'value', got string \"v\""],
  ])('%j', (text, message) => {
    const err = thrown(() => parseModelConfig(text));
    expect(err.code).toBe('INVALID_ARG');
    expect(err.message).toBe(message);
  });

  it('points schema problems at the value, one line each', () => {
    const text = 'name: "m"\ninput [\n  { name: "a" data_type: TYPE_FP32 },\n  { dims: [ 1 ] }\n]\nensemble_scheduling { step { input_map { key: "x" value: "y" } } }\n';
    const err = thrown(() => parseModelConfig(text));
    expect(err.message).toBe(
      [
        'config.pbtxt:4:3: input[1].name: required',
        'config.pbtxt:4:3: input[1].data_type: required',
        'config.pbtxt:6:28: ensemble_scheduling.step[0].model_name: required',
      ].join('\n'),
    );
  });

  it('runs no semantic checks (that is validateModelConfig)', () => {
    const config = parseModelConfig('max_batch_size: 0\ndynamic_batching { }\ninput { name: "a" data_type: TYPE_FP32 dims: [ 0 ] }');
    expect(config.dynamic_batching).toEqual({});
    expect(checkModelConfig(config)).toEqual([
      'input[0].dims[0]: must be a positive integer or -1 (got 0)',
      'dynamic_batching: not allowed when max_batch_size is 0 (batching disabled); set max_batch_size > 0',
    ]);
  });
});

// ---------------------------------------------------------------------------

const base = {
  name: 'm',
  max_batch_size: 8,
  input: [fp32('IN', [-1, 3])],
  output: [fp32('OUT', [-1])],
} satisfies ModelConfigInput;

const ensembleBase = {
  name: 'pipe',
  platform: 'ensemble',
  max_batch_size: 4,
  input: [fp32('RAW', [-1])],
  output: [fp32('FINAL', [-1])],
} satisfies ModelConfigInput;

describe('validateModelConfig: accepts', () => {
  it.each<[string, ModelConfigInput]>([
    ['an empty config', {}],
    ['a minimal model', base],
    ['max_batch_size 0 without dynamic batching', { ...base, max_batch_size: 0 }],
    ['dynamic batching without max_batch_size (left to auto-complete)', { ...base, max_batch_size: undefined, dynamic_batching: { preferred_batch_size: [64] } }],
    ['preferred sizes up to max_batch_size', { ...base, dynamic_batching: { preferred_batch_size: [1, 8] } }],
    ['-1 and positive dims, empty dims', { ...base, input: [fp32('A', [-1, -1, 1]), fp32('B', [])] }],
    ['reshape to an empty shape', { ...base, input: [{ ...fp32('A', [1]), reshape: { shape: [] } }] }],
    ['the same name as input and output', { ...base, output: [fp32('IN', [1])] }],
    ['KIND_GPU with GPU 0', { ...base, instance_group: [{ kind: 'KIND_GPU', gpus: [0, 1], count: 2 }] }],
    ['KIND_CPU without gpus', { ...base, instance_group: [{ kind: 'KIND_CPU', gpus: [] }] }],
    ['priority levels with a default in range', { ...base, dynamic_batching: { priority_levels: 3, default_priority_level: 3 } }],
    [
      'an ensemble whose steps chain',
      {
        ...ensembleBase,
        ensemble_scheduling: {
          step: [
            { model_name: 'pre', model_version: -1, input_map: { IN: 'RAW' }, output_map: { OUT: 'mid' } },
            { model_name: 'cls', input_map: { A: 'mid', B: 'RAW' }, output_map: { OUT: 'FINAL', AUX: 'unused' } },
          ],
        },
      },
    ],
  ])('%s', (_what, config) => {
    expect(() => validateModelConfig(config)).not.toThrow();
  });
});

describe('validateModelConfig: semantic checks', () => {
  it.each<[string, ModelConfigInput, string[]]>([
    [
      'dims that are zero or below -1',
      { ...base, input: [fp32('A', [3, 0]), fp32('B', [-2])], output: [fp32('OUT', [-1, 1])] },
      [
        'input[0].dims[1]: must be a positive integer or -1 (got 0)',
        'input[1].dims[0]: must be a positive integer or -1 (got -2)',
      ],
    ],
    [
      'TYPE_INVALID tensors',
      { ...base, output: [{ name: 'OUT', data_type: 'TYPE_INVALID', dims: [1] }] },
      ['output[0].data_type: TYPE_INVALID is not a usable data type'],
    ],
    [
      'reshape shapes',
      { ...base, output: [{ ...fp32('OUT', [4]), reshape: { shape: [2, 0] } }] },
      ['output[0].reshape.shape[1]: must be a positive integer or -1 (got 0)'],
    ],
    [
      'dynamic batching with max_batch_size 0',
      { ...base, max_batch_size: 0, dynamic_batching: { preferred_batch_size: [4] } },
      ['dynamic_batching: not allowed when max_batch_size is 0 (batching disabled); set max_batch_size > 0'],
    ],
    [
      'a preferred batch size above max_batch_size',
      { ...base, dynamic_batching: { preferred_batch_size: [4, 16, 8] } },
      ['dynamic_batching.preferred_batch_size[1]: 16 exceeds max_batch_size 8'],
    ],
    [
      'a preferred batch size of zero',
      { ...base, dynamic_batching: { preferred_batch_size: [0] } },
      ['dynamic_batching.preferred_batch_size[0]: must be a positive integer (got 0)'],
    ],
    [
      'a default priority level out of range',
      { ...base, dynamic_batching: { priority_levels: 2, default_priority_level: 3 } },
      ['dynamic_batching.default_priority_level: must be in [1, 2] (priority_levels), got 3'],
    ],
    [
      'duplicate input and output names',
      { ...base, input: [fp32('A', [1]), fp32('B', [1]), fp32('A', [2])], output: [fp32('O', [1]), fp32('O', [1])] },
      ['input[2].name: duplicate input name "A" (also input[0])', 'output[1].name: duplicate output name "O" (also output[0])'],
    ],
    [
      'two scheduling choices',
      { ...base, dynamic_batching: {}, sequence_batching: {} },
      ['dynamic_batching, sequence_batching: only one scheduling choice may be set'],
    ],
    [
      'two version policies',
      { ...base, version_policy: { latest: { num_versions: 2 }, all: {} } },
      ['version_policy: only one of latest, all, specific may be set (got latest, all)'],
    ],
    [
      'an ensemble step reading a tensor nobody produces',
      {
        ...ensembleBase,
        ensemble_scheduling: {
          step: [{ model_name: 'cls', input_map: { IN: 'RAW', MASK: 'mask' }, output_map: { OUT: 'FINAL' } }],
        },
      },
      ['ensemble_scheduling.step[0].input_map["MASK"]: "mask" is neither an ensemble input nor an output of an earlier step'],
    ],
    [
      'ensemble steps out of data-flow order',
      {
        ...ensembleBase,
        ensemble_scheduling: {
          step: [
            { model_name: 'cls', input_map: { IN: 'mid' }, output_map: { OUT: 'FINAL' } },
            { model_name: 'pre', input_map: { IN: 'RAW' }, output_map: { OUT: 'mid' } },
          ],
        },
      },
      [
        'ensemble_scheduling.step[0].input_map["IN"]: "mid" is neither an ensemble input nor an output of an earlier step (it is produced by step[1], which must come first)',
      ],
    ],
    [
      'an ensemble output no step produces',
      {
        ...ensembleBase,
        output: [fp32('FINAL', [-1]), fp32('EXTRA', [-1])],
        ensemble_scheduling: { step: [{ model_name: 'cls', input_map: { IN: 'RAW' }, output_map: { OUT: 'FINAL' } }] },
      },
      ['output[1].name: ensemble output "EXTRA" is not produced by any step (no output_map value names it)'],
    ],
    [
      'two steps producing the same ensemble tensor',
      {
        ...ensembleBase,
        ensemble_scheduling: {
          step: [
            { model_name: 'a', input_map: { IN: 'RAW' }, output_map: { OUT: 'FINAL' } },
            { model_name: 'b', input_map: { IN: 'RAW' }, output_map: { Y: 'FINAL' } },
          ],
        },
      },
      ['ensemble_scheduling.step[1].output_map["Y"]: ensemble tensor "FINAL" is already produced by step[0]'],
    ],
    [
      'an ensemble without ensemble_scheduling',
      { ...ensembleBase },
      [
        'ensemble_scheduling: required when platform is "ensemble"',
        'output[0].name: ensemble output "FINAL" is not produced by any step (no output_map value names it)',
      ],
    ],
    [
      'ensemble_scheduling on a model that is not an ensemble',
      { ...base, platform: 'onnxruntime_onnx', ensemble_scheduling: { step: [] } },
      ['ensemble_scheduling: only allowed when platform is "ensemble" (platform is "onnxruntime_onnx")'],
    ],
    [
      'a KIND_GPU group with a negative GPU id',
      { ...base, instance_group: [{ kind: 'KIND_CPU' }, { kind: 'KIND_GPU', gpus: [0, -1] }] },
      ['instance_group[1].gpus[1]: must be a non-negative GPU id (got -1)'],
    ],
    [
      'a KIND_CPU group listing GPUs',
      { ...base, instance_group: [{ kind: 'KIND_CPU', gpus: [0] }] },
      ['instance_group[0].gpus: not allowed for KIND_CPU'],
    ],
  ])('%s', (_what, config, expected) => {
    const parsed = modelConfigSchema.parse(config);
    expect(checkModelConfig(parsed)).toEqual(expected);
    const err = thrown(() => validateModelConfig(config));
    expect(err.code).toBe('INVALID_ARG');
    for (const problem of expected) expect(err.message).toContain(problem);
  });

  it('reports one problem on one line, naming the model', () => {
    const err = thrown(() => validateModelConfig({ ...base, input: [fp32('A', [1, 0])] }));
    expect(err.message).toBe('invalid model config "m": input[0].dims[1]: must be a positive integer or -1 (got 0)');
  });

  it('lists every problem', () => {
    const err = thrown(() =>
      validateModelConfig({
        ...base,
        input: [fp32('A', [0]), fp32('A', [1])],
        dynamic_batching: { preferred_batch_size: [9] },
      }),
    );
    expect(err.message).toBe(
      [
        'invalid model config "m" (3 problems):',
        '  - input[0].dims[0]: must be a positive integer or -1 (got 0)',
        '  - input[1].name: duplicate input name "A" (also input[0])',
        '  - dynamic_batching.preferred_batch_size[0]: 9 exceeds max_batch_size 8',
      ].join('\n'),
    );
  });
});

describe('validateModelConfig: value types', () => {
  it.each<[string, unknown, string]>([
    ['a non-object', 'config', 'invalid model config: expected object, got string "config"'],
    ['an unknown data type', { input: [{ name: 'a', data_type: 'FP32' }] }, 'invalid model config: input[0].data_type: unknown value "FP32"; expected one of TYPE_INVALID, TYPE_BOOL, TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, TYPE_UINT64, TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_FP32, TYPE_FP64, TYPE_STRING, TYPE_BF16'],
    ['a missing input name', { name: 'x', input: [{ data_type: 'TYPE_FP32' }] }, 'invalid model config "x": input[0].name: required'],
    ['a non-numeric max_batch_size', { max_batch_size: 'eight' }, 'invalid model config: max_batch_size: expected an integer (int32), got string "eight"'],
    ['a fractional dim', { input: [{ name: 'a', data_type: 'TYPE_FP32', dims: [1.5] }] }, 'invalid model config: input[0].dims[0]: expected an integer (int64), got number 1.5'],
    ['a boolean dim', { input: [{ name: 'a', data_type: 'TYPE_FP32', dims: [true] }] }, 'invalid model config: input[0].dims[0]: expected an integer (int64), got boolean true'],
    ['a negative unsigned value', { dynamic_batching: { max_queue_delay_microseconds: -1 } }, 'invalid model config: dynamic_batching.max_queue_delay_microseconds: must not be negative (uint64), got -1'],
    ['an int32 out of range', { max_batch_size: 2 ** 31 }, 'invalid model config: max_batch_size: 2147483648 is out of range for int32'],
    ['a non-string map value', { parameters: { k: { string_value: 1 } } }, 'invalid model config: parameters["k"].string_value: expected string, got number 1'],
    ['a bad instance kind', { instance_group: [{ kind: 'GPU' }] }, 'invalid model config: instance_group[0].kind: unknown value "GPU"; expected one of KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL'],
    ['input not a list', { input: { name: 'a' } }, 'invalid model config: input: expected array, got an object'],
    ['a non-numeric priority key', { dynamic_batching: { priority_queue_policy: { high: {} } } }, 'invalid model config: dynamic_batching.priority_queue_policy["high"]: priority level keys must be non-negative integers'],
  ])('%s', (_what, config, message) => {
    const err = thrown(() => validateModelConfig(config));
    expect(err.code).toBe('INVALID_ARG');
    expect(err.message).toBe(message);
  });
});

describe('integers given as strings', () => {
  it('normalises int64 (and other integer) strings to numbers', () => {
    const config = validateModelConfig({
      name: 'm',
      max_batch_size: '8',
      input: [{ name: 'a', data_type: 'TYPE_FP32', dims: ['-1', ' 3 '] }],
      dynamic_batching: { max_queue_delay_microseconds: '100', preferred_batch_size: ['4'] },
      sequence_batching: undefined,
      ensemble_scheduling: undefined,
      instance_group: [{ gpus: ['0'], count: '2' }],
    });
    expect(config.max_batch_size).toBe(8);
    expect(config.input?.[0]?.dims).toEqual([-1, 3]);
    expect(config.dynamic_batching).toEqual({ max_queue_delay_microseconds: 100, preferred_batch_size: [4] });
    expect(config.instance_group).toEqual([{ gpus: [0], count: 2 }]);
  });

  it('still runs the semantic checks on the numbers', () => {
    const err = thrown(() => validateModelConfig({ ...base, dynamic_batching: { preferred_batch_size: ['16'] } }));
    expect(err.message).toBe(
      'invalid model config "m": dynamic_batching.preferred_batch_size[0]: 16 exceeds max_batch_size 8',
    );
  });

  it('rejects strings that are not integers', () => {
    expect(thrown(() => validateModelConfig({ max_batch_size: '1.5' })).message).toBe(
      'invalid model config: max_batch_size: expected an integer (int32), got string "1.5"',
    );
    expect(thrown(() => validateModelConfig({ input: [{ name: 'a', data_type: 'TYPE_FP32', dims: [''] }] })).message).toBe(
      'invalid model config: input[0].dims[0]: expected an integer (int64), got string ""',
    );
  });
});

describe('unknown fields are kept', () => {
  it('at the top level and inside messages, through validation and text', () => {
    const input = {
      ...base,
      future_top: { nested: [1, 2] },
      input: [{ ...fp32('IN', [1]), future_flag: true }],
      dynamic_batching: { future_knob: 'x' },
    };
    const config = validateModelConfig(input);
    expect(config['future_top']).toEqual({ nested: [1, 2] });
    expect(config.input?.[0]?.['future_flag']).toBe(true);
    expect(config.dynamic_batching?.['future_knob']).toBe('x');
    expect(parseModelConfig(formatModelConfig(config))).toEqual(config);
  });
});

describe('parseModelConfigJson (what Triton returns)', () => {
  // The shape Triton's config API prints for an identity model: every field filled in.
  const tritonJson = {
    name: 'identity_fp32',
    platform: '',
    backend: 'identity',
    runtime: '',
    version_policy: { latest: { num_versions: 1 } },
    max_batch_size: 8,
    input: [
      {
        name: 'INPUT0',
        data_type: 'TYPE_FP32',
        format: 'FORMAT_NONE',
        dims: [-1],
        is_shape_tensor: false,
        allow_ragged_batch: false,
        optional: false,
        is_non_linear_format_io: false,
      },
    ],
    output: [
      {
        name: 'OUTPUT0',
        data_type: 'TYPE_FP32',
        dims: [-1],
        label_filename: '',
        is_shape_tensor: false,
        is_non_linear_format_io: false,
      },
    ],
    batch_input: [],
    batch_output: [],
    optimization: {
      priority: 'PRIORITY_DEFAULT',
      input_pinned_memory: { enable: true },
      output_pinned_memory: { enable: true },
      gather_kernel_buffer_threshold: 0,
      eager_batching: false,
    },
    dynamic_batching: {
      preferred_batch_size: [8],
      max_queue_delay_microseconds: 0,
      preserve_ordering: false,
      priority_levels: 0,
      default_priority_level: 0,
      priority_queue_policy: {},
    },
    instance_group: [
      {
        name: 'identity_fp32_0',
        kind: 'KIND_CPU',
        count: 1,
        gpus: [],
        secondary_devices: [],
        profile: [],
        passive: false,
        host_policy: '',
      },
    ],
    default_model_filename: '',
    cc_model_filenames: {},
    metric_tags: {},
    parameters: {},
    model_warmup: [],
  };

  it('accepts the full JSON unchanged', () => {
    expect(parseModelConfigJson(tritonJson)).toEqual(tritonJson);
  });

  it('passes validateModelConfig too, so it can be sent back as a load override', () => {
    expect(validateModelConfig(tritonJson)).toEqual(tritonJson);
  });

  it('accepts it as a JSON string', () => {
    expect(parseModelConfigJson(JSON.stringify(tritonJson))).toEqual(tritonJson);
  });

  it('turns int64 strings into numbers and enum numbers into names, drops nulls', () => {
    const config = parseModelConfigJson({
      name: 'x',
      max_batch_size: 4,
      input: [{ name: 'a', data_type: 11, format: 2, dims: ['-1', '3'] }],
      dynamic_batching: { max_queue_delay_microseconds: '1000', priority_queue_policy: { '1': { timeout_action: 1, default_timeout_microseconds: '5' } } },
      instance_group: [{ kind: 2, count: 1, secondary_devices: [{ kind: 0, device_id: '3' }] }],
      model_metrics: { metric_control: [{ histogram_options: { buckets: ['-Infinity', 1, 'NaN'] } }] },
      ensemble_scheduling: null,
    });
    expect(config).toEqual({
      name: 'x',
      max_batch_size: 4,
      input: [{ name: 'a', data_type: 'TYPE_FP32', format: 'FORMAT_NCHW', dims: [-1, 3] }],
      dynamic_batching: {
        max_queue_delay_microseconds: 1000,
        priority_queue_policy: { '1': { timeout_action: 'DELAY', default_timeout_microseconds: 5 } },
      },
      instance_group: [{ kind: 'KIND_CPU', count: 1, secondary_devices: [{ kind: 'KIND_NVDLA', device_id: 3 }] }],
      model_metrics: { metric_control: [{ histogram_options: { buckets: [-Infinity, 1, Number.NaN] } }] },
    });
  });

  it('keeps fields it does not know and runs no semantic checks', () => {
    const config = parseModelConfigJson({
      name: 'x',
      max_batch_size: 0,
      dynamic_batching: { preferred_batch_size: [4] },
      input: [fp32('a', [0]), fp32('a', [1])],
      brand_new_field: { a: 1 },
    });
    expect(config['brand_new_field']).toEqual({ a: 1 });
    expect(config.input).toHaveLength(2);
  });

  it('throws INVALID_ARG, naming the path, for values of the wrong type', () => {
    expect(thrown(() => parseModelConfigJson({ input: 'nope' })).message).toBe(
      'model config JSON: input: expected array, got string "nope"',
    );
    expect(thrown(() => parseModelConfigJson('{not json')).message).toMatch(/^model config JSON: /);
    expect(thrown(() => parseModelConfigJson(null)).code).toBe('INVALID_ARG');
  });
});

describe('the text-format field table matches the zod schema', () => {
  /** Follows optional/pipe wrappers to the schema that holds the shape. */
  function unwrap(schema: z.core.$ZodType): z.core.$ZodType {
    let s = schema;
    for (;;) {
      if (s instanceof z.ZodOptional) s = s.unwrap() as z.core.$ZodType;
      else if (s instanceof z.ZodPipe) s = s.in as z.core.$ZodType;
      else return s;
    }
  }

  function compare(message: PbMessage, schema: z.core.$ZodType, where: string, out: string[]): void {
    const obj = unwrap(schema);
    if (!(obj instanceof z.ZodObject)) {
      out.push(`${where}: schema is not an object`);
      return;
    }
    const shape = obj.shape as Record<string, z.core.$ZodType>;
    const tableKeys = Object.keys(message.fields).sort();
    const schemaKeys = Object.keys(shape).sort();
    if (JSON.stringify(tableKeys) !== JSON.stringify(schemaKeys)) {
      out.push(`${where}: table ${tableKeys.join(',')} vs schema ${schemaKeys.join(',')}`);
      return;
    }
    for (const [name, field] of Object.entries(message.fields)) {
      const sub = unwrap(shape[name] as z.core.$ZodType);
      check(field, sub, `${where}.${name}`, out);
    }
  }

  function check(field: PbField, schema: z.core.$ZodType, where: string, out: string[]): void {
    if (field.kind === 'map') {
      if (!(schema instanceof z.ZodRecord)) {
        out.push(`${where}: map in table, not a record in schema`);
        return;
      }
      check(field.value, unwrap(schema.valueType as z.core.$ZodType), `${where}{}`, out);
      return;
    }
    if (field.repeated === true) {
      if (!(schema instanceof z.ZodArray)) {
        out.push(`${where}: repeated in table, not an array in schema`);
        return;
      }
      check({ ...field, repeated: false }, unwrap(schema.element as z.core.$ZodType), `${where}[]`, out);
      return;
    }
    if (field.kind === 'message') {
      compare(field.message, schema, where, out);
    } else if (field.kind === 'enum') {
      if (!(schema instanceof z.ZodEnum)) out.push(`${where}: enum in table, not in schema`);
      else if (JSON.stringify(schema.options) !== JSON.stringify(field.values)) out.push(`${where}: enum values differ`);
    } else if (field.type === 'string' || field.type === 'bytes') {
      if (!(schema instanceof z.ZodString)) out.push(`${where}: string in table, not in schema`);
    } else if (field.type === 'bool') {
      if (!(schema instanceof z.ZodBoolean)) out.push(`${where}: bool in table, not in schema`);
    } else if (field.type === 'float' || field.type === 'double') {
      if (!(schema instanceof z.ZodCustom)) out.push(`${where}: float in table, not a number in schema`);
    } else if (!(schema instanceof z.ZodUnion)) {
      out.push(`${where}: integer in table, not an integer in schema`);
    }
  }

  it('field for field', () => {
    const problems: string[] = [];
    compare(MODEL_CONFIG_MESSAGE, modelConfigSchema, 'ModelConfig', problems);
    expect(problems).toEqual([]);
  });
});

// ---------------------------------------------------------------------------

describe('writeModelRepository', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'model-repo-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function tree(root: string): Promise<string[]> {
    const entries = await readdir(root, { recursive: true, withFileTypes: true });
    return entries
      .map((e) => `${path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join('/')}${e.isDirectory() ? '/' : ''}`)
      .sort();
  }

  it('writes configs and files that parse back', async () => {
    const weights = new Uint8Array([0, 1, 2, 255]);
    await writeModelRepository(dir, {
      text_processor: {
        config: {
          backend: 'python',
          max_batch_size: 16,
          input: [{ name: 'TEXT', data_type: 'TYPE_STRING', dims: ['1'] }],
          output: [{ name: 'PROCESSED_TEXT', data_type: 'TYPE_STRING', dims: [1] }],
          dynamic_batching: {},
        },
        files: { '1/model.py': 'import triton_python_backend_utils as pb_utils\n' },
      },
      classifier: {
        config: { name: 'classifier', platform: 'onnxruntime_onnx', max_batch_size: 0, input: [fp32('x', [4])], output: [fp32('y', [2])] },
        files: { '3/model.onnx': weights, 'labels.txt': 'cat\ndog\n', './3/extra/../notes.txt': 'n' },
      },
      bare: { config: { backend: 'identity' } },
    });

    expect(await tree(dir)).toEqual([
      'bare/',
      'bare/1/',
      'bare/config.pbtxt',
      'classifier/',
      'classifier/3/',
      'classifier/3/model.onnx',
      'classifier/3/notes.txt',
      'classifier/config.pbtxt',
      'classifier/labels.txt',
      'text_processor/',
      'text_processor/1/',
      'text_processor/1/model.py',
      'text_processor/config.pbtxt',
    ]);

    const text = parseModelConfig(await readFile(path.join(dir, 'text_processor', 'config.pbtxt'), 'utf8'));
    expect(text).toEqual({
      name: 'text_processor',
      backend: 'python',
      max_batch_size: 16,
      input: [{ name: 'TEXT', data_type: 'TYPE_STRING', dims: [1] }],
      output: [{ name: 'PROCESSED_TEXT', data_type: 'TYPE_STRING', dims: [1] }],
      dynamic_batching: {},
    });
    expect(parseModelConfig(await readFile(path.join(dir, 'bare', 'config.pbtxt'), 'utf8'))).toEqual({
      name: 'bare',
      backend: 'identity',
    });
    expect(parseModelConfig(await readFile(path.join(dir, 'classifier', 'config.pbtxt'), 'utf8')).platform).toBe(
      'onnxruntime_onnx',
    );
    expect(new Uint8Array(await readFile(path.join(dir, 'classifier', '3', 'model.onnx')))).toEqual(weights);
    expect(await readFile(path.join(dir, 'text_processor', '1', 'model.py'), 'utf8')).toBe(
      'import triton_python_backend_utils as pb_utils\n',
    );
    expect(await readFile(path.join(dir, 'classifier', 'labels.txt'), 'utf8')).toBe('cat\ndog\n');
  });

  it('writes a fixture config that reads back equal', async () => {
    const resnet = fixture('resnet50_pytorch.pbtxt');
    await writeModelRepository(dir, { resnet50_pytorch: { config: resnet } });
    const back = parseModelConfig(await readFile(path.join(dir, 'resnet50_pytorch', 'config.pbtxt'), 'utf8'));
    expect(back).toEqual(resnet);
  });

  it.each<[string, Record<string, { config: ModelConfigInput; files?: Record<string, string> }>, string]>([
    ['a name that differs from the key', { a: { config: { name: 'b' } } }, 'model "a": config name "b" does not match the repository entry "a"'],
    ['an absolute path', { a: { config: {}, files: { '/etc/passwd': 'x' } } }, 'model "a": file "/etc/passwd": path must be relative to the model directory'],
    ['a Windows absolute path', { a: { config: {}, files: { 'C:\\x\\model.py': 'x' } } }, 'model "a": file "C:\\\\x\\\\model.py": path must be relative to the model directory'],
    ['a .. escape', { a: { config: {}, files: { '1/../../b/model.py': 'x' } } }, 'model "a": file "1/../../b/model.py": path escapes the model directory'],
    ['a leading ..', { a: { config: {}, files: { '../x': 'x' } } }, 'model "a": file "../x": path escapes the model directory'],
    ['a path naming no file', { a: { config: {}, files: { './': 'x' } } }, 'model "a": file "./": path names no file'],
    ['config.pbtxt as a file', { a: { config: {}, files: { '1/../config.pbtxt': 'x' } } }, 'model "a": file "1/../config.pbtxt": config.pbtxt is written from `config`; do not pass it as a file'],
    ['a model name with a slash', { 'a/b': { config: {} } }, 'model name "a/b" cannot be used as a directory name'],
    ['a model name of ..', { '..': { config: {} } }, 'model name ".." cannot be used as a directory name'],
    ['an invalid config', { a: { config: { max_batch_size: 0, dynamic_batching: {} } } }, 'invalid model config "a": dynamic_batching: not allowed when max_batch_size is 0 (batching disabled); set max_batch_size > 0'],
  ])('rejects %s with INVALID_ARG and writes nothing', async (_what, models, message) => {
    const err = await rejection(writeModelRepository(dir, { ok: { config: { backend: 'identity' } }, ...models }));
    expect(err.code).toBe('INVALID_ARG');
    expect(err.message).toBe(message);
    expect(await readdir(dir)).toEqual([]);
  });
});
