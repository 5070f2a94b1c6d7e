// Finding a Triton bundled by PyTriton's wheel: a temp dir shaped like an
// installed wheel, its "libtritonserver" a link to the library the suite uses.
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  loadFirstOf,
  pythonBundledLibraries,
  pythonSitePackages,
  pytritonBackendDirectory,
  pytritonLibraries,
} from '../lib/native.js';
import { Server, backendDirectoryBeside, cacheDirectoryBeside } from '../lib/server.js';
import { QUIET, REPO_ROOT, rejection } from './helpers.js';

const EMPTY = join(REPO_ROOT, 'test/fixtures/empty-repository');

const LIBRARY = process.env.TRITONSERVER_LIBRARY!;

let root: string;
let sitePackages: string;
let wheelLibrary: string;
let backends: string;

/** A directory holding only a `python3` that prints `lines` (or sleeps / fails). */
async function fakePython(name: string, body: string): Promise<string> {
  const bin = join(root, name);
  await mkdir(bin);
  await writeFile(join(bin, 'python3'), `#!/bin/sh\n${body}\n`);
  await chmod(join(bin, 'python3'), 0o755);
  return bin;
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tritonserver-node-pytriton-'));
  sitePackages = join(root, 'venv', 'lib', 'python3.11', 'site-packages');
  const libs = join(sitePackages, 'nvidia_pytriton.libs');
  backends = join(sitePackages, 'pytriton', 'tritonserver', 'backends');
  await mkdir(libs, { recursive: true });
  await mkdir(join(backends, 'python'), { recursive: true });
  wheelLibrary = join(libs, 'libtritonserver-0a1b2c3d.so');
  await symlink(LIBRARY, wheelLibrary);
  // Neighbours auditwheel also puts there, which are not Triton.
  await writeFile(join(libs, 'libprotobuf-12345678.so.32'), '');
  await writeFile(join(libs, 'libtritonserver.so.txt'), '');
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("PyTriton's bundled Triton", () => {
  it('lists the hashed libtritonserver of nvidia_pytriton.libs and nothing else', () => {
    expect(pytritonLibraries(sitePackages)).toEqual([wheelLibrary]);
    expect(pytritonLibraries(join(root, 'nowhere'))).toEqual([]);
  });

  it('asks python3 for its site-packages directories', async () => {
    const bin = await fakePython('bin-answers', `echo ${sitePackages}; echo ${join(root, 'user-site')}`);
    expect(await pythonSitePackages({ PATH: bin })).toEqual([sitePackages, join(root, 'user-site')]);
    const failing = await fakePython('bin-fails', 'exit 3');
    expect(await pythonSitePackages({ PATH: failing })).toEqual([]);
    expect(await pythonSitePackages({ PATH: join(root, 'no-bin') })).toEqual([]);
  });

  it('finds the wheel through python3 and through the active virtualenv', async () => {
    const bin = await fakePython('bin-site', `echo ${sitePackages}`);
    expect(await pythonBundledLibraries({ PATH: bin, HOME: root })).toContain(wheelLibrary);
    const noPython = join(root, 'no-bin');
    expect(await pythonBundledLibraries({ PATH: noPython, HOME: root, VIRTUAL_ENV: join(root, 'venv') })).toContain(
      wheelLibrary,
    );
    expect(await pythonBundledLibraries({ PATH: noPython, HOME: root })).not.toContain(wheelLibrary);
  });

  it('falls back to it only when the earlier locations do not open', async () => {
    const env = { PATH: join(root, 'no-bin'), HOME: root, VIRTUAL_ENV: join(root, 'venv') };
    const found = await loadFirstOf(['/nonexistent/lib/libtritonserver.so'], env);
    expect(found.path).toBe(wheelLibrary);
    expect(found.major).toBe(1);
    // An earlier library that opens wins; the wheel is not even looked at.
    expect((await loadFirstOf([LIBRARY], env)).path).toBe(LIBRARY);
  });

  it('lists the wheel among the paths tried when it does not open either', async () => {
    const broken = join(root, 'broken-site');
    await mkdir(join(broken, 'nvidia_pytriton.libs'), { recursive: true });
    const brokenLibrary = join(broken, 'nvidia_pytriton.libs', 'libtritonserver-deadbeef.so');
    await writeFile(brokenLibrary, 'not an ELF file');
    const bin = await fakePython('bin-broken', `echo ${broken}`);
    const error = await rejection(loadFirstOf(['/nonexistent/lib/libtritonserver.so'], { PATH: bin, HOME: root }));
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toContain('/nonexistent/lib/libtritonserver.so: ');
    expect(error.message).toMatch(new RegExp(`${brokenLibrary}: .*(invalid ELF header|file too short)`));
  });

  it('finds the backends and caches of an install beside its lib/ folder', async () => {
    const install = join(root, 'install');
    const library = join(install, 'lib', 'libtritonserver.so');
    await mkdir(join(install, 'lib'), { recursive: true });
    expect(backendDirectoryBeside(library)).toBeUndefined();
    expect(cacheDirectoryBeside(library)).toBeUndefined();
    await mkdir(join(install, 'backends'));
    await mkdir(join(install, 'caches'));
    expect(backendDirectoryBeside(library)).toBe(join(install, 'backends'));
    expect(cacheDirectoryBeside(library)).toBe(join(install, 'caches'));
    // Only a library in a folder named lib/ is an install's.
    expect(cacheDirectoryBeside(join(install, 'backends', 'libtritonserver.so'))).toBeUndefined();
  });

  it("uses the wheel's backend directory", async () => {
    expect(pytritonBackendDirectory(wheelLibrary)).toBe(backends);
    expect(backendDirectoryBeside(wheelLibrary)).toBe(backends);
    expect(pytritonBackendDirectory(LIBRARY.replace(/[^/]+$/, 'libtritonserver.so'))).toBeUndefined();
    // An empty repository: the wheel's backend directory holds no real backends.
    const server = await Server.start({ modelRepository: EMPTY, libraryPath: wheelLibrary, ...QUIET });
    try {
      expect(server.library.path).toBe(wheelLibrary);
      expect(await server.ready()).toBe(true);
    } finally {
      await server.stop();
    }
  });
});
