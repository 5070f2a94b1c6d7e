// Starts an in-process Triton server on a model repository, lists its
// models and prints each one's inputs and outputs.
//
//   npx tsx examples/quickstart.ts path/to/model_repository
import { Server } from 'tritonserver-node';

const modelRepository = process.argv[2];
if (!modelRepository) {
  console.error('usage: tsx examples/quickstart.ts <model repository>');
  process.exit(2);
}

// Poll mode (the C API's default) loads every model of the repository.
await using server = await Server.start({ modelRepository, modelControlMode: 'poll', log: { info: false } });

const { name, version } = await server.metadata();
console.log(`${name} ${version}, live: ${await server.live()}, ready: ${await server.ready()}`);

for (const entry of await server.modelIndex()) {
  console.log(`${entry.name} v${entry.version ?? '?'} ${entry.state ?? 'UNKNOWN'}`);
  if (entry.state !== 'READY') continue;
  const metadata = await server.model(entry.name).metadata();
  for (const tensor of [...metadata.inputs, ...metadata.outputs]) {
    console.log(`  ${tensor.name} ${tensor.datatype} [${tensor.shape.join(',')}]`);
  }
}
