import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { MODELS } from './helpers.js';

const run = promisify(execFile);

describe('@grpc/* are optional', () => {
  it('HTTP works without them; gRPC then says what to install', async () => {
    const { stdout } = await run(process.execPath, [resolve(import.meta.dirname, 'fixtures/kserve-without-grpc.mjs'), MODELS]);
    const result = JSON.parse(stdout.trim().split('\n').pop() ?? '{}');
    expect(result.httpStatus).toBe(200);
    expect(result.grpc).toEqual({
      code: 'UNAVAILABLE',
      message: expect.stringContaining('npm install @grpc/proto-loader'),
    });
  });
});
