// classify.ts — the Flask-to-Triton article's service call, in-process: a JPEG
// decoded in Node with sharp goes through the `pipeline_onnx` ensemble
// (numpy preprocessing in the Python backend, then ResNet-50 on Triton's ONNX
// Runtime backend; `--pytorch` uses `pipeline`, ResNet-50 on LibTorch).
// Prints the top-5 ImageNet classes with their scores.
//
//   /usr/bin/python3 examples/resnet50/make_models.py      (once: writes the model repository)
//   node --import tsx examples/resnet50/classify.ts [--pytorch] [image.jpg]
//
// Needs real Triton with the ONNX Runtime / PyTorch backends (docs/frameworks.md).
// The weights are seeded, not trained: the classes are deterministic, not meaningful.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { Server } from 'tritonserver-node';

const args = process.argv.slice(2);
const pytorch = args.includes('--pytorch');
const imagePath = args.find((a) => !a.startsWith('--')) ?? fileURLToPath(new URL('../images/orange.jpg', import.meta.url));
const modelRepository = process.env.MODEL_REPOSITORY ?? fileURLToPath(new URL('model_repository', import.meta.url));
const [pipelineName, classifier] = pytorch ? ['pipeline', 'resnet50'] : ['pipeline_onnx', 'resnet50_onnx'];

await using server = await Server.start({ modelRepository, modelControlMode: 'explicit', log: { info: false } });
const pipeline = await server.loadModel(pipelineName); // loads preprocess and the classifier too
const labels = (await readFile(`${modelRepository}/${classifier}/labels.txt`, 'utf8')).trim().split('\n');

const { data, info } = await sharp(imagePath).removeAlpha().raw().toBuffer({ resolveWithObject: true });
const response = await pipeline.infer({
  inputs: { raw_image: { shape: [1, info.height, info.width, 3], data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) } },
});
const scores = response.outputs.classification_result!.data as Float32Array;
const top5 = [...scores.keys()].sort((a, b) => scores[b]! - scores[a]!).slice(0, 5);

console.log(`${imagePath} (${info.width}x${info.height}) through ${pipelineName}`);
for (const index of top5) console.log(`${scores[index]!.toFixed(4).padStart(9)}  ${labels[index]}`);
