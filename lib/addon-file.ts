/**
 * Finds and loads the addon's file: the prebuild or local build, or the
 * build `TRITONSERVER_NODE_ADDON` names (a sanitizer or debug build).
 * Nothing runs at import: `lib/native.ts` loads it at its own import and
 * sets it up; the client's native transport loads it when a client
 * connects, so importing `tritonserver-node/client` still loads no addon.
 */
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('tritonserver-node: package.json not found');
    dir = parent;
  }
  return dir;
}

/** The addon's exports (the same object every time: Node caches the module); throws where it does not load. */
export function loadAddonFile(): unknown {
  const require = createRequire(import.meta.url);
  const override = process.env.TRITONSERVER_NODE_ADDON;
  if (override) return require(override) as unknown;
  const load = require('node-gyp-build') as (dir: string) => unknown;
  return load(packageRoot());
}

const exportsFound = new Map<string, unknown>();

/** One export of the addon, or why it is not here (the addon does not load, or lacks it: `missing`). */
export function addonExport<T>(name: string, missing: string): T | string {
  if (!exportsFound.has(name)) {
    let found: unknown;
    try {
      found = (loadAddonFile() as Record<string, unknown>)[name] ?? missing;
    } catch (error) {
      found = `the addon does not load: ${(error as Error).message}`;
    }
    exportsFound.set(name, found);
  }
  return exportsFound.get(name) as T | string;
}
