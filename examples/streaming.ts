// streaming.ts — a decoupled (streaming) Python model: one request, many
// responses, read with `for await`. word_stream sends the words of a text
// back one at a time, as an LLM sends tokens.
//
//   node --import tsx examples/streaming.ts ["some text"] [delay ms per word, default 50]
import { fileURLToPath } from 'node:url';
import { Server } from 'tritonserver-node';

const modelRepository = process.env.MODEL_REPOSITORY ?? fileURLToPath(new URL('model_repository', import.meta.url));
const text = process.argv[2] ?? 'Triton streams each word back as soon as the model sends it';
const delayMs = Number(process.argv[3] ?? 50);

await using server = await Server.start({
  modelRepository,
  modelControlMode: 'explicit',
  modelLoadRetryCount: 0, // a model that fails to load fails at once instead of being retried
  log: { info: false },
});
const model = await server.loadModel('word_stream');
console.log('decoupled:', (await model.transactionProperties()).decoupled);

const started = performance.now();
let count = 0;
for await (const response of model.stream({
  inputs: { TEXT: [text], DELAY_MS: new Uint32Array([delayMs]) },
})) {
  const [word] = response.outputs.WORD!.strings();
  const [index] = response.outputs.INDEX!.data as Int32Array;
  console.log(`word ${index}: ${word}  (+${Math.round(performance.now() - started)} ms)`);
  count++;
}
console.log(`stream ended after ${count} responses`);
