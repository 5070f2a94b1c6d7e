/**
 * The package's own view as Prometheus metrics, under the prefix
 * `tritonserver_node_` (off until `server.packageMetrics()` is called):
 *
 * - `tritonserver_node_requests_in_flight{model}` (gauge): requests handed
 *   to Triton whose last response has not reached JS yet.
 * - `tritonserver_node_submit_seconds{model}` (histogram): from the
 *   `infer()`/`stream()` call to the return of `TRITONSERVER_ServerInferAsync`,
 *   inside which Triton stamps REQUEST_START: the package's own overhead
 *   before Triton sees the request (metadata lookup, validation, native call).
 * - `tritonserver_node_event_loop_delay_seconds{quantile}` (gauges of the
 *   0.5, 0.99 and 1 quantiles since metrics were enabled, from
 *   `perf_hooks.monitorEventLoopDelay`): how long callbacks waited for the
 *   event loop, the latency every response adds in JS.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { TokenTable } from '../token-table.js';
import { escapeLabel, Histogram } from './histogram.js';

/** @internal What Inference reports when package metrics are on. */
export interface InferenceObserver {
  submitted(token: number, model: string, calledNs: bigint): void;
  finished(token: number): void;
}

const SUBMIT_BUCKETS = [0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1];

/**
 * The package's own metrics of one server (`tritonserver_node_*`, listed
 * above): requests in flight and submit latency per model, and event-loop
 * delay. Made by `server.packageMetrics()`, which also turns them on; the
 * server reports each request to it.
 */
export class PackageMetrics implements InferenceObserver {
  readonly #inFlight = new Map<string, number>();
  /** Model by token of each request in flight (not a Map: see TokenTable). */
  readonly #tokens = new TokenTable<string>();
  readonly #submit = new Map<string, Histogram>();
  #loop: IntervalHistogram | undefined;

  /** @internal Use `server.packageMetrics()`. */
  constructor() {
    this.#loop = monitorEventLoopDelay({ resolution: 10 });
    this.#loop.enable();
  }

  /**
   * Called by the package when Triton accepted a request: counts it in
   * flight and records its submit latency. Not meant to be called by users.
   *
   * @param token - The request's token, handed back to {@link PackageMetrics.finished}.
   * @param model - The model's name (the `model` label).
   * @param calledNs - `process.hrtime.bigint()` when `infer()`/`stream()` was called.
   */
  submitted(token: number, model: string, calledNs: bigint): void {
    const seconds = Number(process.hrtime.bigint() - calledNs) / 1e9;
    this.#tokens.set(token, model);
    this.#inFlight.set(model, (this.#inFlight.get(model) ?? 0) + 1);
    let histogram = this.#submit.get(model);
    if (histogram === undefined) {
      histogram = new Histogram(SUBMIT_BUCKETS);
      this.#submit.set(model, histogram);
    }
    histogram.observe(seconds);
  }

  /**
   * Called by the package when a request's last response reached JS: no
   * longer in flight. Unknown tokens are ignored. Not meant to be called by users.
   *
   * @param token - The token given to {@link PackageMetrics.submitted}.
   */
  finished(token: number): void {
    const model = this.#tokens.get(token);
    if (model === undefined) return;
    this.#tokens.delete(token);
    this.#inFlight.set(model, (this.#inFlight.get(model) ?? 1) - 1);
  }

  /** Requests in flight for `model` (as the gauge shows it). */
  inFlight(model: string): number {
    return this.#inFlight.get(model) ?? 0;
  }

  /** The metrics in Prometheus text format. */
  text(): string {
    const lines: string[] = [];
    lines.push(
      '# HELP tritonserver_node_requests_in_flight Requests handed to Triton whose last response has not reached JS yet.',
      '# TYPE tritonserver_node_requests_in_flight gauge',
    );
    for (const [model, count] of this.#inFlight) {
      lines.push(`tritonserver_node_requests_in_flight{model="${escapeLabel(model)}"} ${count}`);
    }
    lines.push(
      '# HELP tritonserver_node_submit_seconds From the infer()/stream() call until Triton accepted the request (REQUEST_START is stamped inside that call).',
      '# TYPE tritonserver_node_submit_seconds histogram',
    );
    for (const [model, histogram] of this.#submit) {
      lines.push(...histogram.lines('tritonserver_node_submit_seconds', `model="${escapeLabel(model)}"`));
    }
    if (this.#loop !== undefined) {
      lines.push(
        '# HELP tritonserver_node_event_loop_delay_seconds Event loop delay since package metrics were enabled (perf_hooks.monitorEventLoopDelay).',
        '# TYPE tritonserver_node_event_loop_delay_seconds gauge',
      );
      for (const [quantile, nanoseconds] of [
        ['0.5', this.#loop.percentile(50)],
        ['0.99', this.#loop.percentile(99)],
        ['1', this.#loop.max],
      ] as const) {
        lines.push(`tritonserver_node_event_loop_delay_seconds{quantile="${quantile}"} ${nanoseconds / 1e9}`);
      }
    }
    return `${lines.join('\n')}\n`;
  }

  /** @internal Stops the event-loop monitor (server stop). */
  close(): void {
    this.#loop?.disable();
    this.#loop = undefined;
  }
}
