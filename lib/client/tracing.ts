/**
 * OpenTelemetry for remote calls: a CLIENT span per inference under the
 * caller's active context, whose W3C `traceparent` goes with the request, so
 * a Triton started with `--trace-config mode=opentelemetry` continues the
 * trace. `@opentelemetry/api` (an optional peer) loads only when a request
 * asks with `trace: { tracer }`.
 */
import { TritonError } from '../errors.js';
import type { InferenceRequest } from '../surface.js';
import type { TracerLike } from '../observability/tracing.js';

type OpenTelemetryApi = typeof import('@opentelemetry/api');

let api: Promise<OpenTelemetryApi> | undefined;
function loadApi(): Promise<OpenTelemetryApi> {
  api ??= import('@opentelemetry/api').catch((error: unknown) => {
    api = undefined;
    throw new TritonError('UNAVAILABLE', "trace: { tracer } needs the optional peer dependency @opentelemetry/api: npm install @opentelemetry/api", { cause: error });
  });
  return api;
}

/** What a real OpenTelemetry span offers beyond `TracerLike`'s minimum. */
interface Span {
  end(): void;
  spanContext?(): { traceId: string; spanId: string; traceFlags: number };
  setStatus?(status: { code: number; message?: string }): void;
  setAttribute?(key: string, value: string | number): void;
}

/** A started client span and the header that carries it. */
export interface ClientSpan {
  /** `{ traceparent }` to send, or empty when the tracer's span has no context. */
  headers: Record<string, string>;
  end(endpoint: string | undefined, error: TritonError | undefined): void;
}

const SPAN_KIND_CLIENT = 2;
const STATUS_ERROR = 2;

/** A span for one remote inference, when the request asks for one (`trace: { tracer }`); else undefined. */
export async function startClientSpan(request: InferenceRequest, model: string, protocol: string): Promise<ClientSpan | undefined> {
  const trace = request.trace;
  if (trace === undefined || typeof trace === 'boolean' || trace.tracer === undefined) return undefined;
  const otel = await loadApi();
  const tracer = trace.tracer as TracerLike & { startSpan(name: string, options: object, context: unknown): Span };
  const span = tracer.startSpan(
    `triton.infer ${model}`,
    { kind: SPAN_KIND_CLIENT, attributes: { 'triton.model': model, 'rpc.system': protocol === 'grpc' ? 'grpc' : 'http' } },
    otel.context.active(),
  ) as Span;
  const context = span.spanContext?.();
  const headers: Record<string, string> = {};
  if (context !== undefined && /^[0-9a-f]{32}$/.test(context.traceId) && /^[0-9a-f]{16}$/.test(context.spanId)) {
    headers.traceparent = `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
  }
  return {
    headers,
    end(endpoint, error) {
      if (endpoint !== undefined) span.setAttribute?.('server.address', endpoint);
      if (error !== undefined) span.setStatus?.({ code: STATUS_ERROR, message: `${error.code}: ${error.message}` });
      span.end();
    },
  };
}
