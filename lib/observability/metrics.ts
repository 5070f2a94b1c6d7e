/**
 * Triton's metrics text as typed samples: a small parser of Prometheus'
 * text exposition format (0.0.4). The one npm parser of the format
 * (parse-prometheus-text-format 1.1.1) drops the labels, `_sum` and `_count`
 * of labelled histograms, which custom histograms are; the tests use it to
 * cross-check this parser on counters and gauges.
 */
import { TritonError } from '../errors.js';

/** A metric family's `# TYPE` in Prometheus text (`untyped` when the text declares none). */
export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

/** One sample (one line) of Prometheus text. */
export interface MetricSample {
  /** The sample's own name: histograms give `<family>_bucket`, `_sum`, `_count`. */
  name: string;
  /** The family it belongs to (equal to `name` for counters and gauges). */
  family: string;
  /** The sample's labels, unescaped (empty when it has none); a histogram's `le` is among them. */
  labels: Record<string, string>;
  /** The value; `+Inf`, `-Inf` and `NaN` are read as the JS numbers. */
  value: number;
  /** The family's `# TYPE` (`untyped` when not declared). */
  type: MetricType;
  /** The family's `# HELP` text, unescaped (`''` when not declared). */
  help: string;
  /** Milliseconds since the epoch, when the line has a timestamp. */
  timestamp?: number;
}

const TYPES: ReadonlySet<string> = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/** Prometheus writes infinities as +Inf / -Inf, which Number() does not read. */
function sampleValue(text: string): number {
  if (text === '+Inf' || text === 'Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  if (text === 'NaN' || text === 'Nan') return Number.NaN;
  const value = Number(text);
  if (text === '' || Number.isNaN(value)) throw new Error(`'${text}' is not a sample value`);
  return value;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

function unescapeHelp(text: string): string {
  return text.replace(/\\(\\|n)/g, (_, c: string) => (c === 'n' ? '\n' : '\\'));
}

/** Reads `{name="value",…}` from `line` at `start`; returns the labels and the index after `}`. */
function readLabels(line: string, start: number): [Record<string, string>, number] {
  const labels: Record<string, string> = {};
  let i = start + 1;
  for (;;) {
    while (line[i] === ' ') i++;
    if (line[i] === '}') return [labels, i + 1];
    const name = LABEL_NAME.exec(line.slice(i))?.[0];
    if (name === undefined) throw new Error('bad label name');
    i += name.length;
    while (line[i] === ' ') i++;
    if (line[i] !== '=' || line[i + 1] !== '"') throw new Error(`label ${name} has no quoted value`);
    i += 2;
    let value = '';
    for (;;) {
      const c = line[i++];
      if (c === undefined) throw new Error(`label ${name} is not terminated`);
      if (c === '"') break;
      if (c === '\\') {
        const next = line[i++];
        value += next === 'n' ? '\n' : next === '"' ? '"' : next === '\\' ? '\\' : `\\${next ?? ''}`;
      } else {
        value += c;
      }
    }
    labels[name] = value;
    while (line[i] === ' ') i++;
    if (line[i] === ',') i++;
    else if (line[i] !== '}') throw new Error('expected , or } after a label');
  }
}

interface FamilyInfo {
  type: MetricType;
  help: string;
}

/** The family a sample name belongs to, given the families declared so far. */
function familyOf(name: string, families: Map<string, FamilyInfo>): string {
  if (families.has(name)) return name;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const type = families.get(base)?.type;
    if (type === 'histogram' || (type === 'summary' && suffix !== '_bucket')) return base;
  }
  return name;
}

/** Parses Prometheus text exposition format into samples, in text order. */
export function parseMetricsText(text: string): MetricSample[] {
  const families = new Map<string, FamilyInfo>();
  const samples: MetricSample[] = [];
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const line = (lines[n] as string).trim();
    try {
      if (line === '') continue;
      if (line.startsWith('#')) {
        const match = /^#\s+(HELP|TYPE)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\s+(.*))?$/.exec(line);
        if (match === null) continue; // a comment
        const [, keyword, name, rest = ''] = match as unknown as [string, string, string, string | undefined];
        const family = families.get(name) ?? { type: 'untyped' as MetricType, help: '' };
        if (keyword === 'HELP') {
          family.help = unescapeHelp(rest);
        } else {
          const type = rest.trim().toLowerCase();
          if (!TYPES.has(type)) throw new Error(`unknown metric type '${rest}'`);
          family.type = type as MetricType;
        }
        families.set(name, family);
        continue;
      }
      const name = NAME.exec(line)?.[0];
      if (name === undefined) throw new Error('a sample must start with a metric name');
      let i = name.length;
      let labels: Record<string, string> = {};
      if (line[i] === '{') [labels, i] = readLabels(line, i);
      const fields = line.slice(i).trim().split(/\s+/);
      if (fields.length < 1 || fields.length > 2 || fields[0] === '') throw new Error('expected a value and an optional timestamp');
      const family = familyOf(name, families);
      const info = families.get(family);
      const sample: MetricSample = {
        name,
        family,
        labels,
        value: sampleValue(fields[0] as string),
        type: info?.type ?? 'untyped',
        help: info?.help ?? '',
      };
      if (fields[1] !== undefined) sample.timestamp = Number(fields[1]);
      samples.push(sample);
    } catch (error) {
      throw new TritonError(
        'INTERNAL',
        `metrics text is not valid Prometheus exposition format: line ${n + 1} (${line}): ${(error as Error).message}`,
      );
    }
  }
  return samples;
}
