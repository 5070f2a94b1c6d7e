import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { Counter, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  PROMETHEUS_CONTENT_TYPE,
  Server,
  Tensor,
  collectMetricsText,
  metricsHandler,
  parseMetricsText,
  parseStatisticsJson,
  type MetricSample,
} from '../lib/index.js';
import { MODELS, OLD_API_LIBRARY, QUIET, rejection, startServer } from './helpers.js';

const servers: Server[] = [];
const closers: Array<() => Promise<void>> = [];

async function started(options: Parameters<typeof startServer>[0] = {}): Promise<Server> {
  const server = await startServer(options);
  servers.push(server);
  return server;
}

afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

const identity = (value: number) => ({
  inputs: { INPUT0: Tensor.from(new Float32Array([value, value + 1]), { shape: [1, 2] }) },
});

function sample(samples: MetricSample[], name: string, labels: Record<string, string>): MetricSample | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([key, value]) => s.labels[key] === value));
}

function valueOf(samples: MetricSample[], name: string, labels: Record<string, string>): number {
  return sample(samples, name, labels)?.value ?? 0;
}

const ID = { model: 'identity_fp32', version: '1' };

/**
 * Triton updates a request's counters when it releases the request, which
 * may be just after the response arrived: read until `count` reaches at
 * least `expected` (a bounded number of reads), and return what it read.
 */
async function counted(server: Server, count: (samples: MetricSample[]) => number, expected: number): Promise<MetricSample[]> {
  let samples = await server.metricsSamples();
  for (let i = 0; i < 200 && count(samples) < expected; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    samples = await server.metricsSamples();
  }
  return samples;
}

