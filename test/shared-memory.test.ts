/**
 * System shared memory in-process: regions registered with the server,
 * inputs read from them and outputs written into them, and the hostile
 * cases (wrong key, ranges past the segment or the region, unknown regions,
 * unregistering or unlinking while in use), each with Triton's error and
 * nothing left live.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { liveObjects, liveSharedMemoryMappings, type Server } from '../lib/index.js';
import { collectGarbage, expectNoRequestsLive, rejection, startServer } from './helpers.js';
import { Segment, float32Bytes } from './shared-memory-segments.js';

let server: Server;
const segments: Segment[] = [];

function segment(byteSize: number): Segment {
  const made = new Segment(byteSize, 'inproc');
  segments.push(made);
  return made;
}

beforeAll(async () => {
  server = await startServer({ startupModels: ['identity_fp32', 'identity_bytes', 'slow'] });
});
afterEach(async () => {
  await server.sharedMemory.unregister();
  for (const made of segments.splice(0)) made.unlink();
  await expectNoRequestsLive();
  await collectGarbage();
  expect(liveObjects()).toMatchObject({ requests: 0, responses: 0, inputReferences: 0, pending: 0 });
  await vi.waitFor(() => expect(liveSharedMemoryMappings()).toBe(0), { timeout: 5_000 });
});
afterAll(async () => {
  await server.stop();
});

const values = Array.from({ length: 16 }, (_, i) => i * 1.5 - 3);

describe('registering regions', () => {
  it('registers, reports and unregisters regions as Triton does', async () => {
    const a = segment(4096);
    const b = segment(8192);
    await server.sharedMemory.register('a', { key: a.key, byteSize: 4096 });
    await server.sharedMemory.register('b', { key: b.key, offset: 100, byteSize: 1000 });
    expect(liveSharedMemoryMappings()).toBe(2);
    expect(await server.sharedMemory.status()).toEqual([
      { name: 'a', key: a.key, offset: 0, byteSize: 4096 },
      { name: 'b', key: b.key, offset: 100, byteSize: 1000 },
    ]);
    expect(await server.sharedMemory.status('b')).toEqual([{ name: 'b', key: b.key, offset: 100, byteSize: 1000 }]);
    await server.sharedMemory.unregister('a');
    expect(liveSharedMemoryMappings()).toBe(1);
    expect((await server.sharedMemory.status()).map((r) => r.name)).toEqual(['b']);
    // Unknown names are not an error to unregister (as Triton).
    await server.sharedMemory.unregister('a');
    await server.sharedMemory.unregister();
    expect(await server.sharedMemory.status()).toEqual([]);
    expect(liveSharedMemoryMappings()).toBe(0);
  });

  it('refuses a duplicate name, a wrong key, a range past the segment and an unknown status', async () => {
    const seg = segment(1024);
    await server.sharedMemory.register('r', { key: seg.key, byteSize: 1024 });

    let error = await rejection(server.sharedMemory.register('r', { key: seg.key, byteSize: 16 }));
    expect(error.code).toBe('ALREADY_EXISTS');
    expect(error.message).toBe("shared memory region 'r' already in manager");

    error = await rejection(server.sharedMemory.register('other', { key: '/tsn-test-no-such-segment', byteSize: 16 }));
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toBe("Unable to open shared memory region: '/tsn-test-no-such-segment'");

    error = await rejection(server.sharedMemory.register('other', { key: seg.key, offset: 1000, byteSize: 25 }));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe("failed to register shared memory region 'other': invalid args");

    error = await rejection(server.sharedMemory.register('other', { key: seg.key, offset: 2048, byteSize: 1 }));
    expect(error.code).toBe('INVALID_ARG');

    error = await rejection(server.sharedMemory.register('other', { key: 'triton_python_backend_shm_region_1', byteSize: 1 }));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain('reserved prefix');

    error = await rejection(server.sharedMemory.status('other'));
    expect(error.code).toBe('NOT_FOUND');
    expect(error.message).toBe("Unable to find system shared memory region: 'other'");
    expect(liveSharedMemoryMappings()).toBe(1);
  });

  it('validates its arguments', async () => {
    const seg = segment(64);
    for (const options of [{ key: seg.key, byteSize: 0 }, { key: seg.key, byteSize: -1 }, { key: seg.key, byteSize: 1.5 }, { key: '', byteSize: 8 }]) {
      const error = await rejection(server.sharedMemory.register('v', options));
      expect(error.code).toBe('INVALID_ARG');
      expect(error.message).toMatch(/^invalid shared memory register options: (byteSize|key): /);
    }
    const unknown = await rejection(server.sharedMemory.register('v', { key: seg.key, byteSize: 8, size: 8 } as never));
    expect(unknown.message).toContain('size');
    expect((await rejection(server.sharedMemory.register('', { key: seg.key, byteSize: 8 }))).code).toBe('INVALID_ARG');
    expect(liveSharedMemoryMappings()).toBe(0);
  });
});

describe('inference through shared memory', () => {
  it('reads an input from a region and writes the output into one', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    seg.write(1024, new Uint8Array(64).fill(0xee));
    await server.sharedMemory.register('input', { key: seg.key, byteSize: 64 });
    await server.sharedMemory.register('output', { key: seg.key, offset: 1024, byteSize: 1024 });
    const response = await server.model('identity_fp32').infer({
      inputs: { INPUT0: { datatype: 'FP32', shape: [1, 16], sharedMemory: { region: 'input', byteSize: 64 } } },
      outputs: { OUTPUT0: { sharedMemory: { region: 'output', byteSize: 1024 } } },
    });
    expect(response.outputs).toEqual({});
    expect(response.sharedMemoryOutputs).toEqual({
      OUTPUT0: { name: 'OUTPUT0', datatype: 'FP32', shape: [1, 16], sharedMemory: { region: 'output', offset: 0, byteSize: 64 } },
    });
    expect(seg.readFloat32(1024, 16)).toEqual(values);
    // Nothing past the output was touched.
    expect(Array.from(seg.read(1088, 4))).toEqual([0, 0, 0, 0]);
  });

  it('uses offsets inside regions, regions at unaligned offsets, and mixes with ordinary tensors', async () => {
    const seg = segment(10_000);
    seg.write(333 + 40, float32Bytes(values));
    await server.sharedMemory.register('odd', { key: seg.key, offset: 333, byteSize: 5000 });
    const response = await server.model('identity_fp32').infer({
      inputs: { INPUT0: { datatype: 'FP32', shape: [1, 16], sharedMemory: { region: 'odd', offset: 40, byteSize: 64 } } },
      outputs: { OUTPUT0: { sharedMemory: { region: 'odd', offset: 2000, byteSize: 64 } } },
    });
    expect(response.sharedMemoryOutputs?.OUTPUT0?.sharedMemory).toEqual({ region: 'odd', offset: 2000, byteSize: 64 });
    expect(seg.readFloat32(333 + 2000, 16)).toEqual(values);
    // The same input from the region, the output returned as usual.
    const plain = await server.model('identity_fp32').infer({
      inputs: { INPUT0: { datatype: 'FP32', shape: [1, 16], sharedMemory: { region: 'odd', offset: 40, byteSize: 64 } } },
    });
    expect(Array.from(plain.outputs.OUTPUT0!.data as Float32Array)).toEqual(values);
    expect(plain.sharedMemoryOutputs).toBeUndefined();
  });

  it('carries BYTES tensors in their serialized form', async () => {
    const seg = segment(256);
    const serialized = Buffer.concat([Buffer.from([2, 0, 0, 0]), Buffer.from('hi'), Buffer.from([3, 0, 0, 0]), Buffer.from('abc')]);
    seg.write(0, serialized);
    await server.sharedMemory.register('bytes', { key: seg.key, byteSize: 256 });
    const response = await server.model('identity_bytes').infer({
      inputs: { INPUT0: { datatype: 'BYTES', shape: [1, 2], sharedMemory: { region: 'bytes', byteSize: serialized.length } } },
      outputs: { OUTPUT0: { sharedMemory: { region: 'bytes', offset: 128, byteSize: 128 } } },
    });
    expect(response.sharedMemoryOutputs?.OUTPUT0?.sharedMemory.byteSize).toBe(serialized.length);
    expect(Buffer.from(seg.read(128, serialized.length))).toEqual(serialized);
  });

  it('refuses unknown regions and ranges past the region, with Triton’s errors', async () => {
    const seg = segment(4096);
    await server.sharedMemory.register('small', { key: seg.key, byteSize: 64 });
    const model = server.model('identity_fp32');
    const input = (sharedMemory: { region: string; offset?: number; byteSize: number }) => ({
      INPUT0: { datatype: 'FP32' as const, shape: [1, 16], sharedMemory },
    });

    let error = await rejection(model.infer({ inputs: input({ region: 'nowhere', byteSize: 64 }) }));
    expect(error.code).toBe('NOT_FOUND');
    expect(error.message).toBe("Unable to find shared memory region: 'nowhere'");

    error = await rejection(model.infer({ inputs: input({ region: 'small', offset: 4, byteSize: 64 }) }));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe("Invalid offset + byte size for shared memory region: 'small'");

    error = await rejection(model.infer({ inputs: input({ region: 'small', offset: 64, byteSize: 0 }) }));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe("Invalid offset for shared memory region: 'small'");

    error = await rejection(
      model.infer({
        inputs: { INPUT0: { shape: [1, 16], data: new Float32Array(16) } },
        outputs: { OUTPUT0: { sharedMemory: { region: 'small', offset: 32, byteSize: 64 } } },
      }),
    );
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toBe("Invalid offset + byte size for shared memory region: 'small'");

    error = await rejection(model.infer({ inputs: input({ region: 'small', byteSize: -1 }) }));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain("input 'INPUT0': sharedMemory: byteSize");

    error = await rejection(
      model.infer({ inputs: { INPUT0: { datatype: 'INT32' as never, shape: [1, 16], sharedMemory: { region: 'small', byteSize: 64 } } } }),
    );
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain('the model expects FP32');
  });

  it('refuses a byte size that does not match the tensor, and an output range too small', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    await server.sharedMemory.register('r', { key: seg.key, byteSize: 4096 });
    const model = server.model('identity_fp32');
    let error = await rejection(
      model.infer({ inputs: { INPUT0: { datatype: 'FP32', shape: [1, 16], sharedMemory: { region: 'r', byteSize: 32 } } } }),
    );
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toContain("input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. Expected 64, got 32");

    error = await rejection(
      model.infer({
        inputs: { INPUT0: { datatype: 'FP32', shape: [1, 16], sharedMemory: { region: 'r', byteSize: 64 } } },
        outputs: { OUTPUT0: { sharedMemory: { region: 'r', offset: 2048, byteSize: 32 } } },
      }),
    );
    expect(error.code).toBe('INTERNAL');
    expect(error.message).toContain(
      "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results",
    );
    // Not written.
    expect(Array.from(seg.read(2048, 4))).toEqual([0, 0, 0, 0]);
  });

  it('refuses shared memory with data or classification on the same output', async () => {
    const error = await rejection(
      server.model('identity_fp32').infer({
        inputs: { INPUT0: { shape: [1, 16], data: new Float32Array(16) } },
        outputs: { OUTPUT0: { data: new Float32Array(16), sharedMemory: { region: 'r', byteSize: 64 } } },
      }),
    );
    expect(error.code).toBe('INVALID_ARG');
  });
});

describe('lifetimes', () => {
  it('keeps a region mapped for a request in flight when it is unregistered', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    await server.sharedMemory.register('busy', { key: seg.key, byteSize: 4096 });
    const running = server.model('slow').infer({
      inputs: {
        INPUT0: { datatype: 'FP32', shape: [16], sharedMemory: { region: 'busy', byteSize: 64 } },
        DELAY_MS: new Uint32Array([300]),
      },
      outputs: { OUTPUT0: { sharedMemory: { region: 'busy', offset: 512, byteSize: 64 } } },
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await server.sharedMemory.unregister('busy');
    // The name is gone at once; the memory stays until the request is done.
    expect(await server.sharedMemory.status()).toEqual([]);
    expect(liveSharedMemoryMappings()).toBe(1);
    const error = await rejection(
      server.model('identity_fp32').infer({
        inputs: { INPUT0: { datatype: 'FP32', shape: [1, 16], sharedMemory: { region: 'busy', byteSize: 64 } } },
      }),
    );
    expect(error.code).toBe('NOT_FOUND');
    const response = await running;
    expect(response.sharedMemoryOutputs?.OUTPUT0?.sharedMemory.byteSize).toBe(64);
    expect(seg.readFloat32(512, 16)).toEqual(values);
    await vi.waitFor(() => expect(liveSharedMemoryMappings()).toBe(0), { timeout: 5_000 });
    // The name can be registered again.
    await server.sharedMemory.register('busy', { key: seg.key, byteSize: 64 });
  });

  it('survives a client unlinking its segment while it is registered', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    await server.sharedMemory.register('gone', { key: seg.key, byteSize: 4096 });
    seg.unlink();
    const response = await server.model('identity_fp32').infer({
      inputs: { INPUT0: { datatype: 'FP32', shape: [1, 16], sharedMemory: { region: 'gone', byteSize: 64 } } },
      outputs: { OUTPUT0: { sharedMemory: { region: 'gone', offset: 64, byteSize: 64 } } },
    });
    expect(response.sharedMemoryOutputs?.OUTPUT0?.shape).toEqual([1, 16]);
    expect((await server.sharedMemory.status()).map((r) => r.name)).toEqual(['gone']);
    // A new registration of the unlinked key fails as a missing key does.
    const error = await rejection(server.sharedMemory.register('again', { key: seg.key, byteSize: 64 }));
    expect(error.code).toBe('INTERNAL');
    await server.sharedMemory.unregister('gone');
    // The request held the mapping until Triton released it, which may come just after its response.
    await vi.waitFor(() => expect(liveSharedMemoryMappings()).toBe(0), { timeout: 5_000 });
  });

  it('unregisters every region when the server stops', async () => {
    const own = await startServer({ startupModels: ['identity_fp32'] });
    const seg = segment(4096);
    await own.sharedMemory.register('x', { key: seg.key, byteSize: 4096 });
    await own.sharedMemory.register('y', { key: seg.key, offset: 64, byteSize: 64 });
    expect(liveSharedMemoryMappings()).toBe(2);
    await own.stop();
    expect(liveSharedMemoryMappings()).toBe(0);
    const error = await rejection(own.sharedMemory.register('x', { key: seg.key, byteSize: 64 }));
    expect(error.code).toBe('UNAVAILABLE');
    expect((await rejection(own.sharedMemory.status())).code).toBe('UNAVAILABLE');
  });
});
