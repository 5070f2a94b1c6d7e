// bench.ts — load-tests POST /v1/sentiment with autocannon, the way the
// Flask-vs-Triton guides do: the service with Triton's dynamic batching on,
// the same service with it off (text_processor loaded with a config override
// without dynamic_batching), and — when Flask and gunicorn are installed —
// the same scoring code behind Flask + gunicorn. Prints a Markdown table of
// requests/s and p99 latency per connection count.
//
//   node --import tsx examples/service/bench.ts [seconds per run, default 10] [connections, default 1,8,32,64]
//
// Uses the library the service finds (TRITONSERVER_LIBRARY, ...). A
// measurement, not a test: numbers depend on the machine.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const seconds = Number(process.argv[2] ?? 10);
const connectionCounts = (process.argv[3] ?? '1,8,32,64').split(',').map(Number);
const here = fileURLToPath(new URL('.', import.meta.url));
const body = JSON.stringify({ texts: ['The new release is fast and the docs are excellent'] });

interface Target {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Printed once the target listens; the URL is read from it. */
  ready: RegExp;
}

function start(target: Target): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(target.command, target.args, {
    env: { ...process.env, ...target.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = target.ready.exec(output);
      if (match) resolve({ child, url: match[1]! });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${target.name} exited (${code}):\n${output}`)));
  });
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

const service = (dynamicBatching: boolean): Target => ({
  name: `tritonserver-node, dynamic batching ${dynamicBatching ? 'on' : 'off'}`,
  command: process.execPath,
  args: ['--import', 'tsx', `${here}server.ts`],
  env: { PORT: '0', DYNAMIC_BATCHING: dynamicBatching ? 'on' : 'off' },
  ready: /listening on (http:\/\/\S+)/,
});
const targets: Target[] = [service(true), service(false)];
// The Flask baseline runs as Flask apps run in production: under gunicorn,
// one worker per core, threaded workers (sync workers close every
// connection, and autocannon would count the resets as errors). Any python3 on the PATH or Debian's that has
// both flask and gunicorn will do.
const python = ['python3', '/usr/bin/python3'].find(
  (candidate) => spawnSync(candidate, ['-c', 'import flask, gunicorn'], { stdio: 'ignore' }).status === 0,
);
if (python) {
  targets.push({
    name: `Flask + gunicorn (${availableParallelism()} workers × 4 threads), same scoring code`,
    command: python,
    args: ['-m', 'gunicorn', '--chdir', here, '-w', String(availableParallelism()), '-k', 'gthread', '--threads', '4', '-b', '127.0.0.1:5099', 'flask_app:app'],
    env: {},
    ready: /Listening at: (http:\/\/127\.0\.0\.1:\d+)/,
  });
}

const rows: string[] = [];
for (const target of targets) {
  const { child, url } = await start(target);
  try {
    // A short warm-up so first-request costs do not land in the first row.
    await autocannon({ url: `${url}/v1/sentiment`, method: 'POST', headers: { 'content-type': 'application/json' }, body, connections: 8, duration: 1 });
    for (const connections of connectionCounts) {
      const result = await autocannon({
        url: `${url}/v1/sentiment`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        connections,
        duration: seconds,
      });
      const failures = result.errors + result.timeouts + result.non2xx;
      const row = `| ${target.name} | ${connections} | ${Math.round(result.requests.average)} | ${result.latency.p99} | ${failures} |`;
      console.error(row);
      rows.push(row);
    }
  } finally {
    await stop(child);
  }
}

console.log('| server | connections | requests/s | p99 latency (ms) | errors |');
console.log('|---|---:|---:|---:|---:|');
for (const row of rows) console.log(row);
