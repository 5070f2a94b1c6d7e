// pipeline.ts — decode a JPEG in Node with sharp and run an ensemble
// (preprocess → classifier, both Python models) in one call. Triton passes
// the normalized tensor between the two steps itself. Prints the top-5
// labels with their probabilities.
//
//   node --import tsx examples/pipeline.ts [image.jpg]   (default: examples/images/sky.jpg)
//
// The classifier is a tiny deterministic colour classifier (see
// model_repository/classifier/generate_weights.py); swap in a real model
// with the same input and output and nothing here changes.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { Server } from 'tritonserver-node';

const modelRepository = process.env.MODEL_REPOSITORY ?? fileURLToPath(new URL('model_repository', import.meta.url));
const imagePath = process.argv[2] ?? fileURLToPath(new URL('images/sky.jpg', import.meta.url));

await using server = await Server.start({
  modelRepository,
  modelControlMode: 'explicit',
  modelLoadRetryCount: 0, // a model that fails to load fails at once instead of being retried
  log: { info: false },
});
// Loading an ensemble loads the models of its steps too.
const pipeline = await server.loadModel('pipeline');
const labels = (await readFile(`${modelRepository}/classifier/labels.txt`, 'utf8')).trim().split('\n');

// Raw RGB, height × width × 3 bytes: the layout the preprocess model takes.
const { data, info } = await sharp(imagePath).removeAlpha().raw().toBuffer({ resolveWithObject: true });
const pixels = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);

const response = await pipeline.infer({
  inputs: { IMAGE: { shape: [1, info.height, info.width, 3], data: pixels } },
});
const probabilities = response.outputs.PROBABILITIES!.data as Float32Array;
const top5 = [...probabilities]
  .map((p, i) => ({ label: labels[i] ?? `#${i}`, p }))
  .sort((a, b) => b.p - a.p)
  .slice(0, 5);

console.log(`${imagePath} (${info.width}x${info.height})`);
for (const { label, p } of top5) console.log(`${p.toFixed(4)}  ${label}`);
