// Every runnable example under examples/ runs as a user would run it
// (`node --import tsx examples/<name>.ts`) against the library the suite
// uses, and prints what its header promises. Every config.pbtxt under
// examples/ is valid for the package's config checks.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseModelConfig, validateModelConfig } from '../lib/index.js';
import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);
const EXAMPLES = resolve(REPO_ROOT, 'examples');
const REPOSITORY = resolve(EXAMPLES, 'model_repository');

async function example(name: string, args: string[] = []): Promise<string> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', join(EXAMPLES, name), ...args], {
    cwd: REPO_ROOT,
    timeout: 60_000,
  });
  return stdout;
}

/** What examples/resnet50/make_models.py writes (git-ignored; test/framework-backends.test.ts loads it). */
const GENERATED = resolve(EXAMPLES, 'resnet50/model_repository');

async function configFiles(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.parentPath.startsWith(GENERATED)) continue;
    if (entry.isFile() && entry.name === 'config.pbtxt') found.push(join(entry.parentPath, entry.name));
  }
  return found.sort();
}

describe('examples/model_repository', () => {
  it('every config.pbtxt parses, passes validateModelConfig and is named after its directory', async () => {
    const files = await configFiles(EXAMPLES);
    expect(files.map((f) => relative(REPOSITORY, f))).toEqual([
      'add_sub/config.pbtxt',
      'classifier/config.pbtxt',
      'pipeline/config.pbtxt',
      'preprocess/config.pbtxt',
      'text_processor/config.pbtxt',
      'word_stream/config.pbtxt',
    ]);
    for (const file of files) {
      const config = validateModelConfig(parseModelConfig(await readFile(file, 'utf8')));
      expect(config.name).toBe(relative(REPOSITORY, file).split('/')[0]);
    }
  });

  it('text_processor has the batching, instance group and warmup the issue asks for', async () => {
    const config = parseModelConfig(await readFile(join(REPOSITORY, 'text_processor/config.pbtxt'), 'utf8'));
    expect(config.max_batch_size).toBe(32);
    expect(config.input?.[0]).toMatchObject({ name: 'TEXT', data_type: 'TYPE_STRING', dims: [-1] });
    expect(config.output?.[0]).toMatchObject({ name: 'SCORE', data_type: 'TYPE_FP32' });
    expect(config.dynamic_batching).toMatchObject({ preferred_batch_size: [8, 16], max_queue_delay_microseconds: 1000 });
    expect(config.instance_group?.[0]).toMatchObject({ kind: 'KIND_CPU', count: 1 });
    expect(config.model_warmup?.[0]?.inputs?.TEXT).toMatchObject({ data_type: 'TYPE_STRING', zero_data: true });
  });

  it('the classifier labels match its output and its weights', async () => {
    const labels = (await readFile(join(REPOSITORY, 'classifier/labels.txt'), 'utf8')).trim().split('\n');
    const config = parseModelConfig(await readFile(join(REPOSITORY, 'classifier/config.pbtxt'), 'utf8'));
    expect(config.output?.[0]?.dims).toEqual([labels.length]);
    // weights.npy: a [4, labels] float32 matrix; its header states the shape.
    const npy = await readFile(join(REPOSITORY, 'classifier/1/weights.npy'));
    expect(npy.subarray(0, 6).toString('latin1')).toBe('\x93NUMPY');
    expect(npy.toString('latin1', 10, 10 + npy.readUInt16LE(8))).toContain(`'shape': (4, ${labels.length})`);
  });
});

describe('text_processor with a transformers pipeline', () => {
  it('scores with pipeline("sentiment-analysis") over hf_model_dir when transformers imports', async () => {
    // A stand-in transformers package (PYTHONPATH) and an empty "model directory".
    const modelDir = await mkdtemp(join(tmpdir(), 'hf-model-'));
    try {
      const { stdout } = await run(
        process.execPath,
        ['--import', 'tsx', resolve(REPO_ROOT, 'test/fixtures/hf-sentiment.ts'), modelDir],
        {
          cwd: REPO_ROOT,
          timeout: 60_000,
          env: { ...process.env, PYTHONPATH: resolve(REPO_ROOT, 'test/fixtures/fake-transformers') },
        },
      );
      // The stand-in's answers (POSITIVE 0.875 / NEGATIVE 0.625), not the lexicon's, as
      // positive-class probabilities: 0.875 and 1 - 0.625.
      expect(stdout.trim()).toBe('0.875,0.375');
    } finally {
      await rm(modelDir, { recursive: true, force: true });
    }
  });
});

