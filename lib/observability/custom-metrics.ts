/**
 * Custom metrics in Triton's own registry (`TRITONSERVER_MetricFamily*`,
 * `TRITONSERVER_Metric*`): they are served in the same scrape as Triton's
 * `nv_*` families. Made with `server.metricFamily(...)`.
 *
 * Lifetime: each family and metric is deleted in Triton exactly once — by
 * `delete()`, or when the server stops. Triton cannot take a family out of
 * its registry (a deleted family's series disappear, its name stays taken
 * for the process): a family of a name already taken — Triton's own
 * included — must be of the same kind, and then shares its series.
 */
import { z } from 'zod';
import { TritonError } from '../errors.js';
import { native, type NativeHandle } from '../native.js';

/** `TRITONSERVER_MetricKind` values. */
const KINDS = { counter: 0, gauge: 1, histogram: 2 } as const;

/**
 * Options of `server.metricFamily()` (see {@link MetricFamilyOptions}); also
 * checks that `buckets` are given for histograms only, strictly ascending.
 */
export const metricFamilyOptionsSchema = z
  .strictObject({
    /** Prometheus metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`. */
    name: z.string().regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'must be a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)'),
    /** The HELP text, one line: Triton writes it into the exposition text unescaped. */
    description: z.string().refine((text) => !/[\r\n]/.test(text), 'must be one line (Triton prints it unescaped)'),
    /**
     * The metric kind: `counter` (only goes up), `gauge` (set or moved either
     * way) or `histogram` (observations counted into `buckets`).
     */
    kind: z.enum(['counter', 'gauge', 'histogram']),
    /** Histogram bucket upper bounds, ascending (histograms need C API 1.34). */
    buckets: z.array(z.number().finite()).nonempty().optional(),
  })
  .superRefine((options, ctx) => {
    if (options.kind === 'histogram' && options.buckets === undefined) {
      ctx.addIssue({ code: 'custom', path: ['buckets'], message: 'a histogram needs buckets' });
    }
    if (options.kind !== 'histogram' && options.buckets !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['buckets'], message: `a ${options.kind} has no buckets` });
    }
    const buckets = options.buckets ?? [];
    if (buckets.some((bound, i) => i > 0 && bound <= (buckets[i - 1] as number))) {
      ctx.addIssue({ code: 'custom', path: ['buckets'], message: 'buckets must be strictly ascending' });
    }
  });

/**
 * Options of `server.metricFamily()`: name, HELP text, kind and (histograms)
 * buckets. Invalid options throw `TritonError('INVALID_ARG')`.
 */
export type MetricFamilyOptions = z.input<typeof metricFamilyOptionsSchema>;
/** A custom metric's kind: `'counter'`, `'gauge'` or `'histogram'`. */
export type MetricKind = MetricFamilyOptions['kind'];

const labelsSchema = z.record(z.string().regex(/^[a-zA-Z_][a-zA-Z0-9_]*$/, 'must be a Prometheus label name'), z.string());

function deleted(what: string): TritonError {
  return new TritonError('INVALID_ARG', `${what} has been deleted`);
}

/** One series (a label set) of a custom metric family. */
export class Metric {
  /** The family this series belongs to. */
  readonly family: MetricFamily;
  /** The series' label set (frozen; label names sorted). */
  readonly labels: Readonly<Record<string, string>>;
  #handle: NativeHandle | undefined;

  /** @internal Use `family.metric(labels)`. */
  constructor(family: MetricFamily, labels: Record<string, string>, handle: NativeHandle) {
    this.family = family;
    this.labels = Object.freeze({ ...labels });
    this.#handle = handle;
  }

  /** The family's kind, which decides the methods that apply. */
  get kind(): MetricKind {
    return this.family.kind;
  }

  /**
   * Whether the series was deleted ({@link Metric.delete}, its family's
   * delete, or the server's stop); the methods then throw
   * `TritonError('INVALID_ARG')`.
   */
  get deleted(): boolean {
    return this.#handle === undefined;
  }

