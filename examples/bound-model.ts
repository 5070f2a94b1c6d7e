// bound-model.ts — a TypeScript function as a Triton model (server.bindModel),
// as the first step of an ensemble in front of a Python model, served over
// KServe HTTP. The TS step cleans up texts (lowercase, strips markup and
// extra spaces) before the sentiment model scores them; Triton batches the
// TS step like any model. Prints each text's score, then how Triton batched
// 64 concurrent callers (executions < requests).
//
//   node --import tsx examples/bound-model.ts
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Server, type BoundRequest } from 'tritonserver-node';
import { serveKServe } from 'tritonserver-node/kserve';

const modelRepository = process.env.MODEL_REPOSITORY ?? fileURLToPath(new URL('model_repository', import.meta.url));

await using server = await Server.start({ modelRepository, modelControlMode: 'explicit', log: { info: false } });

// The TS step: TEXT [batch, n] (BYTES) → CLEAN [batch, n] (BYTES).
function clean(requests: BoundRequest[]) {
  return requests.map((request) => ({
    CLEAN: (request.inputs.TEXT!.data as Uint8Array[]).map((bytes) =>
      new TextDecoder()
        .decode(bytes)
        .replace(/<[^>]*>/g, ' ')
        .replace(/\s+/g, ' ')
        .trim()
        .toLowerCase(),
    ),
  }));
}
const cleanText = await server.bindModel(
  {
    name: 'clean_text',
    maxBatchSize: 32,
    dynamicBatching: { maxQueueDelayMicroseconds: 2000 },
    inputs: [{ name: 'TEXT', datatype: 'BYTES', dims: [-1] }],
    outputs: [{ name: 'CLEAN', datatype: 'BYTES', dims: [-1] }],
  },
  clean,
);

// The ensemble: clean_text → text_processor (the Python sentiment model).
const ensembles = await mkdtemp(join(tmpdir(), 'bound-model-example-'));
await mkdir(join(ensembles, 'clean_and_score', '1'), { recursive: true });
await writeFile(
  join(ensembles, 'clean_and_score', 'config.pbtxt'),
  `name: "clean_and_score"
platform: "ensemble"
max_batch_size: 32
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "SCORE" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling { step [
  { model_name: "clean_text" model_version: -1
    input_map { key: "TEXT" value: "TEXT" } output_map { key: "CLEAN" value: "clean" } },
  { model_name: "text_processor" model_version: -1
    input_map { key: "TEXT" value: "clean" } output_map { key: "SCORE" value: "SCORE" } }
] }
`,
);
await server.registerModelRepository(ensembles);
await server.loadModel('clean_and_score');

const frontends = await serveKServe(server, { http: { port: 0, host: '127.0.0.1' } });
try {
  const texts = ['<b>I LOVE</b>   this library', 'It   was SLOW and it crashed'];
  const reply = await fetch(`http://127.0.0.1:${frontends.http!.port}/v2/models/clean_and_score/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: [{ name: 'TEXT', datatype: 'BYTES', shape: [1, texts.length], data: texts }] }),
  });
  const body = (await reply.json()) as { outputs: Array<{ name: string; data: number[] }> };
  body.outputs[0]!.data.forEach((score, i) => console.log(`${score.toFixed(3)}  ${texts[i]}`));

  // 64 callers at once: Triton's dynamic batcher merges them before the TS step.
  await Promise.all(
    Array.from({ length: 64 }, (_, i) => cleanText.infer({ inputs: { TEXT: { shape: [1, 1], data: [`<i>caller ${i}</i>`] } } })),
  );
  const [stats] = await cleanText.statistics();
  console.log(`clean_text: ${stats!.inference_count} requests in ${stats!.execution_count} executions`);
} finally {
  await frontends.close();
  await server.unloadModel('clean_and_score');
  await server.unregisterModelRepository(ensembles);
  await rm(ensembles, { recursive: true, force: true });
}
