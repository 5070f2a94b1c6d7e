// sentiment.ts — call a Python model.py (text_processor) from Node, and let
// Triton's dynamic batcher merge many concurrent calls into a few model
// executions. Prints one score per text in [0, 1] (0 negative, 0.5 neutral,
// 1 positive: the probability that the text is positive), then the
// model's statistics for a burst of concurrent requests: how many requests
// Triton received and in how many executions it ran them.
//
//   node --import tsx examples/sentiment.ts ["some text" ...]
//
// Uses examples/model_repository (or MODEL_REPOSITORY); Triton is found as
// the package finds it (TRITONSERVER_LIBRARY, TRITON_HOME, /opt/tritonserver).
import { fileURLToPath } from 'node:url';
import { Server, type ModelStatistics } from 'tritonserver-node';

const modelRepository = process.env.MODEL_REPOSITORY ?? fileURLToPath(new URL('model_repository', import.meta.url));
const texts = process.argv.length > 2 ? process.argv.slice(2) : [
  'I love this library, the docs are excellent',
  'The service was slow and the app crashed twice',
  'not bad at all',
  'It works.',
];
const BURST = 256;

await using server = await Server.start({
  modelRepository,
  modelControlMode: 'explicit',
  modelLoadRetryCount: 0, // a model that fails to load fails at once instead of being retried
  log: { info: false },
});
const model = await server.loadModel('text_processor');

// One request per text, all in flight at once: TEXT is [batch 1, 1 text].
const responses = await Promise.all(
  texts.map((text) => model.infer({ inputs: { TEXT: { shape: [1, 1], data: [text] } } })),
);
responses.forEach((response, i) => {
  const score = (response.outputs.SCORE!.data as Float32Array)[0]!;
  console.log(`${score.toFixed(3)}  ${texts[i]}`);
});

// A burst of concurrent requests; compare the statistics before and after.
const counts = (stats: ModelStatistics[]) => ({
  requests: stats.reduce((n, s) => n + s.inference_count, 0),
  executions: stats.reduce((n, s) => n + s.execution_count, 0),
});
const before = counts(await model.statistics());
await Promise.all(
  Array.from({ length: BURST }, (_, i) =>
    model.infer({ inputs: { TEXT: { shape: [1, 1], data: [texts[i % texts.length]!] } } }),
  ),
);
// Triton records statistics just after a batch's responses are sent, so the
// last ones may land a moment after the last response: wait for them.
let after = counts(await model.statistics());
for (let tries = 0; after.requests - before.requests < BURST && tries < 200; tries++) {
  await new Promise((resolve) => setTimeout(resolve, 10));
  after = counts(await model.statistics());
}
const requests = after.requests - before.requests;
const executions = after.executions - before.executions;
console.log(`burst: ${requests} requests in ${executions} executions (${(requests / executions).toFixed(1)} per execution)`);
