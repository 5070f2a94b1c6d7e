/**
 * Models that heal: a Python model whose stub process dies (SIGKILL, as an
 * OOM kill does) is found unhealthy from its requests' errors — model.ready()
 * and the KServe ready routes say so, `modelUnhealthy` reports it — and with
 * `recoverUnhealthyModels` it is reloaded once, however many requests fail.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Client } from '../lib/client/index.js';
import { liveObjects, type ModelRecoveredEvent, type ModelUnhealthyEvent, type Server, type TritonError } from '../lib/index.js';
import { serveKServe } from '../lib/kserve/index.js';
import { expectNoRequestsLive, rejection, startServer } from './helpers.js';
import { childProcesses, processAlive } from './proc.js';

const servers: Server[] = [];
afterEach(async () => {
  // The dead instance never unloads (real Triton r25.07): a bounded stop.
  for (const server of servers.splice(0)) await server.stop({ timeoutMs: 1000 });
});

// Stubs of earlier servers: on real Triton a server whose stub died is left
// undeleted (its stop times out), with the stubs of its healthy instances.
const earlierStubs = new Set<number>();

async function started(options: Parameters<typeof startServer>[0]): Promise<Server> {
  for (const stub of childProcesses(process.pid, 'triton_python_backend_stub')) earlierStubs.add(stub.pid);
  const server = await startServer(options);
  servers.push(server);
  return server;
}

function killStub(model: string): number {
  const stubs = childProcesses(process.pid, 'triton_python_backend_stub').filter(
    (stub) => !earlierStubs.has(stub.pid) && (stub.cmdline.includes(`${model}_0`) || stub.cmdline.includes(`/${model}/`)),
  );
  expect(stubs.length).toBe(1);
  const { pid } = stubs[0]!;
  process.kill(pid, 'SIGKILL');
  // Dead before the caller sends anything: a request that reached the stub
  // in its last moments fails at once, not as one queued on a dead instance.
  const deadline = Date.now() + 5000;
  while (processAlive(pid) && Date.now() < deadline) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2);
  expect(processAlive(pid)).toBe(false);
  return pid;
}

const slowRequest = (value: number, delayMs = 0) => ({ inputs: { INPUT0: new Float32Array([value]), DELAY_MS: new Uint32Array([delayMs]) } });
const sleep = (ms: number): Promise<void> => new Promise((resolveSleep) => setTimeout(resolveSleep, ms));

describe('a model whose Python stub died', () => {
  it('is not ready, on the model and on the KServe ready routes, and modelUnhealthy says so once', async () => {
    const server = await started({ startupModels: ['slow', 'identity_fp32'] });
    const frontends = await serveKServe(server, { http: { port: 0 }, grpc: { port: 0 } });
    const http = await Client.connect(`http://127.0.0.1:${frontends.http!.port}`);
    const grpc = await Client.connect(`grpc://127.0.0.1:${frontends.grpc!.port}`);
    try {
      const events: ModelUnhealthyEvent[] = [];
      const recovered: ModelRecoveredEvent[] = [];
      server.on('modelUnhealthy', (event) => events.push(event)).on('modelRecovered', (event) => recovered.push(event));
      const slow = server.model('slow');
      expect(await slow.ready()).toBe(true);
      const inFlight = rejection(slow.infer(slowRequest(1, 500)));
      await sleep(50);
      killStub('slow');
      const error = await inFlight;
      expect(error.code).toBe('INTERNAL');
      expect(error.message).toMatch(/^Stub process 'slow_0' is not healthy\./);
      expect(error.message).toMatch(/model 'slow' is unhealthy \(its Python stub process died\); server\.loadModel\('slow'\) replaces the instance/);
      // Later requests fail the same way; one event in all.
      for (let i = 0; i < 3; i++) expect((await rejection(slow.infer(slowRequest(2)))).message).toMatch(/Stub process 'slow_0' is not healthy\./);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ model: 'slow', instance: 'slow_0', requestedModel: 'slow', recovering: false });
      expect(events[0]!.error.code).toBe('INTERNAL');
      // Triton itself still says READY; the package does not.
      expect(await slow.ready()).toBe(false);
      expect(await server.model('identity_fp32').ready()).toBe(true);
      expect(await http.model('slow').ready()).toBe(false);
      expect(await grpc.model('slow').ready()).toBe(false);
      expect(await grpc.model('identity_fp32').ready()).toBe(true);
      // The manual recipe is one call now: loadModel() replaces an unhealthy instance.
      await server.loadModel('slow');
      expect(recovered).toEqual([{ model: 'slow', how: 'reloaded' }]);
      expect(await slow.ready()).toBe(true);
      expect(await http.model('slow').ready()).toBe(true);
      const response = await slow.infer(slowRequest(5));
      expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([5]);
    } finally {
      await http.close();
      await grpc.close();
      await frontends.close();
    }
  }, 60_000);

  it('with recoverUnhealthyModels, is reloaded once while many requests fail, and then serves; none hangs', async () => {
    const server = await started({ startupModels: ['slow'], recoverUnhealthyModels: true });
    const loads = vi.spyOn(server, 'loadModel');
    const recoveredEvent = new Promise<ModelRecoveredEvent>((resolveEvent) => server.on('modelRecovered', resolveEvent));
    const unhealthy: ModelUnhealthyEvent[] = [];
    server.on('modelUnhealthy', (event) => unhealthy.push(event));
    const slow = server.model('slow');
    const inFlight = Array.from({ length: 8 }, (_, i) => slow.infer(slowRequest(i, 300)).then(() => 'ok', (error: TritonError) => error));
    await sleep(50);
    killStub('slow');
    // A burst while it is dead and being reloaded: each settles, right or with a clear error.
    const burst = Array.from({ length: 32 }, (_, i) => slow.infer(slowRequest(i)).then(() => 'ok', (error: TritonError) => error));
    const outcomes = await Promise.all([...inFlight, ...burst]);
    for (const outcome of outcomes) {
      if (typeof outcome === 'string') continue;
      expect(['INTERNAL', 'NOT_FOUND', 'UNAVAILABLE', 'CANCELLED']).toContain(outcome.code);
      if (outcome.code === 'INTERNAL') expect(outcome.message).toMatch(/Stub process 'slow_0' is not healthy\. \(model 'slow' (is unhealthy|had an unhealthy instance)/);
    }
    expect(outcomes.filter((o) => o !== 'ok').length).toBeGreaterThan(0);
    expect(await recoveredEvent).toEqual({ model: 'slow', how: 'reloaded' });
    expect(unhealthy).toHaveLength(1);
    expect(unhealthy[0]).toMatchObject({ model: 'slow', recovering: true });
    expect(loads).toHaveBeenCalledTimes(1);
    expect(await slow.ready()).toBe(true);
    const responses = await Promise.all(Array.from({ length: 8 }, (_, i) => slow.infer(slowRequest(i))));
    responses.forEach((response, i) => expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([i]));
    // Late failures of requests sent to the old instance trigger no second reload.
    await sleep(200);
    expect(loads).toHaveBeenCalledTimes(1);
    expect(childProcesses(process.pid, 'triton_python_backend_stub').filter((stub) => !earlierStubs.has(stub.pid) && stub.cmdline.includes('slow_0'))).toHaveLength(1);
    // (Real Triton fails the 40 requests queued on the dead instance about one a second.)
  }, 120_000);

  it('fails the requests queued on the dead instance one execution at a time, timed out or not; none stays inside, and stop() names the model', async () => {
    // Real Triton r25.07: the Python backend waits about a second for a dead
    // stub's reply to each execution before failing it, and a request that
    // timed out or was cancelled while queued is not spared that wait.
    const server = await started({ startupModels: ['slow'] });
    const slow = server.model('slow');
    await slow.infer(slowRequest(0));
    killStub('slow');
    const timedOut = Array.from({ length: 4 }, (_, i) => rejection(slow.infer({ ...slowRequest(i), timeoutMs: 200 })));
    const waited = Array.from({ length: 2 }, (_, i) => rejection(slow.infer(slowRequest(10 + i))));
    for (const error of await Promise.all(timedOut)) {
      expect(error.code).toBe('CANCELLED');
      expect(error.message).toMatch(/timed out after 200 ms/);
    }
    // Their promises settled; the requests themselves are still queued on the dead instance.
    expect(liveObjects().requests).toBeGreaterThan(0);
    for (const error of await Promise.all(waited)) {
      expect(error.code).toBe('INTERNAL');
      expect(error.message).toMatch(/^Stub process 'slow_0' is not healthy\. \(model 'slow' is unhealthy/);
    }
    // Triton releases every one of them (about one a second), none is left inside.
    await expectNoRequestsLive(20_000);
    // A stop while requests are queued there cannot wait them out; its report says why.
    const queued = Array.from({ length: 4 }, (_, i) => slow.infer(slowRequest(i)).then(() => 'ok', (error: TritonError) => error.code));
    await sleep(100);
    const report = await server.stop({ timeoutMs: 500 });
    expect(report.complete).toBe(false);
    expect(report.requestsInside).toBeGreaterThan(0);
    expect(report.message).toMatch(/'slow' had an instance whose Python stub died: Triton fails the requests queued on such an instance one execution at a time/);
    expect(new Set(await Promise.all(queued))).toEqual(new Set(['INTERNAL']));
    await expectNoRequestsLive(20_000);
  }, 60_000);

  it('in an ensemble step, marks the ensemble and reloads the step', async () => {
    const server = await started({ startupModels: ['add_sub', 'add_sub_chain'], recoverUnhealthyModels: true });
    const events: ModelUnhealthyEvent[] = [];
    server.on('modelUnhealthy', (event) => events.push(event));
    const recovered = new Promise<ModelRecoveredEvent>((resolveEvent) => server.on('modelRecovered', resolveEvent));
    const chain = server.model('add_sub_chain');
    const inputs = { INPUT0: new Float32Array([1, 2, 3, 4]), INPUT1: new Float32Array([1, 1, 1, 1]) };
    await chain.infer({ inputs });
    killStub('add_sub');
    const error = await rejection(chain.infer({ inputs }));
    expect(error.message).toMatch(/Stub process 'add_sub_0' is not healthy\./);
    expect(events[0]).toMatchObject({ model: 'add_sub_chain', instance: 'add_sub_0', requestedModel: 'add_sub_chain' });
    expect(await recovered).toMatchObject({ model: 'add_sub', how: 'reloaded' });
    expect(await chain.ready()).toBe(true);
    const response = await chain.infer({ inputs });
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([2, 4, 6, 8]);
  }, 60_000);

  it('recoverUnhealthyModels needs explicit model control', async () => {
    const error = await rejection(startServer({ modelControlMode: 'poll', startupModels: undefined, recoverUnhealthyModels: true }));
    expect(error.code).toBe('INVALID_ARG');
    expect(error.message).toMatch(/recoverUnhealthyModels: needs modelControlMode 'explicit'/);
  });
});
