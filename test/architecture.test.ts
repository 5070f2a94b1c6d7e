// The rooms of docs/architecture.md against the tree: which folder of
// native/ may include which, and the doc's room tables naming exactly the
// files of native/ and of lib/.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');
const NATIVE = join(ROOT, 'native');

/** What each room may include besides itself; '' is native/ itself (the module's entry and the JS server object). */
const MAY_INCLUDE: Record<string, string[]> = {
  core: [],
  observability: ['core'],
  inference: ['core', 'observability'],
  backend: ['core'],
  // The front ends are handed the JS server object (server-wrap.h) and reach Triton through the core and the engine.
  kserve: ['core', 'inference', 'server-wrap.h'],
  client: ['core'],
  '': ['core', 'observability', 'inference', 'backend', 'kserve', 'client'],
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : /\.(cc|h|map)$/.test(entry.name) ? [relative(NATIVE, join(dir, entry.name))] : [],
  );
}
const roomOf = (file: string): string => (file.includes('/') ? file.slice(0, file.indexOf('/')) : '');

/** Includes that leave their room for one it may not use, or name no file of native/. */
function includeViolations(files: string[], read: (file: string) => string): string[] {
  const wrong: string[] = [];
  for (const file of files) {
    for (const match of read(file).matchAll(/^#include "([^"]+)"/gm)) {
      const target = relative(NATIVE, resolve(NATIVE, dirname(file), match[1]!));
      if (!files.includes(target)) {
        wrong.push(`${file}: ${match[1]} is not a file of native/`);
        continue;
      }
      const from = roomOf(file);
      const to = roomOf(target);
      if (to === from) continue;
      const allowed = MAY_INCLUDE[from]!;
      if (!allowed.includes(to) && !(to === '' && allowed.includes(target))) wrong.push(`${file} includes ${target}`);
    }
  }
  return wrong;
}

describe('native/ rooms', () => {
  const files = sources(NATIVE);

  it('every file is in a room', () => {
    expect(files.length).toBeGreaterThan(40);
    for (const file of files) expect(Object.keys(MAY_INCLUDE), file).toContain(roomOf(file));
  });

  it('every include stays in its room or goes to one the room may use', () => {
    expect(includeViolations(files, (file) => readFileSync(join(NATIVE, file), 'utf8'))).toEqual([]);
  });

  it('reports a room that reaches up, and an include of no file', () => {
    const fake: Record<string, string> = {
      'core/server.cc': '#include "../inference/inference.h"\n#include "server.h"\n',
      'kserve/http-frontend.cc': '#include "../backend/backend.h"\n#include "../server-wrap.h"\n#include "gone.h"\n',
    };
    const tree = [...Object.keys(fake), 'core/server.h', 'inference/inference.h', 'backend/backend.h', 'server-wrap.h'];
    expect(includeViolations(tree, (file) => fake[file] ?? '')).toEqual([
      'core/server.cc includes inference/inference.h',
      'kserve/http-frontend.cc includes backend/backend.h',
      'kserve/http-frontend.cc: gone.h is not a file of native/',
    ]);
  });

  it("docs/architecture.md's room table names exactly the files of native/", () => {
    const doc = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## The rooms of native/'), doc.indexOf('## ', doc.indexOf('## The rooms of native/') + 5));
    const named = new Set([...section.matchAll(/`((?:[a-z]+\/)?[A-Za-z0-9_-]+\.(?:cc|h|map))`/g)].map((m) => m[1]!));
    expect([...named].sort()).toEqual([...files].sort());
  });
});

describe('lib/ rooms', () => {
  it("docs/architecture.md's room table names every file at the top of lib/ and every folder", () => {
    const doc = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
    const start = doc.indexOf('## The rooms of lib/');
    const rows = doc.slice(start, doc.indexOf('\n## ', start + 5)).split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| room'));
    // The second cell of each row: its files, or its folder.
    const cells = rows.map((row) => row.split(' | ')[1] ?? '');
    const named = new Set(cells.flatMap((cell) => [...cell.matchAll(/`([a-z0-9-]+(?:\.ts|\/))`/g)].map((m) => m[1]!)));
    named.delete('lib/'); // a row's words, not one of its files
    const lib = join(ROOT, 'lib');
    const tree = readdirSync(lib, { withFileTypes: true }).map((entry) => (entry.isDirectory() ? `${entry.name}/` : entry.name)).filter((name) => name.endsWith('/') || name.endsWith('.ts'));
    expect([...named].sort()).toEqual(tree.sort());
  });
});