describe('Triton metrics', () => {
  it('counters move by exactly the number of requests, with Triton’s HELP, TYPE and labels', async () => {
    const server = await started();
    const model = await server.loadModel('identity_fp32');
    const before = await server.metricsSamples();
    const n = 12;
    await Promise.all(Array.from({ length: n }, (_, i) => model.infer(identity(i))));
    const successes = (samples: MetricSample[]) =>
      valueOf(samples, 'nv_inference_request_success', ID) - valueOf(before, 'nv_inference_request_success', ID);
    const after = await counted(server, successes, n);

    const success = sample(after, 'nv_inference_request_success', ID);
    expect(success).toMatchObject({
      type: 'counter',
      family: 'nv_inference_request_success',
      help: 'Number of successful inference requests, all batch sizes',
    });
    expect(success!.value - valueOf(before, 'nv_inference_request_success', ID)).toBe(n);
    expect(valueOf(after, 'nv_inference_count', ID) - valueOf(before, 'nv_inference_count', ID)).toBe(n);
    const executions = valueOf(after, 'nv_inference_exec_count', ID) - valueOf(before, 'nv_inference_exec_count', ID);
    expect(executions).toBeGreaterThanOrEqual(1);
    expect(executions).toBeLessThanOrEqual(n);
    for (const reason of ['OTHER', 'BACKEND', 'CANCELED', 'REJECTED']) {
      const failure = sample(after, 'nv_inference_request_failure', { ...ID, reason });
      expect(failure, reason).toBeDefined();
      expect(failure!.value - valueOf(before, 'nv_inference_request_failure', { ...ID, reason })).toBe(0);
    }
    for (const family of [
      'nv_inference_request_duration_us',
      'nv_inference_queue_duration_us',
      'nv_inference_compute_input_duration_us',
      'nv_inference_compute_infer_duration_us',
      'nv_inference_compute_output_duration_us',
    ]) {
      const duration = sample(after, family, ID);
      expect(duration?.type, family).toBe('counter');
      expect(duration!.value, family).toBeGreaterThanOrEqual(valueOf(before, family, ID));
    }
    // The identity backend's own custom counter: 2 FP32 values per request.
    const bytes = sample(after, 'input_byte_size_counter', ID);
    expect(bytes).toMatchObject({ type: 'counter', help: 'Cumulative input byte size of all requests received by the model' });
    expect(bytes!.value - valueOf(before, 'input_byte_size_counter', ID)).toBe(n * 8);
    // Process-wide gauges (Triton built with CPU metrics, the default).
    const utilization = sample(after, 'nv_cpu_utilization', {});
    expect(utilization).toMatchObject({ type: 'gauge', help: 'CPU utilization rate [0.0 - 1.0]', labels: {} });
    expect(utilization!.value).toBeGreaterThanOrEqual(0);
    expect(utilization!.value).toBeLessThanOrEqual(1);
    const memory = sample(after, 'nv_cpu_memory_total_bytes', {});
    expect(memory?.help).toBe('CPU total memory (RAM), in bytes');
    // Triton samples them every metrics interval (0 until the first sample).
    expect(memory!.value).toBeGreaterThanOrEqual(valueOf(after, 'nv_cpu_memory_used_bytes', {}));
    const pending = sample(after, 'nv_inference_pending_request_count', ID);
    expect(pending).toMatchObject({
      type: 'gauge',
      value: 0,
      help: 'Instantaneous number of pending requests awaiting execution per-model.',
    });
  });

  it('a model’s error responses move success plus failure by exactly their number', async () => {
    // Real Triton counts a Python model's error response as a success
    // (TRITON_FACTS.md); either way each request is counted exactly once.
    const server = await started();
    const model = await server.loadModel('fail');
    const labels = { model: 'fail', version: '1' };
    const total = (samples: MetricSample[]) =>
      valueOf(samples, 'nv_inference_request_success', labels) +
      samples
        .filter((s) => s.name === 'nv_inference_request_failure' && s.labels.model === 'fail')
        .reduce((sum, s) => sum + s.value, 0);
    const before = total(await server.metricsSamples());
    const m = 3;
    for (let i = 0; i < m; i++) {
      await rejection(model.infer({ inputs: { INPUT0: new Float32Array([1]) } }));
    }
    const after = await counted(server, (samples) => total(samples) - before, m);
    expect(total(after) - before).toBe(m);
  });

  it('disabled metrics give a clear error', async () => {
    const server = await started({ metrics: { enabled: false } });
    for (const call of [server.metrics(), server.metricsSamples()]) {
      const error = await rejection(call);
      expect(error.code).toBe('UNAVAILABLE');
      expect(error.message).toBe('metrics are disabled: the server was started with metrics: { enabled: false }');
    }
    expect(() => server.metricFamily({ name: 'x_total', description: 'x', kind: 'counter' })).toThrow(
      'metrics are disabled: the server was started with metrics: { enabled: false }',
    );
  });

  it('parses histograms, escaped labels and infinities of the exposition format', () => {
    const text = [
      '# HELP h A histogram.',
      '# TYPE h histogram',
      'h_bucket{path="C:\\\\DIR",le="0.5"} 1',
      'h_bucket{path="C:\\\\DIR",le="+Inf"} 3',
      'h_sum{path="C:\\\\DIR"} 4.5',
      'h_count{path="C:\\\\DIR"} 3',
      '# TYPE g gauge',
      'g{quote="say \\"hi\\""} -Inf',
    ].join('\n');
    expect(parseMetricsText(text)).toEqual([
      { name: 'h_bucket', family: 'h', type: 'histogram', help: 'A histogram.', labels: { path: 'C:\\DIR', le: '0.5' }, value: 1 },
      { name: 'h_bucket', family: 'h', type: 'histogram', help: 'A histogram.', labels: { path: 'C:\\DIR', le: '+Inf' }, value: 3 },
      { name: 'h_sum', family: 'h', type: 'histogram', help: 'A histogram.', labels: { path: 'C:\\DIR' }, value: 4.5 },
      { name: 'h_count', family: 'h', type: 'histogram', help: 'A histogram.', labels: { path: 'C:\\DIR' }, value: 3 },
      { name: 'g', family: 'g', type: 'gauge', help: '', labels: { quote: 'say "hi"' }, value: Number.NEGATIVE_INFINITY },
    ]);
    expect(() => parseMetricsText('# TYPE bad counter extra\n')).toThrow('not valid Prometheus exposition format');
  });
});

