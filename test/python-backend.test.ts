/**
 * Python models run their own model.py (in the test core's embedded CPython
 * and in real Triton's python backend alike): models written here are loaded
 * from memory, plus the add_sub_chain ensemble of test/models.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Server, type ModelConfigInput } from '../lib/index.js';
import { MODELS, REPO_ROOT, rejection, startServer } from './helpers.js';

const run = promisify(execFile);

let server: Server;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
});

type Tensor = { name: string; data_type: string; dims: number[] };
const fp32 = (name: string, dims: number[] = [-1]): Tensor => ({ name, data_type: 'TYPE_FP32', dims });
const int32 = (name: string, dims: number[] = [1]): Tensor => ({ name, data_type: 'TYPE_INT32', dims });

function pythonConfig(name: string, input: Tensor[], output: Tensor[], extra: Record<string, unknown> = {}): ModelConfigInput {
  return {
    name,
    backend: 'python',
    max_batch_size: 0,
    input,
    output,
    instance_group: [{ kind: 'KIND_CPU', count: 1 }],
    ...extra,
  } as ModelConfigInput;
}

function loadPython(name: string, source: string, input: Tensor[], output: Tensor[], extra: Record<string, unknown> = {}) {
  return server.loadModel(name, { config: pythonConfig(name, input, output, extra), files: { '1/model.py': source } });
}

const decoder = new TextDecoder();

/**
 * A decoupled model whose request's COUNT gives how many responses it sends,
 * the i-th made by `response` (Python, over i, count and out(value), an
 * INT32 tensor OUT), then the FINAL flag.
 */
function loadCountingStream(name: string, response: string) {
  const source = `
import numpy as np
import triton_python_backend_utils as pb_utils

def out(value):
    return pb_utils.Tensor("OUT", np.array([value], dtype=np.int32))

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            for i in range(count):
                sender.send(${response})
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`;
  return loadPython(name, source, [int32('COUNT')], [int32('OUT')], { model_transaction_policy: { decoupled: true } });
}


