/**
 * Per-request timelines from Triton's trace API (level TIMESTAMPS), and
 * their export as OpenTelemetry spans.
 *
 * `infer({ ..., trace: true })` arms a native trace for that one request
 * (native/observability/trace.cc): Triton reports each activity with a steady-clock
 * timestamp in nanoseconds (CLOCK_MONOTONIC, the clock of
 * `process.hrtime.bigint()`), and the records reach JS once Triton releases
 * the trace. Ensemble steps are child traces (their `parentId` is the
 * ensemble's trace id). Without `trace` nothing of this runs.
 */
import { TritonError } from '../errors.js';
import { native } from '../native.js';

/** `TRITONSERVER_InferenceTraceActivity` names, by value. */
export const TRACE_ACTIVITIES = [
  'REQUEST_START',
  'QUEUE_START',
  'COMPUTE_START',
  'COMPUTE_INPUT_END',
  'COMPUTE_OUTPUT_START',
  'COMPUTE_END',
  'REQUEST_END',
  'TENSOR_QUEUE_INPUT',
  'TENSOR_BACKEND_INPUT',
  'TENSOR_BACKEND_OUTPUT',
  'CUSTOM_ACTIVITY',
] as const;
/** A `TRITONSERVER_InferenceTraceActivity` name (one of {@link TRACE_ACTIVITIES}). */
export type TraceActivityName = (typeof TRACE_ACTIVITIES)[number];

/** One timestamped activity of a traced request, as Triton reported it. */
export interface TraceActivity {
  /** What happened; an activity value this package does not know reads as `CUSTOM_ACTIVITY`. */
  name: TraceActivityName;
  /** Steady clock (CLOCK_MONOTONIC), nanoseconds: compare with `process.hrtime.bigint()`. */
  ns: bigint;
}

/** Durations between the activities, in nanoseconds (undefined when an activity is missing). */
export interface TraceDurations {
  /** REQUEST_START → REQUEST_END. */
  total?: bigint;
  /** QUEUE_START → COMPUTE_START. */
  queue?: bigint;
  /** COMPUTE_START → COMPUTE_INPUT_END. */
  computeInput?: bigint;
  /** COMPUTE_INPUT_END → COMPUTE_OUTPUT_START. */
  computeInfer?: bigint;
  /** COMPUTE_OUTPUT_START → COMPUTE_END. */
  computeOutput?: bigint;
}

/** The timeline of one trace: a request, or an ensemble step (a child). */
export interface RequestTrace {
  /** Triton's trace id (unique per trace within the server). */
  id: bigint;
  /** 0n for the request's own trace. */
  parentId: bigint;
  /** Name of the model the traced request ran on (for a child, the ensemble step's model). */
  model: string;
  /** Version of that model. */
  version: number;
  /** In the order Triton reported them. */
  activities: TraceActivity[];
  /** Phase durations computed from `activities`, in nanoseconds. */
  durations: TraceDurations;
  /** Ensemble steps. */
  children: RequestTrace[];
}

/** The request's trace, with the package's own view of it. */
export interface InferenceTrace extends RequestTrace {
  /** When `infer()`/`stream()` was called (same clock as the activities). */
  calledNs: bigint;
  /** From the call to Triton's REQUEST_START: the package's own overhead. */
  callToStartNs?: bigint;
}

/** What the exporter needs of an OpenTelemetry `Tracer` (`@opentelemetry/api` is an optional peer dependency). */
export interface TracerLike {
  /**
   * Starts a span (OpenTelemetry's `Tracer.startSpan`).
   *
   * @param name - `triton <model>` for a request, or a phase (`queue`,
   *   `compute_input`, `compute_infer`, `compute_output`).
   * @param options - `startTime` as OpenTelemetry's HrTime (epoch
   *   `[seconds, nanoseconds]`); attributes `triton.model`,
   *   `triton.model_version` and `triton.trace_id` on request spans.
   * @param context - The parent context (the caller's active one, or the
   *   request span's for phases and ensemble steps).
   */
  startSpan(name: string, options?: { startTime?: [number, number]; attributes?: Record<string, string | number> }, context?: unknown): SpanLike;
}
/** What the exporter needs of an OpenTelemetry `Span`. */
export interface SpanLike {
  /**
   * Ends the span.
   *
   * @param endTime - OpenTelemetry's HrTime: epoch `[seconds, nanoseconds]`.
   */
  end(endTime?: [number, number]): void;
}

/** Options of a traced request (`InferenceRequest.trace`; `trace: true` is `{}`). */
export interface TraceOptions {
  /** Also export the timeline as spans, under the caller's active span. */
  tracer?: TracerLike;
  /** Called with the trace once complete (for `stream()`, whose last response may come without a body). */
  onTrace?: (trace: InferenceTrace) => void;
}

function at(activities: TraceActivity[], name: TraceActivityName): bigint | undefined {
  return activities.find((activity) => activity.name === name)?.ns;
}

function between(activities: TraceActivity[], from: TraceActivityName, to: TraceActivityName): bigint | undefined {
  const start = at(activities, from);
  const end = at(activities, to);
  return start === undefined || end === undefined ? undefined : end - start;
}