describe('custom metrics', () => {
  it('counter, gauge and histogram values appear in Triton’s text', async () => {
    const server = await started();
    await server.loadModel('identity_fp32');
    const counter = server.metricFamily({ name: 'app_jobs_total', description: 'Jobs done', kind: 'counter' });
    const jobs = counter.metric({ queue: 'fast' });
    jobs.increment();
    jobs.increment(2.5);
    expect(jobs.value()).toBe(3.5);
    expect(counter.metric({ queue: 'fast' })).toBe(jobs);
    const gauge = server.metricFamily({ name: 'app_temperature', description: 'Temperature', kind: 'gauge' });
    const temperature = gauge.metric();
    temperature.set(20);
    temperature.increment(-1.5);
    expect(temperature.value()).toBe(18.5);
    const histogram = server.metricFamily({
      name: 'app_latency_seconds',
      description: 'Latency',
      kind: 'histogram',
      buckets: [0.25, 1, 4],
    });
    const latency = histogram.metric({ route: '/a' });
    for (const value of [0.125, 0.5, 0.75, 8]) latency.observe(value);

    const samples = await server.metricsSamples();
    expect(sample(samples, 'app_jobs_total', { queue: 'fast' })).toMatchObject({ type: 'counter', help: 'Jobs done', value: 3.5 });
    expect(sample(samples, 'app_temperature', {})).toMatchObject({ type: 'gauge', help: 'Temperature', value: 18.5 });
    const buckets = samples
      .filter((s) => s.name === 'app_latency_seconds_bucket' && s.labels.route === '/a')
      .map((s) => [s.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(s.labels.le), s.value]);
    expect(buckets).toEqual([
      [0.25, 1],
      [1, 3],
      [4, 3],
      [Number.POSITIVE_INFINITY, 4],
    ]);
    expect(valueOf(samples, 'app_latency_seconds_sum', { route: '/a' })).toBe(9.375);
    expect(valueOf(samples, 'app_latency_seconds_count', { route: '/a' })).toBe(4);
    // Triton's own families are still there, in the same scrape.
    expect(samples.some((s) => s.family === 'nv_inference_request_success')).toBe(true);
  });

  it('refuses what Triton refuses, with its codes', async () => {
    const server = await started();
    const counter = server.metricFamily({ name: 'app_refusals_total', description: 'r', kind: 'counter' }).metric();
    const setError = (() => {
      try {
        counter.set(1);
      } catch (error) {
        return error as { code: string; message: string };
      }
      return undefined;
    })();
    expect(setError).toMatchObject({ code: 'UNSUPPORTED', message: 'TRITONSERVER_METRIC_KIND_COUNTER does not support Set' });
    expect(() => counter.increment(-1)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARG', message: expect.stringContaining('non-negative') }),
    );
    expect(() => counter.observe(1)).toThrow(expect.objectContaining({ code: 'UNSUPPORTED' }));
    const histogram = server
      .metricFamily({ name: 'app_refusals_seconds', description: 'r', kind: 'histogram', buckets: [1] })
      .metric();
    expect(() => histogram.value()).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED', message: 'TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value' }),
    );
    expect(() => server.metricFamily({ name: 'bad name', description: 'x', kind: 'gauge' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARG' }),
    );
    expect(() => server.metricFamily({ name: 'app_h', description: 'x', kind: 'histogram' })).toThrow('a histogram needs buckets');
    expect(() => server.metricFamily({ name: 'app_l', description: 'two\nlines', kind: 'gauge' })).toThrow('must be one line');
    expect(() => server.metricFamily({ name: 'app_g', description: 'x', kind: 'gauge', buckets: [1] })).toThrow('a gauge has no buckets');
    expect(() => server.metricFamily({ name: 'app_h2', description: 'x', kind: 'histogram', buckets: [2, 1] })).toThrow(
      'buckets must be strictly ascending',
    );
  });

  it('shares a name between families of one kind, and refuses another kind', async () => {
    const server = await started();
    expect(() => server.metricFamily({ name: 'nv_inference_count', description: 'mine', kind: 'gauge' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARG', message: 'Family name already exists with different type' }),
    );
    const first = server.metricFamily({ name: 'app_shared_total', description: 'shared', kind: 'counter' });
    const second = server.metricFamily({ name: 'app_shared_total', description: 'shared', kind: 'counter' });
    first.metric({ x: '1' }).increment(2);
    second.metric({ x: '1' }).increment(3);
    expect(first.metric({ x: '1' }).value()).toBe(5);
    expect(valueOf(await server.metricsSamples(), 'app_shared_total', { x: '1' })).toBe(5);
    expect(() => server.metricFamily({ name: 'app_shared_total', description: 'shared', kind: 'gauge' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARG' }),
    );
  });

  it('deletes each metric and family once: explicitly, or at stop', async () => {
    const server = await started();
    const family = server.metricFamily({ name: 'app_deleted_total', description: 'd', kind: 'counter' });
    const metric = family.metric({ k: 'v' });
    metric.increment(5);
    metric.delete();
    metric.delete();
    expect(metric.deleted).toBe(true);
    expect(() => metric.increment()).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: expect.stringContaining('deleted') }));
    expect(sample(await server.metricsSamples(), 'app_deleted_total', { k: 'v' })).toBeUndefined();
    family.metric({ k: 'again' }).increment(1);
    family.delete();
    expect(family.deleted).toBe(true);
    expect(() => family.metric()).toThrow(expect.objectContaining({ code: 'INVALID_ARG' }));
    expect(sample(await server.metricsSamples(), 'app_deleted_total', { k: 'again' })).toBeUndefined();

    const kept = server.metricFamily({ name: 'app_until_stop', description: 'u', kind: 'gauge' });
    const gauge = kept.metric();
    gauge.set(7);
    await server.stop();
    expect(kept.deleted).toBe(true);
    expect(gauge.deleted).toBe(true);
    const next = await started();
    expect(sample(await next.metricsSamples(), 'app_until_stop', {})).toBeUndefined();
    expect(() => server.metricFamily({ name: 'app_x', description: 'x', kind: 'gauge' })).toThrow(
      expect.objectContaining({ code: 'UNAVAILABLE' }),
    );
  });

  it('histograms need C API 1.34: UNSUPPORTED on a 1.24 library, counters still work', async () => {
    const server = await Server.start({ modelRepository: MODELS, libraryPath: OLD_API_LIBRARY, modelControlMode: 'explicit', ...QUIET });
    servers.push(server);
    expect(() => server.metricFamily({ name: 'old_seconds', description: 'o', kind: 'histogram', buckets: [1] })).toThrow(
      expect.objectContaining({
        code: 'UNSUPPORTED',
        message: `TRITONSERVER_MetricNewWithArgs needs C API 1.34; the loaded library (${OLD_API_LIBRARY}) implements 1.24`,
      }),
    );
    const counter = server.metricFamily({ name: 'old_total', description: 'o', kind: 'counter' }).metric();
    counter.increment(2);
    expect(counter.value()).toBe(2);
  });
});

describe('statistics', () => {
  it('after N requests to a batching model: inference_count N, execution_count ≤ N', async () => {
    const server = await started();
    const model = await server.loadModel('identity_fp32');
    const n = 20;
    await Promise.all(Array.from({ length: n }, (_, i) => model.infer(identity(i))));
    // Statistics, like the metrics, are counted when Triton releases the request.
    let [stats] = await model.statistics();
    for (let i = 0; i < 200 && (stats?.inference_count ?? 0) < n; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      [stats] = await model.statistics();
    }
    expect(stats).toBeDefined();
    expect(stats!.name).toBe('identity_fp32');
    expect(stats!.version).toBe('1');
    expect(stats!.inference_count).toBe(n);
    expect(stats!.execution_count).toBeGreaterThanOrEqual(1);
    expect(stats!.execution_count).toBeLessThanOrEqual(n);
    expect(stats!.inference_stats.success.count).toBe(n);
    expect(stats!.inference_stats.fail).toEqual({ count: 0, ns: 0n });
    expect(typeof stats!.inference_stats.compute_infer.ns).toBe('bigint');
    expect(stats!.inference_stats.success.ns).toBeGreaterThan(0n);
    expect(stats!.last_inference).toBeGreaterThan(Date.now() - 10 * 60_000);
    // Every execution is listed under its batch size; the batches hold all N requests.
    const executions = stats!.batch_stats.reduce((sum, b) => sum + b.compute_infer.count, 0);
    const requests = stats!.batch_stats.reduce((sum, b) => sum + b.batch_size * b.compute_infer.count, 0);
    expect(executions).toBe(stats!.execution_count);
    expect(requests).toBe(n);
    expect(stats!.response_stats).toEqual({});

    const all = await server.statistics();
    expect(all.find((s) => s.name === 'identity_fp32')?.inference_count).toBe(n);
  });

  it('a decoupled Python model counts one request and one execution, and no response_stats', async () => {
    // Real Triton's Python backend reports no per-response statistics
    // (observed: "response_stats":{} after a three-response stream).
    const server = await started();
    const model = await server.loadModel('repeat_int32');
    let responses = 0;
    for await (const response of model.stream({ inputs: { IN: new Int32Array([4, 5, 6]), DELAY_MS: new Uint32Array([0]) } })) {
      expect(response.outputs.OUT).toBeDefined();
      responses++;
    }
    expect(responses).toBe(3);
    let [stats] = await model.statistics();
    for (let i = 0; i < 200 && (stats?.inference_count ?? 0) < 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      [stats] = await model.statistics();
    }
    expect(stats).toMatchObject({ inference_count: 1, execution_count: 1, response_stats: {} });
    expect(stats!.inference_stats.success.count).toBe(1);
  });

  it('types response_stats per response index', () => {
    const dur = (count: number, ns: number) => `{"count":${count},"ns":${ns}}`;
    const zero = dur(0, 0);
    const stats = `{"compute_infer":${dur(1, 10)},"compute_output":${dur(1, 2)},"success":${dur(1, 12)},"fail":${zero},"empty_response":${zero},"cancel":${zero}}`;
    const inference = ['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output', 'cache_hit', 'cache_miss']
      .map((key) => `"${key}":${zero}`)
      .join(',');
    const text = `{"model_stats":[{"name":"d","version":"1","last_inference":0,"inference_count":1,"execution_count":1,"inference_stats":{${inference}},"response_stats":{"0":${stats},"1":${stats}},"batch_stats":[]}]}`;
    const [parsed] = parseStatisticsJson(text);
    expect(Object.keys(parsed!.response_stats)).toEqual(['0', '1']);
    expect(parsed!.response_stats['1']!.compute_infer).toEqual({ count: 1, ns: 10n });
    // memory_usage is optional in older Tritons and defaults to [].
    expect(parsed!.memory_usage).toEqual([]);
  });

  it('reads 64-bit counters exactly', () => {
    const dur = (count: string, ns: string) => `{"count":${count},"ns":${ns}}`;
    const zero = dur('0', '0');
    const text = `{"model_stats":[{"name":"m","version":"1","last_inference":1764578547123,"inference_count":3,"execution_count":2,"inference_stats":{"success":${dur('3', '18446744073709551615')},"fail":${zero},"queue":${dur('3', '9007199254740993')},"compute_input":${zero},"compute_infer":${zero},"compute_output":${zero},"cache_hit":${zero},"cache_miss":${zero}},"response_stats":{},"batch_stats":[],"memory_usage":[]}]}`;
    const [stats] = parseStatisticsJson(text);
    expect(stats!.inference_stats.success.ns).toBe(18446744073709551615n);
    expect(stats!.inference_stats.queue.ns).toBe(9007199254740993n);
    expect(stats!.last_inference).toBe(1764578547123);
    const tooMany = text.replace('"inference_count":3', '"inference_count":9007199254740993');
    expect(() => parseStatisticsJson(tooMany)).toThrow(expect.objectContaining({ code: 'INTERNAL', message: expect.stringContaining('exceeds 2^53') }));
    expect(() => parseStatisticsJson('{"model_stats":[{"name":"m"}]}')).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
  });
});

describe('metricsHandler', () => {
  async function listen(server: HttpServer): Promise<string> {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  }

  async function appRegistry(): Promise<Registry> {
    const registry = new Registry();
    const counter = new Counter({ name: 'app_http_requests_total', help: 'HTTP requests', labelNames: ['route'], registers: [registry] });
    counter.inc({ route: '/predict' }, 3);
    return registry;
  }

  async function check(url: string, served: number): Promise<void> {
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe(PROMETHEUS_CONTENT_TYPE);
    const families = parsePrometheusTextFormat(await response.text());
    const names = families.map((f) => f.name);
    expect(new Set(names).size).toBe(names.length);
    const success = families.find((f) => f.name === 'nv_inference_request_success');
    expect(success?.type).toBe('COUNTER');
    // sum(rate(nv_inference_request_success{model="identity_fp32"}[1m])) by (model) selects this series.
    const series = success?.metrics.find((m) => m.labels?.model === 'identity_fp32');
    expect(Number(series?.value)).toBeGreaterThanOrEqual(served);
    const app = families.find((f) => f.name === 'app_http_requests_total');
    expect(app?.metrics).toEqual([{ labels: { route: '/predict' }, value: '3' }]);
  }

  async function serving(): Promise<Server> {
    const server = await started();
    const model = await server.loadModel('identity_fp32');
    await model.infer(identity(1));
    // Triton counts a request when it releases it, which can be just after
    // its response arrived: wait for the count before scraping.
    const counted = async (): Promise<number> =>
      (await server.metricsSamples())
        .filter((sample) => sample.name === 'nv_inference_request_success' && sample.labels.model === 'identity_fp32')
        .reduce((sum, sample) => sum + sample.value, 0);
    for (let i = 0; i < 200 && (await counted()) < 1; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    return server;
  }

  it('serves Triton’s and prom-client’s metrics through node:http', async () => {
    const server = await serving();
    const handler = metricsHandler(server, { registry: await appRegistry() });
    await check(await listen(createServer((req, res) => void handler(req, res))), 1);
  });

  it('gives sum(rate(nv_inference_request_success{model=…}[1m])) by (model) what it needs', async () => {
    const server = await serving();
    const handler = metricsHandler(server);
    const url = await listen(createServer((req, res) => void handler(req, res)));
    // What the query does with two scrapes: select by label, sum the increase per model.
    const successes = async (): Promise<number> => {
      const families = parsePrometheusTextFormat(await (await fetch(url)).text());
      const series = families.find((f) => f.name === 'nv_inference_request_success')?.metrics ?? [];
      return series.filter((m) => m.labels?.model === 'identity_fp32').reduce((sum, m) => sum + Number(m.value), 0);
    };
    const first = await successes();
    const model = server.model('identity_fp32');
    await Promise.all([1, 2, 3].map((i) => model.infer(identity(i))));
    let second = await successes();
    for (let i = 0; i < 200 && second - first < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      second = await successes();
    }
    expect(second - first).toBe(3);
  });

  it('serves them through Express', async () => {
    const server = await serving();
    const app = express();
    app.get('/metrics', metricsHandler(server, { registry: await appRegistry() }));
    await check(await listen(createServer(app)), 1);
  });

  it('serves them through Fastify', async () => {
    const server = await serving();
    const app = Fastify();
    app.get('/metrics', metricsHandler(server, { registry: await appRegistry() }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    await check(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/metrics`, 1);
  });

  it('refuses a family that both sources define, and answers 503 once stopped', async () => {
    const server = await serving();
    const registry = new Registry();
    new Counter({ name: 'nv_inference_count', help: 'clash', registers: [registry] }).inc();
    const handler = metricsHandler(server, { registry });
    const url = await listen(createServer((req, res) => void handler(req, res)));
    let response = await fetch(url);
    expect(response.status).toBe(500);
    expect(await response.text()).toBe(
      "metric family 'nv_inference_count' comes from both Triton and the prom-client registry; rename one of them\n",
    );
    await server.stop();
    response = await fetch(url);
    expect(response.status).toBe(503);
    expect(await response.text()).toBe('the server has been stopped\n');
  });
});

describe('package metrics', () => {
  async function until(condition: () => boolean): Promise<void> {
    for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  it('are off by default and, once on, count in-flight requests, submission time and event-loop delay', async () => {
    const server = await started();
    const model = await server.loadModel('identity_fp32');
    const slow = await server.loadModel('slow');
    expect((await collectMetricsText(server)).includes('tritonserver_node_')).toBe(false);

    const own = server.packageMetrics();
    expect(server.packageMetrics()).toBe(own);
    const n = 5;
    await Promise.all(Array.from({ length: n }, (_, i) => model.infer(identity(i))));
    const abort = new AbortController();
    const pending = slow.infer({ inputs: { INPUT0: new Float32Array([1]), DELAY_MS: new Uint32Array([60_000]) }, signal: abort.signal });
    await until(() => own.inFlight('slow') === 1);

    const text = await collectMetricsText(server, { packageMetrics: true });
    const samples = parseMetricsText(text);
    expect(sample(samples, 'tritonserver_node_requests_in_flight', { model: 'slow' })).toMatchObject({ type: 'gauge', value: 1 });
    expect(sample(samples, 'tritonserver_node_requests_in_flight', { model: 'identity_fp32' })?.value).toBe(0);
    expect(sample(samples, 'tritonserver_node_submit_seconds_count', { model: 'identity_fp32' })).toMatchObject({ type: 'histogram', value: n });
    expect(valueOf(samples, 'tritonserver_node_submit_seconds_sum', { model: 'identity_fp32' })).toBeGreaterThan(0);
    const buckets = samples.filter((s) => s.name === 'tritonserver_node_submit_seconds_bucket' && s.labels.model === 'identity_fp32');
    expect(buckets.at(-1)).toMatchObject({ labels: { le: '+Inf' }, value: n });
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    for (const quantile of ['0.5', '0.99', '1']) {
      expect(valueOf(samples, 'tritonserver_node_event_loop_delay_seconds', { quantile })).toBeGreaterThanOrEqual(0);
    }
    // The same text read by another parser: every family once, values agree.
    const families = parsePrometheusTextFormat(text);
    const inFlight = families.find((f) => f.name === 'tritonserver_node_requests_in_flight');
    expect(inFlight?.metrics.find((m) => m.labels?.model === 'slow')?.value).toBe('1');
    expect(new Set(families.map((f) => f.name)).size).toBe(families.length);

    abort.abort();
    await rejection(pending);
    await until(() => own.inFlight('slow') === 0);
    expect(own.inFlight('slow')).toBe(0);
  });
});