describe('a model.py loaded from memory', () => {
  it('gets the documented initialize() args and request fields, and computes with numpy', async () => {
    const source = `
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.args = dict(args)
        pb_utils.Logger.log_info("py_args initialized")

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            info = {
                "args": {k: v for k, v in self.args.items() if k != "model_config" and k != "model_repository"},
                "config_name": json.loads(self.args["model_config"])["name"],
                "repository": self.args["model_repository"],
                "request_id": request.request_id(),
                "parameters": json.loads(request.parameters()),
                "requested": sorted(request.requested_output_names()),
                "input_names": [t.name() for t in request.inputs()],
                "correlation_id": request.correlation_id(),
            }
            y = pb_utils.Tensor("Y", (x * 3).astype(np.float32))
            text = pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[y, text]))
        return responses
`;
    const model = await loadPython('py_args', source, [fp32('X')], [fp32('Y'), { name: 'INFO', data_type: 'TYPE_STRING', dims: [1] }]);
    const response = await model.infer({
      id: 'req-7',
      inputs: { X: new Float32Array([1, 2.5, -4]) },
      parameters: { alpha: 'a', n: 3, on: true },
    });
    expect(Array.from(response.outputs.Y!.data as Float32Array)).toEqual([3, 7.5, -12]);
    const info = JSON.parse(decoder.decode((response.outputs.INFO!.data as Uint8Array[])[0]));
    expect(info.args).toEqual({
      model_instance_kind: 'CPU',
      model_instance_name: 'py_args_0_0',
      model_instance_device_id: '0',
      model_version: '1',
      model_name: 'py_args',
    });
    expect(info.config_name).toBe('py_args');
    expect(typeof info.repository).toBe('string');
    expect(info.repository.length).toBeGreaterThan(0);
    expect(info.request_id).toBe('req-7');
    expect(info.parameters).toEqual({ alpha: 'a', n: 3, on: true });
    expect(info.requested).toEqual(['INFO', 'Y']);
    expect(info.input_names).toEqual(['X']);
    expect(info.correlation_id).toBe(0);
    const withSequence = await model.infer({ inputs: { X: new Float32Array([1]) }, sequence: { id: 42 } });
    expect(JSON.parse(decoder.decode((withSequence.outputs.INFO!.data as Uint8Array[])[0])).correlation_id).toBe(42);
    const withStringSequence = await model.infer({ inputs: { X: new Float32Array([1]) }, sequence: { id: 'session-9' } });
    expect(JSON.parse(decoder.decode((withStringSequence.outputs.INFO!.data as Uint8Array[])[0])).correlation_id).toBe('session-9');
    // Long, non-ASCII ids, request after request: each request context reads
    // them anew (first measured, then in one call), and they arrive whole.
    for (let round = 0; round < 3; round++) {
      const id = `${'ü'.repeat(40)}-${round}`;
      const sequence = `${'é'.repeat(63)}${round}`;
      const long = await model.infer({ id, inputs: { X: new Float32Array([1]) }, sequence: { id: sequence } });
      const echoed = JSON.parse(decoder.decode((long.outputs.INFO!.data as Uint8Array[])[0]));
      expect(echoed.request_id).toBe(id);
      expect(echoed.correlation_id).toBe(sequence);
    }
    await server.unloadModel('py_args');
  });

  it('gives the client the message of an exception raised in execute()', async () => {
    const source = `
class TritonPythonModel:
    def execute(self, requests):
        raise ValueError("bad value 42")
`;
    const model = await loadPython('py_raise', source, [fp32('X')], [fp32('Y')]);
    const error = await rejection(model.infer({ inputs: { X: new Float32Array([1]) } }));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toContain("Failed to process the request(s) for model 'py_raise_0_0', message: ");
    expect(error.message).toContain('ValueError: bad value 42');
    // The model stays loaded and usable.
    expect(await model.ready()).toBe(true);
    await server.unloadModel('py_raise');
  });

  it('answers each request of a batch with its own response or error (code and message)', async () => {
    const source = `
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0] < 0:
                error = pb_utils.TritonError("negative input", pb_utils.TritonError.UNAVAILABLE)
                responses.append(pb_utils.InferenceResponse(error=error))
            else:
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x + 1)]))
        return responses
`;
    const model = await loadPython('py_errors', source, [fp32('X')], [fp32('Y')]);
    const ok = await model.infer({ inputs: { X: new Float32Array([1, 2]) } });
    expect(Array.from(ok.outputs.Y!.data as Float32Array)).toEqual([2, 3]);
    const error = await rejection(model.infer({ inputs: { X: new Float32Array([-1]) } }));
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toContain('negative input');
    await server.unloadModel('py_errors');
  });

  it('a decoupled model sends N responses through its response sender, then FINAL', async () => {
    const model = await loadCountingStream('py_stream', 'pb_utils.InferenceResponse(output_tensors=[out(i * 10)])');
    expect((await model.transactionProperties()).decoupled).toBe(true);
    const values: number[] = [];
    for await (const response of model.stream({ inputs: { COUNT: new Int32Array([5]) } })) {
      values.push((response.outputs.OUT!.data as Int32Array)[0]!);
    }
    expect(values).toEqual([0, 10, 20, 30, 40]);
    const none: number[] = [];
    for await (const response of model.stream({ inputs: { COUNT: new Int32Array([0]) } })) {
      none.push((response.outputs.OUT!.data as Int32Array)[0]!);
    }
    expect(none).toEqual([]);
    await server.unloadModel('py_stream');
  });

  it('response parameters (str, int, bool) reach each response, a stream’s changing from one response to the next', async () => {
    const parameters = '{"kind": "token", "text": "token %d é" % i, "index": i - 1, "last": i == count - 1}';
    const model = await loadCountingStream('py_parameters', `pb_utils.InferenceResponse(output_tensors=[out(i)], parameters=${parameters})`);
    try {
      for (const count of [1, 200]) {
        const seen: Array<Record<string, unknown>> = [];
        for await (const response of model.stream({ inputs: { COUNT: new Int32Array([count]) } })) {
          expect((response.outputs.OUT!.data as Int32Array)[0]).toBe(seen.length);
          seen.push(response.parameters);
        }
        expect(seen).toEqual(
          Array.from({ length: count }, (_, i) => ({ kind: 'token', text: `token ${i} é`, index: i - 1, last: i === count - 1 })),
        );
      }
    } finally {
      await server.unloadModel('py_parameters');
    }
  });

  it('a decoupled model may answer from its own thread after execute() returned', async () => {
    const source = `
import threading
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.threads = []

    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            thread = threading.Thread(target=self.answer, args=(request.get_response_sender(), count))
            thread.start()
            self.threads.append(thread)
        return None

    def answer(self, sender, count):
        for i in range(count):
            out = pb_utils.Tensor("OUT", np.array([i + 100], dtype=np.int32))
            sender.send(pb_utils.InferenceResponse(output_tensors=[out]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self):
        for thread in self.threads:
            thread.join()
`;
    const model = await loadPython('py_threaded', source, [int32('COUNT')], [int32('OUT')], {
      model_transaction_policy: { decoupled: true },
    });
    const streams = [3, 1, 4].map(async (count) => {
      const values: number[] = [];
      for await (const response of model.stream({ inputs: { COUNT: new Int32Array([count]) } })) {
        values.push((response.outputs.OUT!.data as Int32Array)[0]!);
      }
      return values;
    });
    expect(await Promise.all(streams)).toEqual([[100, 101, 102], [100], [100, 101, 102, 103]]);
    await server.unloadModel('py_threaded');
  });

  it('request.is_cancelled() turns true when the client cancels', async () => {
    // MODE 0: send "started", then wait (up to 20 s) for the cancellation and
    // count it. MODE 1: report how many cancellations the model saw.
    const source = `
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.cancellations = 0

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            if mode == 1:
                out = pb_utils.Tensor("OUT", np.array([self.cancellations], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse([out]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([-1], dtype=np.int32))]))
            deadline = time.monotonic() + 20
            while not request.is_cancelled() and time.monotonic() < deadline:
                time.sleep(0.005)
            if request.is_cancelled():
                self.cancellations += 1
                error = pb_utils.TritonError("cancelled", pb_utils.TritonError.CANCELLED)
                sender.send(pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
`;
    const model = await loadPython('py_cancel', source, [int32('MODE')], [int32('OUT')], {
      model_transaction_policy: { decoupled: true },
    });
    const controller = new AbortController();
    const seen: number[] = [];
    const error = await rejection(
      (async () => {
        for await (const response of model.stream({ inputs: { MODE: new Int32Array([0]) }, signal: controller.signal })) {
          seen.push((response.outputs.OUT!.data as Int32Array)[0]!);
          controller.abort();
        }
      })(),
    );
    expect(error.code).toBe('CANCELLED');
    expect(seen).toEqual([-1]);
    const report = await model.infer({ inputs: { MODE: new Int32Array([1]) } });
    expect(Array.from(report.outputs.OUT!.data as Int32Array)).toEqual([1]);
    await server.unloadModel('py_cancel');
  });

  it('gets the requests that waited together as one execute() batch', async () => {
    // The first request holds the only instance until the test lets it go;
    // the three sent meanwhile wait in the queue and then run as one batch
    // (dynamic batching). Files in a temporary directory are the signals.
    const source = `
import json
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if x[0, 0] < 0:
                folder = json.loads(request.parameters())["dir"]
                open(os.path.join(folder, "started"), "w").close()
                deadline = time.monotonic() + 20
                while not os.path.exists(os.path.join(folder, "release")) and time.monotonic() < deadline:
                    time.sleep(0.005)
            out = pb_utils.Tensor("BATCH", np.full((1, 1), len(requests), dtype=np.int32))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
`;
    const model = await loadPython('py_batch', source, [fp32('X', [1])], [int32('BATCH', [1])], {
      max_batch_size: 8,
      dynamic_batching: {},
    });
    const dir = await mkdtemp(join(tmpdir(), 'py-batch-'));
    try {
      const x = (v: number) => ({ inputs: { X: { shape: [1, 1], data: new Float32Array([v]) } }, parameters: { dir } });
      const first = model.infer(x(-1));
      await vi.waitFor(() => expect(existsSync(join(dir, 'started'))).toBe(true), { timeout: 10_000 });
      const rest = [model.infer(x(1)), model.infer(x(2)), model.infer(x(3))];
      await vi.waitFor(
        async () => expect(await server.metrics()).toMatch(/nv_inference_pending_request_count\{model="py_batch",version="1"\} 3\b/),
        { timeout: 10_000 },
      );
      await writeFile(join(dir, 'release'), '');
      const batches = await Promise.all([first, ...rest]);
      expect(batches.map((r) => (r.outputs.BATCH!.data as Int32Array)[0])).toEqual([1, 3, 3, 3]);
      // Triton records an execution's statistics just after its responses.
      await vi.waitFor(async () => {
        const [stats] = await model.statistics();
        expect(stats).toMatchObject({ inference_count: 4, execution_count: 2 });
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
      await server.unloadModel('py_batch');
    }
  });

  it('fails to load with Python’s message when model.py cannot be imported', async () => {
    const source = 'import nonexistent_module_for_this_test\n';
    const error = await rejection(loadPython('py_broken', source, [fp32('X')], [fp32('Y')]));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain("No module named 'nonexistent_module_for_this_test'");
  });

  it('fails to load with the message initialize() raised', async () => {
    const source = `
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("missing weights file")
`;
    const error = await rejection(loadPython('py_init_fails', source, [fp32('X')], [fp32('Y')]));
    expect(error.message).toContain('RuntimeError: missing weights file');
  });
});

describe('ensembles', () => {
  it('loading an ensemble loads the models of its steps', async () => {
    await server.unloadModel('add_sub');
    expect(await server.model('add_sub').ready()).toBe(false);
    const chain = await server.loadModel('add_sub_chain');
    expect(await server.model('add_sub').ready()).toBe(true);
    const response = await chain.infer({ inputs: { INPUT0: new Float32Array([1, 1, 1, 1]), INPUT1: new Float32Array([0, 1, 2, 3]) } });
    expect(Array.from(response.outputs.OUTPUT1!.data as Float32Array)).toEqual([0, 2, 4, 6]);
    await server.unloadModel('add_sub_chain');
  });

  it('runs add_sub_chain step by step, each step counting as an add_sub request', async () => {
    const addSub = await server.loadModel('add_sub');
    const chain = await server.loadModel('add_sub_chain');
    const [before] = await addSub.statistics();
    const response = await chain.infer({
      inputs: { INPUT0: new Float32Array([1, 2, 3, 4]), INPUT1: new Float32Array([10, 20, 30, 40]) },
    });
    // (a + b) + (a - b) = 2a and (a + b) - (a - b) = 2b.
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([2, 4, 6, 8]);
    expect(Array.from(response.outputs.OUTPUT1!.data as Float32Array)).toEqual([20, 40, 60, 80]);
    await vi.waitFor(async () => {
      const [after] = await addSub.statistics();
      expect(after!.inference_count - before!.inference_count).toBe(2);
      const [chainStats] = await chain.statistics();
      expect(chainStats).toMatchObject({ name: 'add_sub_chain', inference_count: 1 });
    });
    expect((await chain.metadata()).platform).toBe('ensemble');
  });

  it('runs an ensemble loaded from memory whose two first steps are independent, and reports a step error', async () => {
    await server.loadModel('add_sub');
    await server.loadModel('fail');
    // Steps 0 and 1 both read only ensemble inputs; step 2 waits for both.
    const config = {
      name: 'diamond',
      platform: 'ensemble',
      max_batch_size: 0,
      input: [fp32('A', [4]), fp32('B', [4])],
      output: [fp32('OUT', [4])],
      ensemble_scheduling: {
        step: [
          { model_name: 'add_sub', model_version: -1, input_map: { INPUT0: 'A', INPUT1: 'B' }, output_map: { OUTPUT0: 'a_plus_b' } },
          { model_name: 'add_sub', model_version: -1, input_map: { INPUT0: 'A', INPUT1: 'A' }, output_map: { OUTPUT0: 'a_twice' } },
          { model_name: 'add_sub', model_version: -1, input_map: { INPUT0: 'a_twice', INPUT1: 'a_plus_b' }, output_map: { OUTPUT1: 'OUT' } },
        ],
      },
    } as ModelConfigInput;
    const chain = await server.loadModel('diamond', { config, files: { '1/.keep': '' } });
    const response = await chain.infer({ inputs: { A: new Float32Array([1, 2, 3, 4]), B: new Float32Array([5, 5, 5, 5]) } });
    // 2a - (a + b) = a - b
    expect(Array.from(response.outputs.OUT!.data as Float32Array)).toEqual([-4, -3, -2, -1]);
    await server.unloadModel('diamond');

    const failing = {
      name: 'failing_chain',
      platform: 'ensemble',
      max_batch_size: 0,
      input: [fp32('A')],
      output: [fp32('Z')],
      ensemble_scheduling: {
        step: [{ model_name: 'fail', model_version: -1, input_map: { INPUT0: 'A' }, output_map: { OUTPUT0: 'Z' } }],
      },
    } as ModelConfigInput;
    const bad = await server.loadModel('failing_chain', { config: failing, files: { '1/.keep': '' } });
    const error = await rejection(bad.infer({ inputs: { A: new Float32Array([1]) } }));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toContain('fail model always fails');
    await server.unloadModel('failing_chain');
  });
});

// Last: on real Triton, deleting a second server in the process destroys the
// process-wide pinned memory manager, after which the first server's
// ensembles fail to allocate their intermediate tensors.
describe('several servers', () => {
  it('a process that ran Python models exits by itself without stop()', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'fixtures/exit-python.ts'), MODELS], {
      cwd: REPO_ROOT,
      timeout: 60_000,
    });
    expect(stdout.trim()).toBe('2,3,4,5 7,8');
  });

  it('run model.py at once in two servers and a worker thread; each stops on its own', async () => {
    const other = await startServer();
    const worker = new Worker(join(import.meta.dirname, 'fixtures/run-ts.mjs'), {
      workerData: { module: join(import.meta.dirname, 'fixtures/worker-python.ts'), modelRepository: MODELS },
    });
    const fromWorker = new Promise<{ sums: number[] }>((resolveMessage, reject) => {
      worker.once('message', resolveMessage);
      worker.once('error', reject);
    });
    try {
      const mine = await server.loadModel('add_sub');
      const theirs = await other.loadModel('add_sub');
      const sum = async (model: typeof mine, i: number) => {
        const response = await model.infer({ inputs: { INPUT0: new Float32Array([i, 1, 2, 3]), INPUT1: new Float32Array([i, 1, 1, 1]) } });
        return Array.from(response.outputs.OUTPUT0!.data as Float32Array);
      };
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => [sum(mine, i), sum(theirs, i)]).flat());
      expect(results).toEqual(Array.from({ length: 10 }, (_, i) => [[2 * i, 2, 3, 4], [2 * i, 2, 3, 4]]).flat());
      expect((await fromWorker).sums).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect(await new Promise((resolveExit) => worker.once('exit', resolveExit))).toBe(0);
      await other.stop();
      expect(await sum(mine, 5)).toEqual([10, 2, 3, 4]);
    } finally {
      await worker.terminate();
      await other.stop();
    }
  });
});