describe('examples', () => {
  it('quickstart.ts lists the example models', async () => {
    const stdout = await example('quickstart.ts', [REPOSITORY]);
    for (const model of ['add_sub', 'classifier', 'pipeline', 'preprocess', 'text_processor', 'word_stream']) {
      expect(stdout).toContain(`${model} v1 READY`);
    }
    expect(stdout).toContain('TEXT BYTES [-1,-1]');
    expect(stdout).toContain('SCORE FP32 [-1,-1]');
    expect(stdout).toContain('IMAGE UINT8 [-1,-1,-1,3]');
  });

  it('sentiment.ts scores texts and shows Triton batching a burst', async () => {
    const lines = (await example('sentiment.ts')).trim().split('\n');
    const scores = lines.slice(0, 4).map((line) => Number(line.split('  ')[0]));
    expect(lines[0]).toMatch(/ {2}I love this library/);
    // Scores are the probability that the text is positive, in [0, 1].
    for (const score of scores) {
      expect(score).toBeGreaterThanOrEqual(0);
      expect(score).toBeLessThanOrEqual(1);
    }
    expect(scores[0]).toBeGreaterThan(0.75); // love, excellent
    expect(scores[1]).toBeLessThan(0.25); // slow, crashed
    expect(scores[2]).toBeGreaterThan(0.5); // not bad
    expect(scores[3]).toBeGreaterThan(0.5); // works
    const burst = /^burst: (\d+) requests in (\d+) executions/.exec(lines[4] ?? '');
    expect(burst).not.toBeNull();
    expect(Number(burst![1])).toBe(256);
    expect(Number(burst![2])).toBeGreaterThan(0);
    expect(Number(burst![2])).toBeLessThan(256);
  });

  it('sentiment.ts takes texts from the command line', async () => {
    const lines = (await example('sentiment.ts', ['terrible', 'wonderful'])).trim().split('\n');
    expect(lines[0]).toMatch(/^0\.[0-4]\d{2} {2}terrible$/);
    expect(lines[1]).toMatch(/^0\.[5-9]\d{2} {2}wonderful$/);
  });

  it('bound-model.ts scores cleaned texts through an ensemble with a TS step, and shows it batched', async () => {
    const lines = (await example('bound-model.ts')).trim().split('\n');
    expect(lines[0]).toMatch(/^0\.\d{3} {2}<b>I LOVE<\/b> {3}this library$/);
    expect(lines[1]).toMatch(/^0\.\d{3} {2}It {3}was SLOW and it crashed$/);
    expect(Number(lines[0]!.slice(0, 5))).toBeGreaterThan(0.5);
    expect(Number(lines[1]!.slice(0, 5))).toBeLessThan(0.5);
    const batched = /^clean_text: (\d+) requests in (\d+) executions$/.exec(lines[2] ?? '');
    expect(batched).not.toBeNull();
    // The ensemble's request, then the 64 callers.
    expect(Number(batched![1])).toBe(65);
    expect(Number(batched![2])).toBeLessThan(65);
  });

  it('pipeline.ts decodes a JPEG and prints the top-5 labels', async () => {
    const lines = (await example('pipeline.ts')).trim().split('\n');
    expect(lines[0]).toMatch(/sky\.jpg \(320x240\)$/);
    const top5 = lines.slice(1).map((line) => ({ p: Number(line.split('  ')[0]), label: line.split('  ')[1] }));
    expect(top5).toHaveLength(5);
    expect(top5[0]!.label).toBe('blue');
    for (let i = 1; i < 5; i++) expect(top5[i]!.p).toBeLessThanOrEqual(top5[i - 1]!.p);
    expect(top5.reduce((sum, { p }) => sum + p, 0)).toBeLessThanOrEqual(1.0001);

    const orange = (await example('pipeline.ts', [join(EXAMPLES, 'images/orange.jpg')])).trim().split('\n');
    expect(orange[1]).toMatch(/ {2}orange$/);
  });

  it('streaming.ts prints one line per streamed word', async () => {
    const lines = (await example('streaming.ts', ['to be or not', '0'])).trim().split('\n');
    expect(lines[0]).toBe('decoupled: true');
    expect(lines.slice(1, 5).map((line) => line.replace(/ {2}\(\+\d+ ms\)$/, ''))).toEqual([
      'word 0: to',
      'word 1: be',
      'word 2: or',
      'word 3: not',
    ]);
    expect(lines[5]).toBe('stream ended after 4 responses');
  });

  it('cancel-and-timeout.ts stops a stream by timeout and by abort, and the model serves on', async () => {
    const lines = (await example('cancel-and-timeout.ts')).trim().split('\n');
    const timeout = /^timeout: CANCELLED "(.*)" after (\d+) of 10 words$/.exec(lines[0] ?? '');
    expect(timeout, lines[0]).not.toBeNull();
    expect(timeout![1]).toContain('500 ms');
    expect(Number(timeout![2])).toBeLessThan(10);
    const abort = /^abort: CANCELLED \(cause: user pressed stop\) after (\d+) of 10 words$/.exec(lines[1] ?? '');
    expect(abort, lines[1]).not.toBeNull();
    expect(Number(abort![1])).toBeGreaterThanOrEqual(1);
    expect(Number(abort![1])).toBeLessThan(10);
    expect(lines[2]).toBe('afterwards: 10 of 10 words, error: none');
  });

  it('load-from-memory.ts runs a model given as strings and reloads one with a config override', async () => {
    const lines = (await example('load-from-memory.ts')).trim().split('\n');
    expect(lines[0]).toBe('fahrenheit: -40, 32, 98.6, 212');
    expect(lines[1]).toBe('text_processor reloaded: max_batch_size 4, dynamic batching off');
  });

  it('hot-reload.ts serves version 2 after a poll, without a restart', async () => {
    const lines = (await example('hot-reload.ts')).trim().split('\n');
    expect(lines[0]).toBe('version 1: Hello, Ada');
    expect(lines[1]).toBe('version 2: Good day, Ada');
  });
});
