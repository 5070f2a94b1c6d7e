/**
 * POSIX shared memory segments for tests. Node has no shm_open, but on Linux
 * the segment with key `/name` is the file `/dev/shm/name`: creating,
 * reading, writing and unlinking that file is what a client's shm_open,
 * mmap and shm_unlink do.
 */
import { closeSync, existsSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';

let made = 0;

/** One segment: its key, and its bytes read and written through the file. */
export class Segment {
  readonly key: string;
  readonly path: string;

  constructor(readonly byteSize: number, label = 'seg') {
    const name = `tsn-test-${process.pid}-${label}-${made++}`;
    this.key = `/${name}`;
    this.path = `/dev/shm/${name}`;
    const fd = openSync(this.path, 'w+', 0o600);
    try {
      ftruncateSync(fd, byteSize);
    } finally {
      closeSync(fd);
    }
  }

  write(offset: number, bytes: ArrayBufferView): void {
    const fd = openSync(this.path, 'r+');
    try {
      writeSync(fd, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), 0, bytes.byteLength, offset);
    } finally {
      closeSync(fd);
    }
  }

  read(offset: number, length: number): Uint8Array {
    const out = new Uint8Array(length);
    const fd = openSync(this.path, 'r');
    try {
      readSync(fd, out, 0, length, offset);
    } finally {
      closeSync(fd);
    }
    return out;
  }

  readFloat32(offset: number, count: number): number[] {
    const bytes = this.read(offset, count * 4);
    return Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, count));
  }

  /** shm_unlink: the name goes; memory mapped by others stays. */
  unlink(): void {
    if (existsSync(this.path)) unlinkSync(this.path);
  }
}

/** Float32 bytes of `values`. */
export function float32Bytes(values: number[]): Uint8Array {
  return new Uint8Array(Float32Array.from(values).buffer);
}
