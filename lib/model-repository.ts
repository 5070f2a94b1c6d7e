/**
 * Model repositories on disk: writing one (below), and refusing the configs
 * of one that would abort the process when Triton loads them
 * (`refuseAbortingConfigs`). The layout written:
 *
 * ```
 * <dir>/<model>/config.pbtxt
 * <dir>/<model>/1/model.py        (files you pass, at their relative paths)
 * ```
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { checkName, checkObject } from './check.js';
import { TritonError } from './errors.js';
import { abortingParameterProblems } from './backend-parameters.js';
import { formatModelConfig, parseModelConfig, validateModelConfig, type ModelConfigInput } from './model-config.js';

/** One model of a repository: its configuration and the files beside it. */
export interface ModelRepositoryEntry {
  /** The model's configuration; `name` defaults to the record key. */
  config: ModelConfigInput;
  /**
   * Files relative to the model directory, e.g. `'1/model.py'` or
   * `'labels.txt'`. Strings are written as UTF-8.
   */
  files?: Record<string, Uint8Array | string>;
}

const VERSION_DIR = /^[0-9]+$/;

function invalid(message: string): TritonError {
  return new TritonError('INVALID_ARG', message);
}

/** Checks a model name can be one directory entry. */
function checkModelName(name: string): void {
  if (name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name)) {
    throw invalid(`model name ${JSON.stringify(name)} cannot be used as a directory name`);
  }
}

/**
 * Turns a file's relative path into its POSIX segments, rejecting absolute
 * paths, `..` escapes and empty paths.
 */
function fileSegments(model: string, file: string): string[] {
  const where = `model ${JSON.stringify(model)}: file ${JSON.stringify(file)}`;
  if (file.includes('\0')) throw invalid(`${where}: path contains a NUL character`);
  if (path.posix.isAbsolute(file) || path.win32.isAbsolute(file) || /^[A-Za-z]:/.test(file)) {
    throw invalid(`${where}: path must be relative to the model directory`);
  }
  const segments: string[] = [];
  for (const part of file.split(/[/\\]/)) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (segments.length === 0) throw invalid(`${where}: path escapes the model directory`);
      segments.pop();
      continue;
    }
    segments.push(part);
  }
  if (segments.length === 0) throw invalid(`${where}: path names no file`);
  if (segments.length === 1 && segments[0] === 'config.pbtxt') {
    throw invalid(`${where}: config.pbtxt is written from \`config\`; do not pass it as a file`);
  }
  return segments;
}

/**
 * Writes a model repository: for each model, `<dir>/<name>/config.pbtxt`
 * from its validated config, and each of its files at its relative path
 * (directories are created). When no file lies under a numeric version
 * directory, an empty `1/` is created so Triton finds a version.
 *
 * Every model is validated before anything is written. Throws
 * `TritonError('INVALID_ARG')` for an invalid config, a config `name` that
 * differs from the record key, or a file path that is absolute or escapes
 * the model directory. Existing files at the same paths are overwritten;
 * other files are left alone.
 */
export async function writeModelRepository(
  dir: string,
  models: Record<string, ModelRepositoryEntry>,
): Promise<void> {
  checkName('writeModelRepository(dir)', dir);
  checkObject('writeModelRepository(models)', models);
  const plans = Object.entries(models).map(([key, entry]) => {
    checkModelName(key);
    checkObject(`model ${JSON.stringify(key)}`, entry);
    checkObject(`model ${JSON.stringify(key)}: config`, entry.config);
    const given = entry.config.name;
    if (given !== undefined && given !== key) {
      throw invalid(
        `model ${JSON.stringify(key)}: config name ${JSON.stringify(given)} does not match the repository entry ${JSON.stringify(key)}`,
      );
    }
    const config = validateModelConfig({ ...entry.config, name: key });
    const files = Object.entries(entry.files ?? {}).map(([file, content]) => ({
      segments: fileSegments(key, file),
      content,
    }));
    const hasVersion = files.some((f) => f.segments.length > 1 && VERSION_DIR.test(f.segments[0] ?? ''));
    return { name: key, text: formatModelConfig(config), files, hasVersion };
  });

  for (const plan of plans) {
    const modelDir = path.join(dir, plan.name);
    await mkdir(modelDir, { recursive: true });
    await writeFile(path.join(modelDir, 'config.pbtxt'), plan.text, 'utf8');
    for (const file of plan.files) {
      const target = path.join(modelDir, ...file.segments);
      await mkdir(path.dirname(target), { recursive: true });
      await writeFile(target, file.content);
    }
    if (!plan.hasVersion) await mkdir(path.join(modelDir, '1'), { recursive: true });
  }
}

/** A repository path Triton reads from the local file system (not s3://, gs://, as://). */
function isLocal(repository: string): boolean {
  return !/^[a-z][a-z0-9+.-]*:\/\//i.test(repository);
}

/**
 * Refuses, before Triton reads them, the `config.pbtxt` files of local
 * repositories that would abort the process when their model loads: a
 * framework backend's integer parameter past 32 bits (see
 * `abortingParameterProblems`). Looks at `models` (every model directory when
 * undefined), in the file Triton would read (`configs/<configName>.pbtxt`
 * where it exists, else `config.pbtxt`); a config that does not parse is
 * left to Triton, which reports it. Throws `TritonError('INVALID_ARG')`
 * naming each model and value.
 */
export async function refuseAbortingConfigs(
  repositories: readonly string[],
  models?: readonly string[],
  configName = '',
): Promise<void> {
  const problems: string[] = [];
  for (const repository of repositories.filter(isLocal)) {
    let names = models;
    if (names === undefined) {
      try {
        names = (await readdir(repository, { withFileTypes: true })).filter((e) => e.isDirectory() || e.isSymbolicLink()).map((e) => e.name);
      } catch {
        continue; // Triton reports a repository it cannot read
      }
    }
    for (const name of names) {
      // Triton reads configs/<modelConfigName>.pbtxt where it exists, else config.pbtxt.
      const candidates = [...(configName ? [path.join('configs', `${configName}.pbtxt`)] : []), 'config.pbtxt'];
      let text: string | undefined;
      let file = '';
      for (const candidate of candidates) {
        file = path.join(repository, name, candidate);
        text = await readFile(file, 'utf8').catch(() => undefined);
        if (text !== undefined) break;
      }
      if (text === undefined) continue;
      let found: string[];
      try {
        found = abortingParameterProblems(parseModelConfig(text));
      } catch {
        continue;
      }
      for (const problem of found) problems.push(`'${name}' (${file}): ${problem}`);
    }
  }
  if (problems.length > 0) {
    throw invalid(
      `not loaded: the backend would abort the process on ${problems.length === 1 ? 'this value' : 'these values'} ` +
        `(its std::stoi throws out of range):\n  ${problems.join('\n  ')}`,
    );
  }
}
