import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followTritonLog, parseTritonLogLine, type Server, type TritonLogRecord } from '../lib/index.js';
import { startServer } from './helpers.js';

// Triton's logger is process-wide; this file's process logs to its own file.
let dir: string;
let logFile: string;
let server: Server;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tritonserver-node-log-'));
  logFile = join(dir, 'triton.log');
  server = await startServer({ log: { file: logFile, info: true, warn: true, error: true } });
});

afterAll(async () => {
  await server.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('Triton log lines', () => {
  it('parses the default format', () => {
    const now = new Date(Date.UTC(2026, 11, 1, 9, 0, 0));
    expect(parseTritonLogLine('I1201 08:42:27.123456 1234 server.cc:123] "successfully loaded \'m\'"', now)).toEqual({
      level: 'info',
      msg: "successfully loaded 'm'",
      file: 'server.cc',
      line: 123,
      time: Date.UTC(2026, 11, 1, 8, 42, 27, 123),
      pid: 1234,
    });
    expect(parseTritonLogLine('W1130 23:59:59.000999 7 model_lifecycle.cc:9] plain text', now)).toMatchObject({
      level: 'warn',
      msg: 'plain text',
      time: Date.UTC(2026, 10, 30, 23, 59, 59, 0),
    });
    expect(parseTritonLogLine('+------+--------+')).toBeUndefined();
  });

  it('parses the ISO8601 format', () => {
    expect(parseTritonLogLine('2026-12-01T08:42:27Z E 99 backend.cc:5] "failed: \\"x\\""')).toEqual({
      level: 'error',
      msg: 'failed: "x"',
      file: 'backend.cc',
      line: 5,
      time: Date.UTC(2026, 11, 1, 8, 42, 27),
      pid: 99,
    });
  });
});

describe('server.log', () => {
  it('writes through Triton’s logger, in Triton’s format', async () => {
    expect(server.logEnabled('info')).toBe(true);
    expect(server.logEnabled('verbose')).toBe(false);
    const marker = `hello from node ${process.pid}`;
    server.log('warn', marker, { file: 'app.ts', line: 42 });
    server.log('verbose', `${marker} (verbose, off)`);
    const lines = (await readFile(logFile, 'utf8')).split('\n');
    const written = lines.filter((line) => line.includes(marker));
    expect(written).toHaveLength(1);
    expect(parseTritonLogLine(written[0]!)).toMatchObject({ level: 'warn', msg: marker, file: 'app.ts', line: 42, pid: process.pid });
    expect(() => server.log('loud' as 'info', 'x')).toThrow(expect.objectContaining({ code: 'INVALID_ARG' }));
  });

  it('routes Triton’s lines to a pino-style logger without losing the last ones', async () => {
    const received: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
    const logger = {
      info: (obj: object, msg: string) => received.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
      warn: (obj: object, msg: string) => received.push({ level: 'warn', obj: obj as Record<string, unknown>, msg }),
      error: (obj: object, msg: string) => received.push({ level: 'error', obj: obj as Record<string, unknown>, msg }),
    };
    const follower = await followTritonLog(logFile, logger, { fromEnd: true, intervalMs: 10_000 });
    await server.loadModel('identity_fp32');
    for (let i = 0; i < 50; i++) server.log('error', `line ${i}`, { file: 'routed.ts', line: i });
    // Nothing was read yet (the interval is long): close() reads to the end.
    await follower.close();
    const routed = received.filter((r) => r.obj.file === 'routed.ts');
    expect(routed.map((r) => r.msg)).toEqual(Array.from({ length: 50 }, (_, i) => `line ${i}`));
    expect(routed.every((r) => r.level === 'error' && r.obj.source === 'triton' && typeof r.obj.time === 'number')).toBe(true);
    // Triton's own records came too (loading a model logs at info level).
    expect(received.some((r) => r.level === 'info' && r.msg.includes('identity_fp32'))).toBe(true);
  });

  it('feeds a real pino logger', async () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter((line) => line !== ''));
        done();
      },
    });
    const follower = await followTritonLog(logFile, pino({ base: undefined }, destination), { fromEnd: true, intervalMs: 10_000 });
    server.log('warn', 'to pino', { file: 'pino.ts', line: 7 });
    await follower.close();
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((r) => r.file === 'pino.ts');
    // pino's own level numbers (warn = 40); Triton's time (ms since the epoch), file and line as fields.
    expect(records).toMatchObject([{ level: 40, msg: 'to pino', file: 'pino.ts', line: 7, source: 'triton', pid: process.pid }]);
    expect(typeof records[0]!.time).toBe('number');
  });

  it('hands records to a function sink as they are written', async () => {
    const records: TritonLogRecord[] = [];
    const follower = await followTritonLog(logFile, (record) => records.push(record), { fromEnd: true, intervalMs: 10_000 });
    server.log('info', 'flushed now', { file: 'sink.ts', line: 1 });
    await follower.flush();
    expect(records.filter((r) => r.file === 'sink.ts')).toMatchObject([{ level: 'info', msg: 'flushed now', line: 1 }]);
    await follower.close();
    await follower.close();
  });
});

describe('the ISO8601 format', () => {
  // Last in this file: the format is process-wide and stays.
  it('reads the lines Triton writes in it', async () => {
    const iso = await startServer({ log: { file: logFile, format: 'iso8601' } });
    try {
      const before = Date.now();
      iso.log('error', 'iso marker', { file: 'iso.ts', line: 9 });
      const line = (await readFile(logFile, 'utf8')).split('\n').find((text) => text.includes('iso marker'));
      expect(line).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z E \d+ iso\.ts:9\] "iso marker"$/);
      const record = parseTritonLogLine(line!);
      expect(record).toMatchObject({ level: 'error', msg: 'iso marker', file: 'iso.ts', line: 9, pid: process.pid });
      // Whole seconds: the record's time is at most a second before the call.
      expect(record!.time).toBeGreaterThan(before - 1000);
      expect(record!.time).toBeLessThanOrEqual(Date.now());
    } finally {
      await iso.stop();
    }
  });
});
