// The framework backends' parameters: written, read back and checked as the
// ONNX Runtime and PyTorch backends parse them. Loading real models with them
// is test/framework-backends.test.ts.
import { describe, expect, it } from 'vitest';
import { abortingParameterProblems } from '../lib/backend-parameters.js';
import {
  TritonError,
  formatModelConfig,
  onnxRuntimeParameters,
  parseModelConfig,
  pytorchParameters,
  readOnnxRuntimeParameters,
  readPyTorchParameters,
  validateModelConfig,
} from '../lib/index.js';

function invalid(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(TritonError);
    expect((error as TritonError).code).toBe('INVALID_ARG');
    return (error as Error).message;
  }
  throw new Error('expected INVALID_ARG');
}

describe('onnxRuntimeParameters', () => {
  it('writes the keys and strings the backend reads', () => {
    expect(
      onnxRuntimeParameters({
        intraOpThreadCount: 2,
        interOpThreadCount: 0,
        executionMode: 'parallel',
        enableMemArena: false,
        enableMemPattern: true,
        memoryArenaShrinkage: 'cpu:0',
        useDeviceAllocatorForInitializers: true,
      }),
    ).toEqual({
      intra_op_thread_count: { string_value: '2' },
      inter_op_thread_count: { string_value: '0' },
      execution_mode: { string_value: '1' },
      enable_mem_arena: { string_value: 'false' },
      enable_mem_pattern: { string_value: 'true' },
      'memory.enable_memory_arena_shrinkage': { string_value: 'cpu:0' },
      'session.use_device_allocator_for_initializers': { string_value: 'true' },
    });
    expect(onnxRuntimeParameters({ executionMode: 'sequential' })).toEqual({ execution_mode: { string_value: '0' } });
    expect(onnxRuntimeParameters({})).toEqual({});
  });

  it('refuses unknown fields and values the backend cannot take', () => {
    expect(invalid(() => onnxRuntimeParameters({ intraOpThreads: 2 } as never))).toMatch(
      /^onnxRuntimeParameters: .*intraOpThreads/,
    );
    expect(invalid(() => onnxRuntimeParameters({ intraOpThreadCount: -1 }))).toMatch(/intraOpThreadCount: /);
    expect(invalid(() => onnxRuntimeParameters({ intraOpThreadCount: 1.5 }))).toMatch(/intraOpThreadCount: /);
    expect(invalid(() => onnxRuntimeParameters({ interOpThreadCount: 2 ** 31 }))).toMatch(/interOpThreadCount: /);
    expect(invalid(() => onnxRuntimeParameters({ executionMode: 'fast' as never }))).toMatch(/executionMode: /);
  });

  it('reads back what it wrote, through config.pbtxt', () => {
    const values = { intraOpThreadCount: 3, executionMode: 'parallel', enableMemArena: false } as const;
    const text = formatModelConfig({ backend: 'onnxruntime', parameters: onnxRuntimeParameters(values) });
    expect(readOnnxRuntimeParameters(parseModelConfig(text))).toEqual(values);
  });
});

describe('pytorchParameters', () => {
  it('writes the keys and strings the backend reads, and reads them back', () => {
    const values = {
      disableOptimizedExecution: true,
      inferenceMode: false,
      disableCudnn: true,
      enableWeightSharing: true,
      enableCacheCleaning: false,
      interOpThreadCount: 1,
      intraOpThreadCount: 4,
      enableJitExecutor: false,
      enableJitProfiling: false,
      enableTensorFuser: true,
    };
    const parameters = pytorchParameters(values);
    expect(parameters).toEqual({
      DISABLE_OPTIMIZED_EXECUTION: { string_value: 'true' },
      INFERENCE_MODE: { string_value: 'false' },
      DISABLE_CUDNN: { string_value: 'true' },
      ENABLE_WEIGHT_SHARING: { string_value: 'true' },
      ENABLE_CACHE_CLEANING: { string_value: 'false' },
      INTER_OP_THREAD_COUNT: { string_value: '1' },
      INTRA_OP_THREAD_COUNT: { string_value: '4' },
      ENABLE_JIT_EXECUTOR: { string_value: 'false' },
      ENABLE_JIT_PROFILING: { string_value: 'false' },
      ENABLE_TENSOR_FUSER: { string_value: 'true' },
    });
    expect(readPyTorchParameters({ parameters })).toEqual(values);
    expect(invalid(() => pytorchParameters({ inferenceMode: 'yes' as never }))).toMatch(/^pytorchParameters: inferenceMode: /);
  });

  it('reads the spellings the backend accepts', () => {
    const parameters = {
      INFERENCE_MODE: { string_value: 'ON' },
      DISABLE_CUDNN: { string_value: 'Off' },
      ENABLE_JIT_EXECUTOR: { string_value: '0' },
      INTRA_OP_THREAD_COUNT: { string_value: '12' },
      ENABLE_JIT_PROFILING: { string_value: 'maybe' },
      SOMETHING_ELSE: { string_value: 'kept out' },
    };
    expect(readPyTorchParameters({ parameters })).toEqual({
      inferenceMode: true,
      disableCudnn: false,
      enableJitExecutor: false,
      intraOpThreadCount: 12,
    });
  });
});

