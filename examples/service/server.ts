// A Node HTTP model service — the Flask replacement. Fastify routes call the
// models in-process through tritonserver-node, so every HTTP request becomes
// one Triton request and Triton's dynamic batcher merges concurrent HTTP
// requests into few model executions. No second server, no JSON hop to it.
//
//   node --import tsx examples/service/server.ts
//
// Environment: PORT (3000), HOST (127.0.0.1), MODEL_REPOSITORY (default:
// examples/model_repository), TRITONSERVER_LIBRARY (optional; otherwise the
// package's own search), DYNAMIC_BATCHING=off to load text_processor without
// its dynamic batcher (for comparisons, see bench.ts).
//
// Remote mode: with TRITON_URL set (grpc://host:8001, http://host:8000, a
// comma-separated list, or dns:///name:8001) the same routes call a Triton
// server or fleet through tritonserver-node/client instead of starting Triton
// in this process; nothing else in this file changes. TRITON_METRICS_URL
// (default: port 8002 of the first target) is where /metrics reads from.
//
// Routes:
//   POST /v1/sentiment  {"texts": ["...", ...]}  → {"scores": [0.82, 0.18]} (in [0, 1], 1 = positive)
//   POST /v1/classify   image/jpeg|png|webp body, or application/octet-stream
//                       raw RGB with ?width=W&height=H → {"top5": [{label, probability}]}
//   GET  /v1/stats      inference and execution counts of the served models
//   GET  /healthz/live, /healthz/ready, /metrics (Prometheus text)
//
// Errors: 400 bad JSON or shape (zod's message), 413 body over the limit,
// 415 unsupported content type, 500 a model error (Triton's code and
// message), 503 while stopping. SIGTERM/SIGINT: stop accepting, let requests
// in flight finish, stop Triton, exit 0.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import sharp from 'sharp';
import { z } from 'zod';
import { Server, TritonError, parseModelConfig, type InferenceModel, type InferenceServer } from 'tritonserver-node';
import { Client } from 'tritonserver-node/client';

const DEFAULT_REPOSITORY = fileURLToPath(new URL('../model_repository', import.meta.url));

export const serviceOptionsSchema = z.object({
  /** Triton model repository holding the sentiment and classification models. */
  modelRepository: z.string().min(1).default(DEFAULT_REPOSITORY),
  /** libtritonserver.so to use; default: the package's search (TRITONSERVER_LIBRARY, TRITON_HOME, ...). */
  libraryPath: z.string().min(1).optional(),
  sentimentModel: z.string().min(1).default('text_processor'),
  classifyModel: z.string().min(1).default('pipeline'),
  /** Class names in output order; default `<repository>/classifier/labels.txt`. */
  labelsFile: z.string().min(1).optional(),
  /** Largest request body accepted (bytes); larger ones get 413. */
  bodyLimitBytes: z.number().int().positive().default(4 * 1024 * 1024),
  /** Most texts in one /v1/sentiment request. */
  maxTexts: z.number().int().positive().default(256),
  /** Most pixels of an image for /v1/classify. */
  maxPixels: z.number().int().positive().default(4096 * 4096),
  /** false: load the sentiment model with its config minus dynamic_batching. */
  dynamicBatching: z.boolean().default(true),
  /** Fastify's request log. */
  logger: z.boolean().default(false),
  /** Remote mode: call Triton at this target (or these, comma-separated) instead of starting it in-process. */
  tritonUrl: z.string().min(1).optional(),
  /** Remote mode: where /metrics reads Triton's metrics (default: port 8002 of the first target). */
  metricsUrl: z.string().url().optional(),
  /**
   * In-process: reload a Python model whose stub process died (the server
   * option of that name). Meanwhile /healthz/ready answers 503.
   */
  recoverUnhealthyModels: z.boolean().default(true),
});
export type ServiceOptions = z.input<typeof serviceOptionsSchema>;

export interface Service {
  app: FastifyInstance;
  /** The in-process `Server`, or the remote `Client` in remote mode: the routes use only what both share. */
  server: InferenceServer;
  /** Graceful: stops accepting, waits for requests in flight, then stops Triton. */
  close(): Promise<void>;
}

const IMAGE_TYPES = ['image/jpeg', 'image/png', 'image/webp', 'application/octet-stream'];
const sentimentBody = z.object({ texts: z.array(z.string().max(100_000)).min(1) }).strict();
const rawImageQuery = z.object({
  width: z.coerce.number().int().positive(),
  height: z.coerce.number().int().positive(),
});

