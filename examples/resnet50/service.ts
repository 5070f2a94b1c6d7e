// service.ts — the Flask app of the Flask-to-Triton article (flask_app.py
// beside this file), as a Fastify service: POST /predict with a JPEG or PNG
// body answers the top-5 ImageNet classes. ENGINE picks what classifies:
//
//   triton-onnx      (default) this package in-process: the `pipeline_onnx` ensemble
//                    (numpy preprocessing in the Python backend, ResNet-50 on ONNX Runtime)
//   triton-pytorch   the same, `pipeline` (ResNet-50 on LibTorch)
//   remote           the `pipeline_onnx` ensemble on a Triton server at TRITON_URL
//                    (grpc://host:8001 or http://host:8000), through tritonserver-node/client
//   onnxruntime-node onnxruntime-node in this process on the same model.onnx, with the
//                    preprocessing done here (sharp resizes, JS normalizes)
//
//   node --import tsx examples/resnet50/service.ts       (PORT, default 3000; 0 picks one)
//
// MODEL_REPOSITORY: make_models.py's output (default: model_repository beside
// this file). Prints `listening on <url>` once it serves; SIGTERM/SIGINT stop it.
// GET /debug/event-loop answers the event loop's worst delay since the last read (and resets it).
// Errors: 400 a body that is not an image, 500 a model error. A benchmark
// target (bench/models-http.ts), kept short: examples/service/server.ts is
// the example of a complete service (limits, health, metrics, shutdown).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import sharp from 'sharp';
import { Server, type InferenceModel } from 'tritonserver-node';
import { Client } from 'tritonserver-node/client';
import { loadOnnxRuntimeNode } from '../../bench/onnxruntime-node.js';

const ENGINES = ['triton-onnx', 'triton-pytorch', 'remote', 'onnxruntime-node'] as const;
type Engine = (typeof ENGINES)[number];
const engine = (process.env.ENGINE ?? 'triton-onnx') as Engine;
if (!ENGINES.includes(engine)) throw new Error(`ENGINE must be one of ${ENGINES.join(', ')}`);
const repository = process.env.MODEL_REPOSITORY ?? fileURLToPath(new URL('model_repository', import.meta.url));
const labels = (await readFile(join(repository, 'resnet50', 'labels.txt'), 'utf8')).trim().split('\n');

/** Image bytes in, 1,000 scores out. */
type Classify = (image: Buffer) => Promise<Float32Array>;

async function decode(image: Buffer): Promise<{ pixels: Uint8Array; width: number; height: number }> {
  const { data, info } = await sharp(image).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { pixels: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), width: info.width, height: info.height };
}

function throughPipeline(pipeline: InferenceModel): Classify {
  return async (image) => {
    const { pixels, width, height } = await decode(image);
    const response = await pipeline.infer({ inputs: { raw_image: { shape: [1, height, width, 3], data: pixels } } });
    return response.outputs.classification_result!.data as Float32Array;
  };
}

const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];

async function start(): Promise<{ classify: Classify; close: () => Promise<unknown> }> {
  if (engine === 'triton-onnx' || engine === 'triton-pytorch') {
    const server = await Server.start({ modelRepository: repository, modelControlMode: 'explicit', log: { info: false } });
    const pipeline = await server.loadModel(engine === 'triton-onnx' ? 'pipeline_onnx' : 'pipeline');
    return { classify: throughPipeline(pipeline), close: () => server.stop() };
  }
  if (engine === 'remote') {
    const client = await Client.connect(process.env.TRITON_URL ?? 'grpc://127.0.0.1:8001');
    return { classify: throughPipeline(client.model('pipeline_onnx')), close: () => client.close() };
  }
  const ort = loadOnnxRuntimeNode();
  if (ort === undefined) throw new Error('onnxruntime-node is not installed (npm run bench:models installs it)');
  const session = await ort.InferenceSession.create(join(repository, 'resnet50_onnx', '1', 'model.onnx'));
  return {
    classify: async (image) => {
      const { data } = await sharp(image).removeAlpha().resize(224, 224, { fit: 'fill' }).raw().toBuffer({ resolveWithObject: true });
      const chw = new Float32Array(3 * 224 * 224);
      for (let i = 0; i < 224 * 224; i++) {
        for (let c = 0; c < 3; c++) chw[c * 224 * 224 + i] = (data[i * 3 + c]! / 255 - MEAN[c]!) / STD[c]!;
      }
      const out = await session.run({ input__0: new ort.Tensor('float32', chw, [1, 3, 224, 224]) });
      return out.output__0!.data;
    },
    close: () => session.release(),
  };
}

const { classify, close } = await start();
const app = Fastify({ bodyLimit: 16 * 1024 * 1024 });
app.addContentTypeParser(['image/jpeg', 'image/png', 'application/octet-stream'], { parseAs: 'buffer' }, (_req, body, done) => {
  done(null, body);
});
app.post('/predict', async (request, reply) => {
  let scores: Float32Array;
  try {
    scores = await classify(request.body as Buffer);
  } catch (error) {
    const notImage = error instanceof Error && /unsupported image format|Input buffer/i.test(error.message);
    return reply.code(notImage ? 400 : 500).send({ error: (error as Error).message });
  }
  const top = [...scores.keys()].sort((a, b) => scores[b]! - scores[a]!).slice(0, 5);
  return { top5: top.map((i) => ({ label: labels[i], score: scores[i] })) };
});

// The event loop's worst delay since the last read: what a blocking model call costs every other request.
const loop = monitorEventLoopDelay({ resolution: 5 });
loop.enable();
app.get('/debug/event-loop', async () => {
  const maxMs = loop.max / 1e6;
  loop.reset();
  return { maxMs };
});

const url = await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' });
console.log(`listening on ${url} (${engine})`);
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    void app
      .close()
      .then(close)
      .then(() => process.exit(0));
  });
}