function durations(activities: TraceActivity[]): TraceDurations {
  const result: TraceDurations = {};
  const set = (key: keyof TraceDurations, value: bigint | undefined): void => {
    if (value !== undefined) result[key] = value;
  };
  set('total', between(activities, 'REQUEST_START', 'REQUEST_END'));
  set('queue', between(activities, 'QUEUE_START', 'COMPUTE_START'));
  set('computeInput', between(activities, 'COMPUTE_START', 'COMPUTE_INPUT_END'));
  set('computeInfer', between(activities, 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START'));
  set('computeOutput', between(activities, 'COMPUTE_OUTPUT_START', 'COMPUTE_END'));
  return result;
}

/** Builds the request's timeline (and its children) from the addon's flat records. */
export function buildTrace(flat: ReadonlyArray<bigint | string | number>, calledNs: bigint): InferenceTrace {
  const byId = new Map<bigint, RequestTrace>();
  const order: RequestTrace[] = [];
  for (let i = 0; i + 5 < flat.length; i += 6) {
    const id = flat[i] as bigint;
    let trace = byId.get(id);
    if (trace === undefined) {
      trace = {
        id,
        parentId: flat[i + 1] as bigint,
        model: flat[i + 2] as string,
        version: flat[i + 3] as number,
        activities: [],
        durations: {},
        children: [],
      };
      byId.set(id, trace);
      order.push(trace);
    }
    trace.activities.push({ name: TRACE_ACTIVITIES[flat[i + 4] as number] ?? 'CUSTOM_ACTIVITY', ns: flat[i + 5] as bigint });
  }
  const root = order.find((trace) => trace.parentId === 0n);
  if (root === undefined) throw new TritonError('INTERNAL', 'Triton reported no activity for the traced request');
  for (const trace of order) {
    trace.durations = durations(trace.activities);
    if (trace !== root) (byId.get(trace.parentId) ?? root).children.push(trace);
  }
  const start = at(root.activities, 'REQUEST_START');
  const result: InferenceTrace = { ...root, calledNs };
  if (start !== undefined) result.callToStartNs = start - calledNs;
  return result;
}

/** The OpenTelemetry API, loaded only when a tracer is given. */
interface OpenTelemetryApi {
  context: { active(): unknown };
  trace: { setSpan(context: unknown, span: SpanLike): unknown };
}
let otel: Promise<OpenTelemetryApi> | undefined;

/** @internal Loads @opentelemetry/api (an optional peer dependency). */
export function loadOpenTelemetry(): Promise<OpenTelemetryApi> {
  otel ??= import('@opentelemetry/api').then(
    (api) => api as unknown as OpenTelemetryApi,
    (error: unknown) => {
      otel = undefined;
      throw new TritonError('UNAVAILABLE', `trace.tracer needs the optional peer dependency @opentelemetry/api: ${(error as Error).message}`);
    },
  );
  return otel;
}

/** Steady-clock ns → epoch [seconds, nanoseconds] (OpenTelemetry's HrTime). */
function toHrTime(ns: bigint, offsetNs: bigint): [number, number] {
  const epoch = ns + offsetNs;
  return [Number(epoch / 1_000_000_000n), Number(epoch % 1_000_000_000n)];
}

const PHASES: Array<[string, TraceActivityName, TraceActivityName]> = [
  ['queue', 'QUEUE_START', 'COMPUTE_START'],
  ['compute_input', 'COMPUTE_START', 'COMPUTE_INPUT_END'],
  ['compute_infer', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START'],
  ['compute_output', 'COMPUTE_OUTPUT_START', 'COMPUTE_END'],
];

/**
 * Exports a trace as spans: `triton <model>` from REQUEST_START to
 * REQUEST_END under `parent`, with one child span per phase and one span
 * tree per ensemble step.
 */
export function exportSpans(trace: RequestTrace, tracer: TracerLike, api: OpenTelemetryApi, parent: unknown): void {
  // Steady clock → wall clock, measured now (both clocks read back to back).
  const offsetNs = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();
  const exportOne = (node: RequestTrace, parentContext: unknown): void => {
    const start = at(node.activities, 'REQUEST_START') ?? node.activities[0]?.ns;
    const end = at(node.activities, 'REQUEST_END') ?? node.activities[node.activities.length - 1]?.ns;
    if (start === undefined || end === undefined) return;
    const span = tracer.startSpan(
      `triton ${node.model}`,
      {
        startTime: toHrTime(start, offsetNs),
        attributes: { 'triton.model': node.model, 'triton.model_version': node.version, 'triton.trace_id': node.id.toString() },
      },
      parentContext,
    );
    const inner = api.trace.setSpan(parentContext, span);
    for (const [name, from, to] of PHASES) {
      const phaseStart = at(node.activities, from);
      const phaseEnd = at(node.activities, to);
      if (phaseStart === undefined || phaseEnd === undefined) continue;
      tracer.startSpan(name, { startTime: toHrTime(phaseStart, offsetNs) }, inner).end(toHrTime(phaseEnd, offsetNs));
    }
    for (const child of node.children) exportOne(child, inner);
    span.end(toHrTime(end, offsetNs));
  };
  exportOne(trace, parent);
}

/** Triton trace objects the package has not deleted yet (0 when no traced request is in flight). */
export function liveTraces(): number {
  return native.liveTraces();
}
