// hot-reload.ts — ship a new model version without restarting the service.
// The repository gets a new version directory (2/); in poll mode one call to
// pollModelRepository() makes Triton load it, and requests go to version 2
// (the default version policy serves the latest version). Requests keep
// working throughout.
//
//   node --import tsx examples/hot-reload.ts
//
// Writes its own temporary repository and removes it at the end.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server, writeModelRepository } from 'tritonserver-node';

const greeter = (greeting: string) => `
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            names = pb_utils.get_input_tensor_by_name(request, "NAME").as_numpy()
            text = np.array([b"${greeting}, " + n for n in names.reshape(-1)], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("GREETING", text.reshape(names.shape))]))
        return responses
`;

const repository = await mkdtemp(join(tmpdir(), 'hot-reload-'));
try {
  await writeModelRepository(repository, {
    greeter: {
      config: {
        backend: 'python',
        max_batch_size: 0,
        input: [{ name: 'NAME', data_type: 'TYPE_STRING', dims: [-1] }],
        output: [{ name: 'GREETING', data_type: 'TYPE_STRING', dims: [-1] }],
      },
      files: { '1/model.py': greeter('Hello') },
    },
  });

  await using server = await Server.start({
    modelRepository: repository,
    modelControlMode: 'poll', // poll: Triton re-reads the repository when asked
    modelLoadRetryCount: 0, // a model that fails to load fails at once instead of being retried
    log: { info: false },
  });
  const model = server.model('greeter'); // version -1: whichever Triton serves

  const greet = async () => {
    const response = await model.infer({ inputs: { NAME: ['Ada'] } });
    return `version ${response.model.version}: ${response.outputs.GREETING!.strings()[0]}`;
  };
  console.log(await greet());

  // Deploy version 2 next to version 1, then tell Triton to look.
  await mkdir(join(repository, 'greeter', '2'));
  await writeFile(join(repository, 'greeter', '2', 'model.py'), greeter('Good day'));
  await server.pollModelRepository();
  console.log(await greet());
  console.log('index:', JSON.stringify(await server.modelIndex()));
} finally {
  await rm(repository, { recursive: true, force: true });
}
