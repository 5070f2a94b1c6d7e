/**
 * Runs the test suite on a busy machine, on purpose: a test that fails only
 * under load fails a contributor's run for nothing (docs/development.md).
 *
 *   npm run test:stress [-- --runs N] [-- --hogs N] [-- --command "npm test"]
 *
 * Starts `--hogs` processes (default: one per CPU) that spin at the same
 * priority as the tests, then runs `--command` (default: the suite, `npx
 * vitest run`) `--runs` times in a row (default 1), stopping at the first
 * failure. Exits with the failing run's status, 0 when all passed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '1' },
    hogs: { type: 'string', default: String(availableParallelism()) },
    command: { type: 'string', default: 'npx vitest run' },
  },
});
const runs = Number(values.runs);
const hogCount = Number(values.hogs);
if (!(Number.isInteger(runs) && runs > 0) || !(Number.isInteger(hogCount) && hogCount >= 0)) {
  console.error('--runs must be a positive integer and --hogs a non-negative one');
  process.exit(2);
}

// A busy loop in a process of its own: it competes for the CPU as another job on the machine would,
// and ends by itself once this process is gone (however it ended).
const HOG = `const parent = ${process.pid};
(function spin() {
  for (const end = Date.now() + 50; Date.now() < end; ) Math.sqrt(Math.random());
  try { process.kill(parent, 0); } catch { process.exit(0); }
  setImmediate(spin);
})();`;
const hogs: ChildProcess[] = Array.from({ length: hogCount }, () => spawn(process.execPath, ['-e', HOG], { stdio: 'ignore' }));
const stopHogs = (): void => {
  for (const hog of hogs) hog.kill('SIGKILL');
};
process.on('exit', stopHogs);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130));

let status = 0;
for (let run = 1; run <= runs && status === 0; run++) {
  const started = Date.now();
  console.log(`\n=== test:stress run ${run} of ${runs}: ${values.command} beside ${hogCount} busy process(es)`);
  status = spawnSync(values.command, { shell: true, stdio: 'inherit' }).status ?? 1;
  const load = loadavg().map((l) => l.toFixed(1)).join(' ');
  console.log(`=== run ${run}: ${status === 0 ? 'passed' : `FAILED (exit ${status})`} in ${((Date.now() - started) / 1000).toFixed(0)} s, load average ${load}`);
}
stopHogs();
process.exit(status);
