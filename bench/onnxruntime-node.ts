/**
 * onnxruntime-node, the in-process ONNX Runtime a Node developer picks today,
 * for side-by-side checks and benchmarks. It is about 110 MB, so it is no
 * dependency of this package: `npm run bench:models` installs it on demand
 * into a cache folder, and test/framework-backends.test.ts uses it when it is
 * there. The version matches the ONNX Runtime library that Triton's ONNX
 * Runtime backend is built against here (docs/development.md), so both run
 * the same kernels on the same `.onnx` file.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const ONNXRUNTIME_NODE_VERSION = '1.30.0';

/** The parts of onnxruntime-node's API used here. */
export interface OrtTensor {
  readonly data: Float32Array;
  readonly dims: readonly number[];
}
export interface OrtSession {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release(): Promise<void>;
}
export interface OnnxRuntimeNode {
  Tensor: new (type: 'float32', data: Float32Array, dims: readonly number[]) => OrtTensor;
  InferenceSession: {
    create(
      path: string,
      options?: { intraOpNumThreads?: number; interOpNumThreads?: number; executionMode?: 'sequential' | 'parallel' },
    ): Promise<OrtSession>;
  };
}

/** Where it is installed: `ONNXRUNTIME_NODE_DIR`, else a folder in ~/.cache/tritonserver-node. */
export function onnxRuntimeNodePrefix(): string {
  return (
    process.env.ONNXRUNTIME_NODE_DIR ?? join(homedir(), '.cache', 'tritonserver-node', `onnxruntime-node-${ONNXRUNTIME_NODE_VERSION}`)
  );
}

function packageDir(prefix: string): string {
  return join(prefix, 'node_modules', 'onnxruntime-node');
}

/**
 * onnxruntime-node from the cache folder; with `install`, `npm install`s it
 * there first when missing (its install script, which fetches GPU add-ons,
 * is skipped: the CPU library is in the package). Undefined when absent.
 */
export function loadOnnxRuntimeNode(options: { install?: boolean } = {}): OnnxRuntimeNode | undefined {
  const prefix = onnxRuntimeNodePrefix();
  if (!existsSync(packageDir(prefix)) && options.install) {
    console.error(`installing onnxruntime-node@${ONNXRUNTIME_NODE_VERSION} into ${prefix} ...`);
    const npm = spawnSync(
      'npm',
      ['install', '--prefix', prefix, '--no-save', '--ignore-scripts', '--no-audit', '--no-fund', `onnxruntime-node@${ONNXRUNTIME_NODE_VERSION}`],
      { stdio: 'inherit' },
    );
    if (npm.status !== 0) throw new Error(`npm install onnxruntime-node failed (exit ${npm.status})`);
  }
  if (!existsSync(packageDir(prefix))) return undefined;
  return createRequire(join(prefix, 'package.json'))('onnxruntime-node') as OnnxRuntimeNode;
}
