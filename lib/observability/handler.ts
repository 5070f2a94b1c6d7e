/**
 * `metricsHandler(server, { registry })`: one request handler that serves
 * Triton's metrics (custom families included), a prom-client registry's
 * metrics and, if asked, the package's own, as one Prometheus text response. It fits `node:http` (`(req, res)`), Express
 * (`app.get('/metrics', handler)`) and Fastify (`fastify.get('/metrics',
 * handler)`, where it answers through the reply).
 */
import type { ServerResponse } from 'node:http';
import { TritonError } from '../errors.js';
import { parseMetricsText } from './metrics.js';

/** Prometheus' text exposition format, version 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** What the handler needs of a prom-client `Registry` (prom-client is an optional peer dependency). */
export interface MetricsRegistryLike {
  /** The registry's metrics as Prometheus text (prom-client's `registry.metrics()`). */
  metrics(): Promise<string> | string;
}

/** Options of {@link metricsHandler} and {@link collectMetricsText}. */
export interface MetricsHandlerOptions {
  /** A prom-client registry whose metrics are served in the same response. */
  registry?: MetricsRegistryLike;
  /** Also serve the package's own metrics (`tritonserver_node_*`, see `server.packageMetrics()`). Default false. */
  packageMetrics?: boolean;
}

/** Fastify's reply, as far as the handler uses it. */
export interface ReplyLike {
  /** Sets the HTTP status code (200; 503 when Triton's metrics are unavailable; 500 on other errors). */
  code(statusCode: number): unknown;
  /** Sets a response header (the handler sets `content-type`). */
  header(name: string, value: string): unknown;
  /** Sends the body: the Prometheus text, or the error message. */
  send(payload: string): unknown;
}

/**
 * The request handler {@link metricsHandler} returns: for `node:http` and
 * Express `(req, res)`, for Fastify `(request, reply)`. It never rejects:
 * errors are answered with status 503 (server stopped or metrics disabled,
 * `UNAVAILABLE`) or 500 and the message as plain text.
 */
export type MetricsHandler = (request: unknown, response: ServerResponse | ReplyLike) => Promise<void>;

/** Where the handler reads metrics: the in-process `Server`, or the remote `Client` (tritonserver-node/client). */
export interface MetricsSource {
  /** Triton's own metrics text. */
  metrics(): Promise<string>;
  /** The package's own metrics (`tritonserver_node_*`). */
  packageMetrics(): {
    /** Those metrics as Prometheus text. */
    text(): string;
  };
}

function familyNames(text: string): Set<string> {
  return new Set(parseMetricsText(text).map((sample) => sample.family));
}

/**
 * The combined text: Triton's, then the package's own, then the registry's.
 * Two sources with a family of the same name are refused (INVALID_ARG):
 * Prometheus rejects a scrape that repeats a family.
 */
export async function collectMetricsText(server: MetricsSource, options: MetricsHandlerOptions = {}): Promise<string> {
  const parts: Array<{ source: string; text: string }> = [{ source: 'Triton', text: await server.metrics() }];
  if (options.packageMetrics === true) parts.push({ source: 'tritonserver-node', text: server.packageMetrics().text() });
  if (options.registry !== undefined) parts.push({ source: 'the prom-client registry', text: await options.registry.metrics() });
  const seen = new Map<string, string>();
  for (const { source, text } of parts) {
    for (const name of familyNames(text)) {
      const first = seen.get(name);
      if (first !== undefined) {
        throw new TritonError('INVALID_ARG', `metric family '${name}' comes from both ${first} and ${source}; rename one of them`);
      }
      seen.set(name, source);
    }
  }
  return parts.map(({ text }) => (text.endsWith('\n') || text === '' ? text : `${text}\n`)).join('');
}

function isReply(response: ServerResponse | ReplyLike): response is ReplyLike {
  return typeof (response as ReplyLike).code === 'function' && typeof (response as ReplyLike).send === 'function';
}

/** A handler for node:http, Express and Fastify serving the combined metrics. */
export function metricsHandler(server: MetricsSource, options: MetricsHandlerOptions = {}): MetricsHandler {
  return async (_request, response) => {
    let status = 200;
    let body: string;
    let contentType = PROMETHEUS_CONTENT_TYPE;
    try {
      body = await collectMetricsText(server, options);
    } catch (error) {
      // Stopped server or disabled metrics: unavailable; a bad combination: a server error.
      status = error instanceof TritonError && error.code === 'UNAVAILABLE' ? 503 : 500;
      body = `${error instanceof Error ? error.message : String(error)}\n`;
      contentType = 'text/plain; charset=utf-8';
    }
    if (isReply(response)) {
      response.code(status);
      response.header('content-type', contentType);
      response.send(body);
      return;
    }
    response.statusCode = status;
    response.setHeader('content-type', contentType);
    response.end(body);
  };
}
