// cancel-and-timeout.ts — stopping requests that take too long, inside
// Triton: a 500 ms timeout, and an AbortSignal fired by the caller. Both
// reject with TritonError CANCELLED and cancel the request in Triton, so the
// model (which checks request.is_cancelled()) stops working on it; the
// server keeps serving afterwards.
//
//   node --import tsx examples/cancel-and-timeout.ts
import { fileURLToPath } from 'node:url';
import { Server, TritonError, type InferenceResponse } from 'tritonserver-node';

const modelRepository = process.env.MODEL_REPOSITORY ?? fileURLToPath(new URL('model_repository', import.meta.url));
const TEN_WORDS = 'one two three four five six seven eight nine ten';

await using server = await Server.start({
  modelRepository,
  modelControlMode: 'explicit',
  modelLoadRetryCount: 0, // a model that fails to load fails at once instead of being retried
  log: { info: false },
});
const model = await server.loadModel('word_stream');

/** Reads a stream to its end or its error; returns the words and the error. */
async function collect(stream: AsyncIterable<InferenceResponse>) {
  const words: string[] = [];
  try {
    for await (const response of stream) words.push(...response.outputs.WORD!.strings());
    return { words, error: undefined };
  } catch (error) {
    if (!(error instanceof TritonError)) throw error;
    return { words, error };
  }
}

// 1. A timeout: ten words at 200 ms each would take 2 s; stop after 500 ms.
const timed = await collect(
  model.stream({ inputs: { TEXT: [TEN_WORDS], DELAY_MS: new Uint32Array([200]) }, timeoutMs: 500 }),
);
console.log(`timeout: ${timed.error?.code} "${timed.error?.message}" after ${timed.words.length} of 10 words`);

// 2. The caller aborts (a client disconnected, a user pressed stop) once
//    the first word is in.
const controller = new AbortController();
const words: string[] = [];
let aborted: TritonError | undefined;
try {
  for await (const response of model.stream({
    inputs: { TEXT: [TEN_WORDS], DELAY_MS: new Uint32Array([200]) },
    signal: controller.signal,
  })) {
    words.push(...response.outputs.WORD!.strings());
    controller.abort(new Error('user pressed stop'));
  }
} catch (error) {
  if (!(error instanceof TritonError)) throw error;
  aborted = error;
}
console.log(`abort: ${aborted?.code} (cause: ${(aborted?.cause as Error | undefined)?.message}) after ${words.length} of 10 words`);

// 3. The same model right after: a full, quick stream.
const full = await collect(model.stream({ inputs: { TEXT: [TEN_WORDS] } }));
console.log(`afterwards: ${full.words.length} of 10 words, error: ${full.error?.code ?? 'none'}`);
