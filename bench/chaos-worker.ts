/**
 * A worker thread of the chaos harness (bench/chaos.ts): attaches to the
 * main thread's server and keeps `concurrency` requests in flight until told
 * to stop (or terminated), reporting its tally.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { Server, type SharedServerHandle } from '../lib/index.js';
import { Tracker, inProcessRequest, random, settledTally } from './chaos-workload.js';

const { handle, seed, concurrency, text } = workerData as { handle: SharedServerHandle; seed: number; concurrency: number; text: boolean };
const tracker = new Tracker();
let attached: Server;
try {
  attached = await Server.attach(handle);
} catch (error) {
  // The owner stopped first: attaching is refused (UNAVAILABLE), as documented.
  parentPort!.postMessage({ type: 'done', tally: tracker.tally, lost: 0, attachError: String(error) });
  process.exit(0);
}
const server = attached;
const r = random(seed);
let running = true;
const onMessage = (message: unknown): void => {
  if (message === 'stop') running = false;
};
parentPort!.on('message', onMessage);
const sweeper = setInterval(() => {
  tracker.sweep();
  // What has settled so far: all that counts of a worker that is terminated.
  parentPort!.postMessage({ type: 'progress', requests: tracker.tally.requests, tally: settledTally(tracker.tally) });
}, 500);
async function loop(): Promise<void> {
  for (let i = 0; running; i++) {
    await inProcessRequest(server, tracker, r, { text });
    // Requests refused at once (a stopped server) must not starve the event loop.
    if (i % 16 === 15) await new Promise((resolve) => setImmediate(resolve));
  }
}
parentPort!.postMessage({ type: 'ready' });
await Promise.all(Array.from({ length: concurrency }, loop));
const left = await tracker.drain(30_000);
clearInterval(sweeper);
await server.stop();
parentPort!.postMessage({ type: 'done', tally: tracker.tally, lost: left });
// Nothing else keeps the thread: it exits, so the harness can count threads and descriptors.
parentPort!.off('message', onMessage);
