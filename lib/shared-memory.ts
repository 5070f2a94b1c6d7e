/**
 * System shared memory (Triton's system shared memory extension, in-process):
 * a client creates a POSIX shared memory segment (`/dev/shm/<key>` on Linux),
 * registers a range of it as a named region, and requests then name the
 * region in place of an input's data or as the place an output is written.
 * The addon maps each region once (native/core/shared-memory.cc); inputs are
 * handed to Triton where they lie, outputs are written there by Triton.
 */
import { z } from 'zod';
import { TritonError } from './errors.js';
import { native, type NativeServer, type NativeSharedMemorySpan } from './native.js';
import type { DataType } from './data-types.js';

/** Byte counts and offsets: non-negative integers JS numbers hold exactly. */
const byteCount = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const regionName = z.string().min(1).refine((s) => !s.includes('\u0000'), { message: 'must not contain NUL characters' });

/** Schema of `SharedMemory.register`'s options. */
export const sharedMemoryRegisterOptionsSchema = z.strictObject({
  /**
   * The segment's POSIX shared memory key, as given to `shm_open` (e.g.
   * `/input0`; on Linux the file `/dev/shm/input0`).
   */
  key: regionName,
  /** Where the region starts in the segment, in bytes (default 0). */
  offset: byteCount.optional(),
  /** The region's size in bytes; offset + byteSize must lie inside the segment. */
  byteSize: byteCount.min(1),
});

/** Options of `SharedMemory.register` (Triton's `key`, `offset`, `byte_size`). */
export type SharedMemoryRegisterOptions = z.input<typeof sharedMemoryRegisterOptionsSchema>;

/** Schema of a `SharedMemoryRange` (an input's or output's place in a region). */
export const sharedMemoryRangeSchema = z.strictObject({
  /** The registered region's name. */
  region: regionName,
  /** Bytes from the region's start (default 0). */
  offset: byteCount.optional(),
  /** Bytes the tensor occupies (an input) or may occupy (an output). */
  byteSize: byteCount,
});

/**
 * A range of a registered region: Triton's `shared_memory_region`,
 * `shared_memory_offset` and `shared_memory_byte_size` parameters. The range
 * must lie inside the region (offset + byteSize past its end is INVALID_ARG).
 */
export type SharedMemoryRange = z.input<typeof sharedMemoryRangeSchema>;

/**
 * An input whose bytes are in a shared memory region, in place of `data`:
 * `{ datatype, shape, sharedMemory: { region, offset?, byteSize } }`. The
 * bytes are laid out as in Triton's binary tensor format (row-major; BYTES
 * elements each with a 4-byte little-endian length). For fixed-size types
 * `byteSize` must be the tensor's size (elements × element size), else
 * Triton refuses the request with INVALID_ARG.
 */
export interface SharedMemoryInput {
  /** The tensor's data type; it must be the model's. */
  datatype: DataType;
  /** The tensor's shape (with the batch dimension for batching models). */
  shape: readonly number[];
  /** Where its bytes are. */
  sharedMemory: SharedMemoryRange;
}

/**
 * Where an output was written (`InferenceResponse.sharedMemoryOutputs`):
 * its data type, shape, and the range of the region Triton wrote, whose
 * `byteSize` is the bytes actually written (at most the range requested).
 */
export interface SharedMemoryOutput {
  /** The output's name. */
  name: string;
  /** The output's data type. */
  datatype: DataType;
  /** The output's shape. */
  shape: number[];
  /** The region, offset and bytes written. */
  sharedMemory: {
    /** The registered region's name (as given to `server.sharedMemory.register`). */
    region: string;
    /** Where in the region the output starts, in bytes (the requested range's offset, default 0). */
    offset: number;
    /** How many bytes Triton wrote there: the output's size, at most the range's. */
    byteSize: number;
  };
}

/** One registered region, as `SharedMemory.status` reports it (Triton's status JSON, camelCase). */
export interface SharedMemoryRegion {
  /** The region's name. */
  name: string;
  /** The segment's shared memory key. */
  key: string;
  /** Where the region starts in the segment, in bytes. */
  offset: number;
  /** The region's size in bytes. */
  byteSize: number;
}

/** Parses with a zod schema; INVALID_ARG naming each bad field. */
function parse<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => {
    const path = issue.path.join('.');
    return path === '' ? issue.message : `${path}: ${issue.message}`;
  });
  throw new TritonError('INVALID_ARG', `invalid ${what}: ${issues.join('; ')}`);
}

/**
 * The system shared memory regions of an in-process server
 * (`server.sharedMemory`). Regions belong to the server: every thread
 * attached to it sees the same ones, and they are unregistered when the
 * server stops. Unregistering a region that a request still reads or writes
 * removes its name at once; its memory stays mapped until that request is
 * done, so nothing reads or writes unmapped memory.
 */
export class SharedMemory {
  readonly #native: () => NativeServer;

  /** @internal Made by `Server`; `nativeServer` throws UNAVAILABLE once it is stopped. */
  constructor(nativeServer: () => NativeServer) {
    this.#native = nativeServer;
  }

  /**
   * Registers `byteSize` bytes of the segment `key` from `offset` as region
   * `name` (Triton's `RegisterSystemSharedMemory`). Errors, as Triton's:
   * ALREADY_EXISTS for a name in use, INTERNAL when the segment cannot be
   * opened (`Unable to open shared memory region: '<key>'`), INVALID_ARG
   * when the range does not lie inside the segment.
   */
  async register(name: string, options: SharedMemoryRegisterOptions): Promise<void> {
    const checkedName = parse(regionName, name, 'shared memory region name');
    const { key, offset, byteSize } = parse(sharedMemoryRegisterOptionsSchema, options, 'shared memory register options');
    this.#native().sharedMemory('register', checkedName, key, offset ?? 0, byteSize);
  }

  /**
   * Unregisters region `name`, or every region when no name is given. A
   * name that is not registered is not an error (as Triton).
   */
  async unregister(name?: string): Promise<void> {
    if (name === undefined) {
      this.#native().sharedMemory('unregister');
      return;
    }
    this.#native().sharedMemory('unregister', parse(regionName, name, 'shared memory region name'));
  }

  /**
   * The registered regions, or region `name` alone (NOT_FOUND when it is
   * not registered: `Unable to find system shared memory region: '<name>'`).
   */
  async status(name?: string): Promise<SharedMemoryRegion[]> {
    if (name === undefined) return this.#native().sharedMemory('status');
    return this.#native().sharedMemory('status', parse(regionName, name, 'shared memory region name'));
  }
}

/**
 * Whether an input value names a shared memory region
 * (`{ sharedMemory: ... }`) rather than carrying data.
 */
export function isSharedMemoryInput(value: unknown): value is SharedMemoryInput {
  return typeof value === 'object' && value !== null && !ArrayBuffer.isView(value) && 'sharedMemory' in value;
}

/** A checked range as the addon takes it: [region, offset, byteSize]. */
export function sharedMemorySpan(range: unknown, what: string): NativeSharedMemorySpan {
  const { region, offset, byteSize } = parse(sharedMemoryRangeSchema, range, `${what}: sharedMemory`);
  return [region, offset ?? 0, byteSize];
}

/** Shared memory mappings not yet unmapped, process-wide (for tests and leak hunting). */
export function liveSharedMemoryMappings(): number {
  return native.liveSharedMemoryMappings();
}
