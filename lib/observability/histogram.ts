/** A Prometheus histogram of the package's own metrics (package and client metrics), kept by hand: no prom-client needed. */

/** A label value as Prometheus' text format writes it. */
export function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export class Histogram {
  readonly #buckets: readonly number[];
  readonly #counts: number[];
  #count = 0;
  #sum = 0;

  /** `buckets`: upper bounds, ascending (`+Inf` is implied). */
  constructor(buckets: readonly number[]) {
    this.#buckets = buckets;
    this.#counts = buckets.map(() => 0);
  }

  observe(value: number): void {
    const bucket = this.#buckets.findIndex((bound) => value <= bound);
    if (bucket >= 0) this.#counts[bucket]!++;
    this.#count++;
    this.#sum += value;
  }

  /** Its series in text format: `<name>_bucket{<labels>,le=…}` (cumulative), `_sum`, `_count`. */
  lines(name: string, labels: string): string[] {
    const lines: string[] = [];
    let cumulative = 0;
    this.#buckets.forEach((bound, i) => {
      cumulative += this.#counts[i]!;
      lines.push(`${name}_bucket{${labels},le="${bound}"} ${cumulative}`);
    });
    lines.push(`${name}_bucket{${labels},le="+Inf"} ${this.#count}`, `${name}_sum{${labels}} ${this.#sum}`, `${name}_count{${labels}} ${this.#count}`);
    return lines;
  }
}
