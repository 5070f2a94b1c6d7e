// Types for parse-prometheus-text-format 1.1.1 (it ships none): prom2json's
// shape, values as written in the text. Used by the tests only.
declare module 'parse-prometheus-text-format' {
  export interface ParsedSample {
    labels?: Record<string, string>;
    value?: string;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  export interface ParsedFamily {
    name: string;
    help: string;
    /** Upper case: COUNTER, GAUGE, HISTOGRAM, SUMMARY, UNTYPED. */
    type: string;
    metrics: ParsedSample[];
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