  #live(): NativeHandle {
    if (this.#handle === undefined) throw deleted(`metric ${this.family.name}${JSON.stringify(this.labels)}`);
    return this.#handle;
  }

  /** Counters and gauges: adds `amount` (default 1; counters refuse negative amounts). */
  increment(amount = 1): void {
    native.metricIncrement(this.#live(), amount);
  }

  /** Gauges: sets the value. */
  set(value: number): void {
    native.metricSet(this.#live(), value);
  }

  /** Histograms: records one observation. */
  observe(value: number): void {
    native.metricObserve(this.#live(), value);
  }

  /** Counters and gauges: the current value. */
  value(): number {
    return native.metricValue(this.#live());
  }

  /** Removes this series from Triton's registry. Idempotent. */
  delete(): void {
    if (this.#handle === undefined) return;
    native.metricDelete(this.#handle);
    this.#handle = undefined;
    this.family.forget(this);
  }
}

/** A custom metric family in Triton's registry. */
export class MetricFamily {
  /** The Prometheus metric name. */
  readonly name: string;
  /** The HELP text. */
  readonly description: string;
  /** Counter, gauge or histogram. */
  readonly kind: MetricKind;
  /** Histograms: the bucket upper bounds, ascending (frozen); undefined for other kinds. */
  readonly buckets: readonly number[] | undefined;
  #handle: NativeHandle | undefined;
  readonly #metrics = new Map<string, Metric>();
  readonly #onDelete: (family: MetricFamily) => void;

  /** @internal Use `server.metricFamily(options)`. */
  constructor(libraryPath: string, options: MetricFamilyOptions, onDelete: (family: MetricFamily) => void) {
    const parsed = metricFamilyOptionsSchema.safeParse(options);
    if (!parsed.success) {
      throw new TritonError('INVALID_ARG', `invalid metric family: ${z.prettifyError(parsed.error)}`);
    }
    const { name, description, kind, buckets } = parsed.data;
    this.#handle = native.metricFamilyNew(libraryPath, KINDS[kind], name, description);
    this.name = name;
    this.description = description;
    this.kind = kind;
    this.buckets = buckets === undefined ? undefined : Object.freeze([...buckets]);
    this.#onDelete = onDelete;
  }

  /**
   * Whether the family was deleted ({@link MetricFamily.delete} or the
   * server's stop); {@link MetricFamily.metric} then throws
   * `TritonError('INVALID_ARG')`.
   */
  get deleted(): boolean {
    return this.#handle === undefined;
  }

  /** The series of these labels (the same object for the same labels). */
  metric(labels: Record<string, string> = {}): Metric {
    if (this.#handle === undefined) throw deleted(`metric family ${this.name}`);
    const parsed = labelsSchema.safeParse(labels);
    if (!parsed.success) throw new TritonError('INVALID_ARG', `invalid metric labels: ${z.prettifyError(parsed.error)}`);
    const entries = Object.entries(parsed.data).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const key = JSON.stringify(entries);
    let metric = this.#metrics.get(key);
    if (metric === undefined) {
      const handle = native.metricNew(this.#handle, entries.flat(), this.buckets === undefined ? undefined : [...this.buckets]);
      metric = new Metric(this, Object.fromEntries(entries), handle);
      this.#metrics.set(key, metric);
    }
    return metric;
  }

  /** @internal */
  forget(metric: Metric): void {
    for (const [key, value] of this.#metrics) if (value === metric) this.#metrics.delete(key);
  }

  /** Deletes every metric of the family, then the family. Idempotent. */
  delete(): void {
    if (this.#handle === undefined) return;
    for (const metric of [...this.#metrics.values()]) metric.delete();
    native.metricFamilyDelete(this.#handle);
    this.#handle = undefined;
    this.#onDelete(this);
  }
}