describe('validateModelConfig on framework backends', () => {
  it('reports every bad value of a known key, by backend or platform name', () => {
    const parameters = {
      intra_op_thread_count: { string_value: 'two' },
      inter_op_thread_count: { string_value: '99999999999' },
      execution_mode: { string_value: '2' },
      enable_mem_arena: { string_value: 'yes' },
      custom_key: { string_value: 'anything' },
    };
    for (const where of [{ backend: 'onnxruntime' }, { platform: 'onnxruntime_onnx' }]) {
      const message = invalid(() => validateModelConfig({ name: 'm', ...where, parameters }));
      expect(message).toContain('parameters["intra_op_thread_count"]: must be an integer from 0 to 2147483647 (got "two")');
      expect(message).toContain('parameters["inter_op_thread_count"]: must be an integer from 0 to 2147483647 (got "99999999999")');
      expect(message).toContain('parameters["execution_mode"]: must be 0 (sequential) or 1 (parallel) (got "2")');
      expect(message).toContain('parameters["enable_mem_arena"]: must be true, false, on, off, 1 or 0 (got "yes")');
      expect(message).not.toContain('custom_key');
    }
    const message = invalid(() =>
      validateModelConfig({ name: 'm', platform: 'pytorch_libtorch', parameters: { INFERENCE_MODE: { string_value: 'y' } } }),
    );
    expect(message).toContain('parameters["INFERENCE_MODE"]: must be true, false, on, off, 1 or 0 (got "y")');
  });

  it("checks ONNX Runtime's graph optimization level, and nothing for other backends", () => {
    expect(invalid(() => validateModelConfig({ name: 'm', backend: 'onnxruntime', optimization: { graph: { level: 3 } } }))).toContain(
      'optimization.graph.level: must be -1 (basic), 1 (extended), 2 (none) or 0 (all, the default) for ONNX Runtime (got 3)',
    );
    for (const level of [-1, 0, 1, 2]) {
      expect(validateModelConfig({ name: 'm', backend: 'onnxruntime', optimization: { graph: { level } } }).name).toBe('m');
    }
    const other = { name: 'm', backend: 'python', parameters: { INFERENCE_MODE: { string_value: 'y' } }, optimization: { graph: { level: 3 } } };
    expect(validateModelConfig(other).parameters).toEqual(other.parameters);
    // An explicit backend wins over a platform name.
    const mixed = { name: 'm', backend: 'python', platform: 'pytorch_libtorch', parameters: { INFERENCE_MODE: { string_value: 'y' } } };
    expect(validateModelConfig(mixed).backend).toBe('python');
  });
});

describe('abortingParameterProblems', () => {
  it("names the integer values std::stoi throws out_of_range for, and only those", () => {
    const check = (key: string, text: string, backend = 'onnxruntime'): string[] =>
      abortingParameterProblems({ backend, parameters: { [key]: { string_value: text } } });
    expect(check('intra_op_thread_count', '99999999999')).toEqual([
      'parameters["intra_op_thread_count"]: "99999999999" is out of the backend\'s 32-bit range',
    ]);
    expect(check('execution_mode', ' +4294967296x')).toHaveLength(1);
    expect(check('INTER_OP_THREAD_COUNT', '-2147483649', 'pytorch')).toHaveLength(1);
    // In range, or not a number at all (std::invalid_argument, which the backends catch): Triton reports those.
    for (const text of ['2147483647', '-2147483648', '12abc', 'abc', '', ' 7']) expect(check('inter_op_thread_count', text)).toEqual([]);
    // Not an integer key, or not these backends.
    expect(check('enable_mem_arena', '99999999999')).toEqual([]);
    expect(check('intra_op_thread_count', '99999999999', 'python')).toEqual([]);
  });
});
