/**
 * The client's own metrics, in the package's Prometheus form (off until
 * `client.packageMetrics()` is called; served by `metricsHandler(client,
 * { packageMetrics: true })` beside the server's):
 *
 * - `tritonserver_node_client_requests_total{model,endpoint}` (counter):
 *   inferences that got their response.
 * - `tritonserver_node_client_failures_total{model,endpoint,code}` (counter):
 *   inferences that failed, by TritonError code.
 * - `tritonserver_node_client_retries_total{endpoint}` (counter): attempts
 *   repeated on another endpoint after this one failed (connection lost, or UNAVAILABLE).
 * - `tritonserver_node_client_request_duration_seconds{model,endpoint}`
 *   (histogram): from `infer()`/`stream()` to the last response or the failure.
 */
import { escapeLabel, Histogram } from '../observability/histogram.js';

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * A client's own metrics (`tritonserver_node_client_*`, listed above):
 * requests, failures and retries per endpoint, and request durations. Made
 * by `client.packageMetrics()`, which also turns them on.
 */
export class ClientMetrics {
  readonly #requests = new Map<string, number>();
  readonly #failures = new Map<string, number>();
  readonly #retries = new Map<string, number>();
  readonly #durations = new Map<string, Histogram>();

  /** @internal Use `client.packageMetrics()`. */
  constructor() {}

  /** @internal One inference finished (`code` undefined: it succeeded). */
  finished(model: string, endpoint: string, seconds: number, code: string | undefined): void {
    const labels = `model="${escapeLabel(model)}",endpoint="${escapeLabel(endpoint)}"`;
    if (code === undefined) this.#requests.set(labels, (this.#requests.get(labels) ?? 0) + 1);
    else {
      const key = `${labels},code="${code}"`;
      this.#failures.set(key, (this.#failures.get(key) ?? 0) + 1);
    }
    let histogram = this.#durations.get(labels);
    if (histogram === undefined) {
      histogram = new Histogram(BUCKETS);
      this.#durations.set(labels, histogram);
    }
    histogram.observe(seconds);
  }

  /** @internal An attempt on `endpoint` is being repeated elsewhere. */
  retried(endpoint: string): void {
    const labels = `endpoint="${escapeLabel(endpoint)}"`;
    this.#retries.set(labels, (this.#retries.get(labels) ?? 0) + 1);
  }

  /** The metrics in Prometheus text format. */
  text(): string {
    const lines: string[] = [];
    const counter = (name: string, help: string, values: Map<string, number>): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const [labels, value] of values) lines.push(`${name}{${labels}} ${value}`);
    };
    counter('tritonserver_node_client_requests_total', 'Remote inferences that got their response.', this.#requests);
    counter('tritonserver_node_client_failures_total', 'Remote inferences that failed, by TritonError code.', this.#failures);
    counter('tritonserver_node_client_retries_total', 'Attempts repeated on another endpoint after this one failed (connection lost, or UNAVAILABLE).', this.#retries);
    const name = 'tritonserver_node_client_request_duration_seconds';
    lines.push(`# HELP ${name} From infer()/stream() to the last response or the failure.`, `# TYPE ${name} histogram`);
    for (const [labels, histogram] of this.#durations) lines.push(...histogram.lines(name, labels));
    return `${lines.join('\n')}\n`;
  }
}
