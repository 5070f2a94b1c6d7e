// load-from-memory.ts — load a model that exists only in your program: its
// config and its model.py are passed to Triton with the load call, nothing is
// written to the repository. Then reload a repository model with a changed
// config (a config override), e.g. to switch dynamic batching off.
//
//   node --import tsx examples/load-from-memory.ts
import { fileURLToPath } from 'node:url';
import { Server, type ModelConfigInput } from 'tritonserver-node';

const modelRepository = process.env.MODEL_REPOSITORY ?? fileURLToPath(new URL('model_repository', import.meta.url));

const config: ModelConfigInput = {
  backend: 'python',
  max_batch_size: 0,
  input: [{ name: 'CELSIUS', data_type: 'TYPE_FP32', dims: [-1] }],
  output: [{ name: 'FAHRENHEIT', data_type: 'TYPE_FP32', dims: [-1] }],
};
const modelPy = `
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            celsius = pb_utils.get_input_tensor_by_name(request, "CELSIUS").as_numpy()
            fahrenheit = (celsius * 1.8 + 32).astype("float32")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("FAHRENHEIT", fahrenheit)]))
        return responses
`;

await using server = await Server.start({
  modelRepository,
  modelControlMode: 'explicit',
  modelLoadRetryCount: 0, // a model that fails to load fails at once instead of being retried
  log: { info: false },
});

// Validated by the package's zod schema first, then sent as Triton's
// "config" and "file:1/model.py" load parameters.
const converter = await server.loadModel('celsius_to_fahrenheit', { config, files: { '1/model.py': modelPy } });
const { outputs } = await converter.infer({ inputs: { CELSIUS: new Float32Array([-40, 0, 37, 100]) } });
console.log('fahrenheit:', [...(outputs.FAHRENHEIT!.data as Float32Array)].map((f) => Number(f.toFixed(2))).join(', '));

// A repository model with its config changed at load time.
const repositoryConfig = await server.loadModel('text_processor').then((m) => m.config());
const { dynamic_batching: _dropped, ...withoutBatcher } = repositoryConfig;
const reloaded = await server.loadModel('text_processor', { config: { ...withoutBatcher, max_batch_size: 4 } });
const overridden = await reloaded.config();
console.log(`text_processor reloaded: max_batch_size ${overridden.max_batch_size}, dynamic batching ${overridden.dynamic_batching ? 'on' : 'off'}`);
