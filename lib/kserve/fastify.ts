/**
 * The KServe v2 HTTP routes as a Fastify plugin, without a dependency on
 * Fastify: the types below are the few members the plugin uses.
 * `app.register(kserveFastifyPlugin(server, options), { prefix: '/triton' })`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from '../server.js';
import { kserveHandler, type KServeHandlerOptions } from './http.js';

interface FastifyRequestLike {
  raw: IncomingMessage;
}

interface FastifyReplyLike {
  raw: ServerResponse;
  hijack(): void;
}

/** The part of a Fastify instance the plugin uses. */
export interface FastifyInstanceLike {
  /** The prefix the plugin was registered with (`''` for none): the handler strips it. */
  prefix: string;
  /** Drops the body parsers inside the plugin's encapsulation context (the app's stay). */
  removeAllContentTypeParsers(): void;
  /** Adds a body parser; the plugin adds one for `*` that leaves bodies unread. */
  addContentTypeParser(
    type: string,
    parser: (request: unknown, payload: unknown, done: (error: Error | null, body?: unknown) => void) => void,
  ): void;
  /** Routes every method of `path` (the plugin routes `/v2` and `/v2/*`). */
  all(path: string, handler: (request: FastifyRequestLike, reply: FastifyReplyLike) => void): unknown;
  /** Adds a hook; the plugin's `onClose` hook drains the requests in flight. */
  addHook(name: 'onClose', hook: (instance: unknown) => Promise<void>): unknown;
}

/**
 * A Fastify plugin serving the routes under the prefix it is registered
 * with. Bodies are left unparsed (the handler reads them itself, binary
 * tensors included); closing Fastify drains requests in flight.
 */
export function kserveFastifyPlugin(
  server: Server,
  options: Omit<KServeHandlerOptions, 'prefix'> = {},
): (instance: FastifyInstanceLike, pluginOptions: unknown, done: (error?: Error) => void) => void {
  return (instance, _pluginOptions, done) => {
    const handler = kserveHandler(server, { ...options, prefix: instance.prefix });
    // Only inside this plugin's encapsulation context: the app's parsers stay.
    instance.removeAllContentTypeParsers();
    instance.addContentTypeParser('*', (_request, _payload, next) => next(null, undefined));
    const route = (request: FastifyRequestLike, reply: FastifyReplyLike): void => {
      reply.hijack();
      handler(request.raw, reply.raw);
    };
    instance.all('/v2', route);
    instance.all('/v2/*', route);
    instance.addHook('onClose', () => handler.drain());
    done();
  };
}