describe('auto_complete_config', () => {
  it('lets model.py fill in its configuration when strictModelConfig is false', async () => {
    const loose = await startServer({ strictModelConfig: false });
    try {
      const source = `
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [2]})
        auto_complete_model_config.add_output({"name": "OUT", "data_type": "TYPE_INT32", "dims": [2]})
        auto_complete_model_config.set_max_batch_size(4)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", (x * x).astype(np.int32))]))
        return responses
`;
      const model = await loose.loadModel('py_auto', {
        config: { name: 'py_auto', backend: 'python' } as ModelConfigInput,
        files: { '1/model.py': source },
      });
      const metadata = await model.metadata();
      expect(metadata.inputs).toEqual([{ name: 'IN', datatype: 'INT32', shape: [-1, 2] }]);
      expect(metadata.outputs).toEqual([{ name: 'OUT', datatype: 'INT32', shape: [-1, 2] }]);
      const config = await model.config();
      expect(config.max_batch_size).toBe(4);
      expect(config.dynamic_batching?.preferred_batch_size).toEqual([4]);
      const response = await model.infer({ inputs: { IN: { shape: [1, 2], data: new Int32Array([3, -4]) } } });
      expect(Array.from(response.outputs.OUT!.data as Int32Array)).toEqual([9, 16]);
    } finally {
      await loose.stop();
    }
  });
});

describe('pb_utils.Logger', () => {
  it("writes a model's log records into the server log", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'py-log-'));
    const file = join(dir, 'triton.log');
    const logged = await startServer({ log: { file, info: true, warn: true } });
    try {
      const source = `
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        pb_utils.Logger.log_info("py_logger info record")
        pb_utils.Logger.log_warn("py_logger warning record")
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "X")]) for r in requests]
`;
      const model = await logged.loadModel('py_logger', {
        config: pythonConfig('py_logger', [fp32('X')], [fp32('X')]),
        files: { '1/model.py': source },
      });
      await model.infer({ inputs: { X: new Float32Array([1]) } });
      await vi.waitFor(async () => {
        const text = await readFile(file, 'utf8');
        expect(text).toMatch(/^I.*py_logger info record/m);
        expect(text).toMatch(/^W.*py_logger warning record/m);
      });
    } finally {
      await logged.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
