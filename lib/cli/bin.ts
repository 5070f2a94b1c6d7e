#!/usr/bin/env node
/** The package's command line: `tritonserver-node doctor [--json] [...]`. */
import { parseArgs } from 'node:util';
import { doctor, formatReport } from './doctor.js';

const USAGE = `Usage: tritonserver-node doctor [options]

Checks what this machine offers tritonserver-node: the libtritonserver.so the
search finds (and why each other candidate failed), whether an in-process
server starts, its backends, CUDA devices, and a model repository's configs.
Exit code 0 only when an in-process server starts.

Options:
  --json                     print the report as JSON
  --model-repository <dir>   check every model of this repository
  --library <path>           check this libtritonserver.so only (as libraryPath)
  --backend-directory <dir>  look for backends here (as backendDirectory)
  -h, --help                 this text`;

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        json: { type: 'boolean', default: false },
        'model-repository': { type: 'string' },
        library: { type: 'string' },
        'backend-directory': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1 || positionals[0] !== 'doctor') {
    process.stderr.write(`${positionals.length === 0 ? 'no command' : `unknown command '${positionals.join(' ')}'`}\n\n${USAGE}\n`);
    return 2;
  }
  const report = await doctor({
    libraryPath: values.library,
    backendDirectory: values['backend-directory'],
    modelRepository: values['model-repository'],
  });
  process.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : `${formatReport(report)}\n`);
  return report.ok ? 0 : 1;
}

// exitCode rather than exit(): stdout is flushed first.
void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
