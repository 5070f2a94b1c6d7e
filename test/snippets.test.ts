// Every ```ts block of README.md and docs/*.md is type-checked against the
// package's types, and the blocks marked `<!-- snippet: run -->` run on the
// library the suite uses (the test core unless TRITONSERVER_LIBRARY is set).
//
// Markers (an HTML comment on the line before the block):
//   <!-- snippet: run -->             a whole program: type-checked and run (cwd: the repository root)
//   <!-- snippet: typecheck-only -->  type-checked only (needs a GPU, Docker, a fleet, or is a fragment)
//   <!-- snippet: skip -->            not checked at all (not a TypeScript program)
// Unmarked blocks are type-checked only. Fragments may use the names declared
// in test/fixtures/snippet-prelude.d.ts (`server`, `model`, `inputs`, …).
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);

type Mode = 'run' | 'typecheck-only' | 'skip';
interface Snippet {
  file: string; // relative to the repository
  line: number; // of the opening fence
  mode: Mode;
  code: string;
  id: string;
}

const MARKER = /^<!--\s*snippet:\s*(run|typecheck-only|skip)\s*-->$/;

/** Guides whose blocks may all be type-check only, and why. */
const NOTHING_TO_RUN: Record<string, string> = {
  'docs/shared-memory.md': 'written by the shared-memory work; its author marks what runs',
};

export function extractSnippets(file: string, text: string): Snippet[] {
  const lines = text.split('\n');
  const snippets: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(ts|typescript)\s*$/.exec(lines[i]!);
    if (!fence) continue;
    let previous = i - 1;
    while (previous >= 0 && lines[previous]!.trim() === '') previous--;
    const marker = previous >= 0 ? MARKER.exec(lines[previous]!.trim()) : null;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    const id = `${file.replace(/[^a-zA-Z0-9]+/g, '_')}_L${start + 1}`;
    snippets.push({ file, line: start + 1, mode: (marker?.[1] as Mode | undefined) ?? 'typecheck-only', code: body.join('\n'), id });
  }
  return snippets;
}

async function documents(): Promise<string[]> {
  const docs = (await readdir(join(REPO_ROOT, 'docs'))).filter((name) => name.endsWith('.md')).sort();
  return ['README.md', ...docs.map((name) => `docs/${name}`)];
}

let dir = '';
let snippets: Snippet[] = [];

beforeAll(async () => {
  for (const file of await documents()) {
    snippets.push(...extractSnippets(file, await readFile(join(REPO_ROOT, file), 'utf8')));
  }
  // Inside the repository (git-ignored), so snippets' own imports (express,
  // prom-client, …) resolve from node_modules as a user's would.
  dir = await mkdtemp(join(REPO_ROOT, '.vitest-snippets-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('documentation snippets', () => {
  it('finds the blocks, each with a known marker', () => {
    expect(snippets.length).toBeGreaterThan(40);
    expect(snippets.filter((s) => s.file === 'README.md' && s.mode === 'run')).not.toHaveLength(0);
  });

  it('type-checks every TypeScript block against the package types', async () => {
    const files: string[] = [];
    for (const snippet of snippets) {
      if (snippet.mode === 'skip') continue;
      const name = `${snippet.id}.mts`;
      // `export {}` makes each block a module of its own: its declarations
      // shadow the prelude's instead of clashing with them.
      await writeFile(join(dir, name), `export {};\n// ${snippet.file}:${snippet.line}\n${snippet.code}\n`);
      files.push(name);
    }
    await copyFile(join(REPO_ROOT, 'test/fixtures/snippet-prelude.d.ts'), join(dir, 'snippet-prelude.d.ts'));
    const lib = (path: string) => [relative(dir, join(REPO_ROOT, path))];
    const tsconfig = {
      compilerOptions: {
        target: 'ES2022',
        lib: ['ES2022', 'ESNext.Disposable'],
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        // What a user's strict project has; the package's own extra checks
        // (noUncheckedIndexedAccess, noUnusedLocals) are not asked of readers.
        strict: true,
        esModuleInterop: true,
        skipLibCheck: true,
        noEmit: true,
        types: ['node'],
        typeRoots: [relative(dir, join(REPO_ROOT, 'node_modules/@types'))],
        paths: {
          'tritonserver-node': lib('lib/index.ts'),
          'tritonserver-node/kserve': lib('lib/kserve/index.ts'),
          'tritonserver-node/client': lib('lib/client/index.ts'),
        },
      },
      files: ['snippet-prelude.d.ts', ...files],
    };
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
    const tsc = join(REPO_ROOT, 'node_modules/typescript/bin/tsc');
    const result = await run(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { cwd: dir, maxBuffer: 16 << 20 }).then(
      () => '',
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ''}${error.stderr ?? ''}`,
    );
    // Name each failing block by its document and line.
    const located = result.replace(/^(\S+?\.mts)\((\d+),(\d+)\)/gm, (_, name: string, line: string) => {
      const snippet = snippets.find((s) => `${s.id}.mts` === basename(name));
      return snippet ? `${snippet.file}:${snippet.line + Number(line) - 2}` : name;
    });
    expect(located).toBe('');
  }, 180_000);

  it('runs at least one block of the README and of each guide', async () => {
    const byFile = new Map<string, Snippet[]>();
    for (const snippet of snippets) byFile.set(snippet.file, [...(byFile.get(snippet.file) ?? []), snippet]);
    const withoutRun = [...byFile].filter(([file, list]) => !list.some((s) => s.mode === 'run') && !(file in NOTHING_TO_RUN));
    expect(withoutRun.map(([file]) => file)).toEqual([]);
  });

  it('runs the blocks marked run, each as its own program', async () => {
    const failures: string[] = [];
    for (const snippet of snippets.filter((s) => s.mode === 'run')) {
      const path = join(dir, `run-${snippet.id}.mts`);
      await writeFile(path, snippet.code);
      try {
        await run(process.execPath, ['--import', 'tsx', path], { cwd: REPO_ROOT, timeout: 60_000, maxBuffer: 16 << 20 });
      } catch (error) {
        const { stdout, stderr } = error as { stdout?: string; stderr?: string };
        failures.push(`${snippet.file}:${snippet.line}\n${stdout ?? ''}${stderr ?? ''}`);
      }
    }
    expect(failures).toEqual([]);
  }, 600_000);
});
