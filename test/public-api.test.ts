// The public API is what the three entry points export, every name of it in
// the API reference: nothing internal reaches users through an index.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');
const ENTRIES = ['lib/index.ts', 'lib/client/index.ts', 'lib/kserve/index.ts'];

/** Every name an entry point exports, values and types, as the compiler sees them. */
function exportedNames(): Map<string, string[]> {
  const program = ts.createProgram(
    ENTRIES.map((entry) => join(ROOT, entry)),
    { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, noEmit: true },
  );
  const checker = program.getTypeChecker();
  return new Map(
    ENTRIES.map((entry) => {
      const module = checker.getSymbolAtLocation(program.getSourceFile(join(ROOT, entry))!)!;
      return [entry, checker.getExportsOfModule(module).map((symbol) => symbol.name).sort()];
    }),
  );
}

describe('the public API', () => {
  let reference: Map<string, string[]>;
  const dir = mkdtempSync(join(tmpdir(), 'tsn-api-'));

  beforeAll(async () => {
    // TypeDoc with the project's settings (excludeInternal among them), as JSON.
    const json = join(dir, 'api.json');
    await promisify(execFile)(process.execPath, [join(ROOT, 'node_modules/typedoc/bin/typedoc'), '--json', json, '--out', join(dir, 'html'), '--treatWarningsAsErrors', 'false'], {
      cwd: ROOT,
      maxBuffer: 1 << 24,
    }).catch(() => undefined); // warnings are test/docs.test.ts's to report
    const project = JSON.parse(readFileSync(json, 'utf8')) as { children: Array<{ name: string; children?: Array<{ name: string }> }> };
    const moduleOf = (entry: string): string => entry.replace(/^lib\//, '').replace(/\/?index\.ts$/, '') || 'index';
    reference = new Map(
      ENTRIES.map((entry) => {
        const module = project.children.find((child) => child.name === moduleOf(entry));
        return [entry, (module?.children ?? []).map((child) => child.name).sort()];
      }),
    );
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('every name an entry point exports is in the API reference, and the reference has nothing else', () => {
    const exported = exportedNames();
    for (const entry of ENTRIES) {
      expect(reference.get(entry)!.length, entry).toBeGreaterThan(10);
      expect(exported.get(entry), entry).toEqual(reference.get(entry));
    }
  });

  it("keeps the tensor layer's helpers out of the package's exports", async () => {
    const index = await import('../lib/index.js');
    for (const helper of ['normalizeInput', 'outputTensor', 'storageView', 'appendPlainInput', 'tensorBytes', 'numbersToStorage', 'bytesTensor']) {
      expect(Object.keys(index), helper).not.toContain(helper);
    }
    expect(Object.keys(index)).toContain('Tensor');
  });
});