/** An error the client caused, answered with its status and message. */
class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** 415 unless the body has the given media type. */
function expectContentType(request: FastifyRequest, ...types: string[]): void {
  const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (!types.includes(type)) {
    throw new HttpError(415, `content-type: expected ${types.join(' or ')}, got ${type || 'none'}`);
  }
}

function zodMessage(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`).join('; ');
}

/** Which HTTP status a TritonError becomes. */
function statusOf(error: TritonError): number {
  if (error.code === 'UNAVAILABLE') return 503; // server stopping or stopped
  if (error.code === 'CANCELLED') return 499; // the client went away
  return 500;
}

/** An AbortSignal that fires when the client disconnects before its answer. */
function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort(new Error('client disconnected'));
  });
  return controller.signal;
}

async function loadSentimentModel(server: Server, repository: string, name: string, dynamicBatching: boolean): Promise<InferenceModel> {
  if (dynamicBatching) return server.loadModel(name);
  // The repository's config minus its batcher, sent as a load-time override.
  const { dynamic_batching: _off, ...config } = parseModelConfig(await readFile(join(repository, name, 'config.pbtxt'), 'utf8'));
  return server.loadModel(name, { config });
}

interface Backend {
  server: InferenceServer;
  sentiment: InferenceModel;
  classifier: InferenceModel;
  /** Stops Triton (in-process) or closes the connections (remote). */
  release(): Promise<unknown>;
}

/** Triton in this process, the models loaded from the repository. */
async function inProcess(options: z.output<typeof serviceOptionsSchema>): Promise<Backend> {
  const server = await Server.start({
    modelRepository: options.modelRepository,
    modelControlMode: 'explicit',
    modelLoadRetryCount: 0, // a broken model fails the start instead of being retried forever
    recoverUnhealthyModels: options.recoverUnhealthyModels, // /healthz/ready is 503 until it serves again
    ...(options.libraryPath ? { libraryPath: options.libraryPath } : {}),
    log: { info: false },
  });
  try {
    const sentiment = await loadSentimentModel(server, options.modelRepository, options.sentimentModel, options.dynamicBatching);
    const classifier = await server.loadModel(options.classifyModel); // an ensemble loads its steps too
    return { server, sentiment, classifier, release: () => server.stop() };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

/** A remote Triton (or fleet) that serves the models; loaded there if they are not yet (explicit model control). */
async function remote(options: z.output<typeof serviceOptionsSchema>, url: string): Promise<Backend> {
  const targets = url.split(',').map((target) => target.trim());
  const client = await Client.connect(targets, options.metricsUrl === undefined ? {} : { metricsUrl: options.metricsUrl });
  try {
    const model = async (name: string): Promise<InferenceModel> => {
      const handle = client.model(name);
      return (await handle.ready()) ? handle : client.loadModel(name);
    };
    return { server: client, sentiment: await model(options.sentimentModel), classifier: await model(options.classifyModel), release: () => client.close() };
  } catch (error) {
    await client.close();
    throw error;
  }
}

export async function buildService(input: ServiceOptions = {}): Promise<Service> {
  const options = serviceOptionsSchema.parse(input);
  const labels = (await readFile(options.labelsFile ?? join(options.modelRepository, 'classifier', 'labels.txt'), 'utf8'))
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');

  const { server, sentiment, classifier, release } = options.tritonUrl === undefined ? await inProcess(options) : await remote(options, options.tritonUrl);

  const app = Fastify({ logger: options.logger, bodyLimit: options.bodyLimitBytes });
  // Image bodies arrive as one Buffer; JSON keeps Fastify's own parser.
  app.addContentTypeParser(
    IMAGE_TYPES,
    { parseAs: 'buffer' },
    (_request: FastifyRequest, body: Buffer, done: (error: Error | null, body?: Buffer) => void) => done(null, body),
  );

  app.setErrorHandler((error: unknown, request, reply) => {
    if (error instanceof z.ZodError) return reply.code(400).send({ error: zodMessage(error) });
    if (error instanceof HttpError) return reply.code(error.statusCode).send({ error: error.message });
    if (error instanceof TritonError) {
      return reply.code(statusOf(error)).send({ error: error.message, code: error.code });
    }
    const status = (error as { statusCode?: unknown }).statusCode;
    const message = error instanceof Error ? error.message : String(error);
    if (typeof status === 'number' && status >= 400 && status < 500) return reply.code(status).send({ error: message });
    request.log.error(error);
    return reply.code(500).send({ error: message });
  });

  app.post('/v1/sentiment', async (request, reply) => {
    expectContentType(request, 'application/json');
    const { texts } = sentimentBody.parse(request.body);
    if (texts.length > options.maxTexts) throw new HttpError(400, `texts: at most ${options.maxTexts} per request (got ${texts.length})`);
    const signal = clientGone(reply);
    // One Triton request per text: the batcher merges them with every other
    // HTTP request's texts.
    const responses = await Promise.all(
      texts.map((text) => sentiment.infer({ inputs: { TEXT: { shape: [1, 1], data: [text] } }, signal })),
    );
    return { scores: responses.map((r) => (r.outputs.SCORE!.data as Float32Array)[0]) };
  });

  app.post('/v1/classify', async (request, reply) => {
    expectContentType(request, ...IMAGE_TYPES);
    const body = request.body;
    if (!Buffer.isBuffer(body) || body.length === 0) throw new HttpError(400, 'body: an image is required');
    let pixels: Uint8Array;
    let width: number;
    let height: number;
    if (request.headers['content-type']?.startsWith('application/octet-stream')) {
      const query = rawImageQuery.parse(request.query);
      ({ width, height } = query);
      if (body.length !== width * height * 3) {
        throw new HttpError(400, `body: raw RGB of ${width}x${height} is ${width * height * 3} bytes, got ${body.length}`);
      }
      pixels = body;
    } else {
      try {
        const image = await sharp(body, { limitInputPixels: options.maxPixels })
          .removeAlpha()
          .toColourspace('srgb')
          .raw()
          .toBuffer({ resolveWithObject: true });
        ({ width, height } = image.info);
        pixels = image.data;
      } catch (error) {
        throw new HttpError(400, `body: not an image sharp can decode (${(error as Error).message})`);
      }
    }
    if (width * height > options.maxPixels) throw new HttpError(400, `body: image has more than ${options.maxPixels} pixels`);
    const response = await classifier.infer({
      inputs: { IMAGE: { shape: [1, height, width, 3], data: new Uint8Array(pixels.buffer, pixels.byteOffset, pixels.byteLength) } },
      signal: clientGone(reply),
    });
    const probabilities = response.outputs.PROBABILITIES!.data as Float32Array;
    const top5 = [...probabilities]
      .map((probability, i) => ({ label: labels[i] ?? String(i), probability }))
      .sort((a, b) => b.probability - a.probability)
      .slice(0, 5);
    return { top5 };
  });

  app.get('/v1/stats', async () => {
    const stats: Record<string, { inference_count: number; execution_count: number }> = {};
    for (const model of [sentiment, classifier]) {
      for (const s of await model.statistics()) {
        stats[s.name] = { inference_count: s.inference_count, execution_count: s.execution_count };
      }
    }
    return stats;
  });

  app.get('/healthz/live', async (_request, reply) => {
    const live = await server.live();
    return reply.code(live ? 200 : 503).send({ live });
  });

  app.get('/healthz/ready', async (_request, reply) => {
    const ready = !closing && (await server.ready()) && (await sentiment.ready()) && (await classifier.ready());
    return reply.code(ready ? 200 : 503).send({ ready });
  });

  app.get('/metrics', async (_request, reply) => {
    return reply.type('text/plain; version=0.0.4').send(await server.metrics());
  });

  let closing: Promise<void> | undefined;
  // While closing, answers end their keep-alive connection, so a client's
  // idle connection does not hold the shutdown up until it times out.
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  const close = () =>
    (closing ??= (async () => {
      try {
        await app.close(); // stops accepting; waits for the requests in flight
      } finally {
        await release();
      }
    })());
  return { app, server, close };
}

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST ?? '127.0.0.1';
  const service = await buildService({
    ...(process.env.MODEL_REPOSITORY ? { modelRepository: process.env.MODEL_REPOSITORY } : {}),
    ...(process.env.TRITON_URL ? { tritonUrl: process.env.TRITON_URL } : {}),
    ...(process.env.TRITON_METRICS_URL ? { metricsUrl: process.env.TRITON_METRICS_URL } : {}),
    dynamicBatching: process.env.DYNAMIC_BATCHING !== 'off',
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      console.log(`${signal}: finishing requests in flight, then stopping`);
      service.close().then(
        () => process.exit(0),
        (error: unknown) => {
          console.error(error);
          process.exit(1);
        },
      );
    });
  }
  const address = await service.app.listen({ port, host });
  console.log(`listening on ${address}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
