/**
 * Models that heal: the package learns that a model's instance is unhealthy
 * (a Python backend stub process that died, e.g. killed for memory) from the
 * error Triton answers its requests with, and — with the server option
 * `recoverUnhealthyModels` — reloads it.
 *
 * Why from responses: Triton offers no instance health through its C API.
 * When a stub dies, `TRITONSERVER_ServerModelIsReady` stays true, the model
 * index says READY and statistics do not change (TRITON_FACTS.md "A Python
 * stub that dies"); the only sign is that the model's requests fail with
 * INTERNAL `Stub process '<instance>' is not healthy.` So the first failing
 * request (the one in flight when the stub died, or the next one) marks the
 * model unhealthy.
 *
 * Each thread (owner or attached worker) learns from its own requests; an
 * attached thread forwards what it learns to the owner over a
 * BroadcastChannel, so that recovery runs once, in the owner, and every
 * thread hears when the model is healthy again.
 */
import { BroadcastChannel } from 'node:worker_threads';
import { TritonError } from './errors.js';

/** Triton's message for a request that met a dead Python stub. */
const STUB_UNHEALTHY = /Stub process '([^']+)' is not healthy/;

/** What `server.on('modelUnhealthy', listener)` receives. */
export interface ModelUnhealthyEvent {
  /** The model whose instance is unhealthy (resolved from the instance name; the requested model when it cannot be). */
  model: string;
  /** Triton's name of the unhealthy instance, e.g. `slow_0`. */
  instance: string;
  /** The model the failing request was sent to (an ensemble, when one of its steps failed). */
  requestedModel: string;
  /** The error the request failed with. */
  error: TritonError;
  /** Whether the server reloads the model now (`recoverUnhealthyModels`, on the thread that started the server). */
  recovering: boolean;
}

/** What `server.on('modelRecovered', listener)` receives. */
export interface ModelRecoveredEvent {
  /** The model that serves again. */
  model: string;
  /**
   * How it was found healthy: `reloaded` (this package reloaded it, by
   * `recoverUnhealthyModels` or `loadModel()`, possibly in another thread of
   * the same server) or `served` (a request sent after it was marked
   * unhealthy succeeded).
   */
  how: 'reloaded' | 'served';
}

/** What `server.on('modelRecoveryFailed', listener)` receives. */
export interface ModelRecoveryFailedEvent {
  /** The model whose reload failed; it stays unhealthy, and a later failing request tries again (after a back-off). */
  model: string;
  /** Why the reload failed. */
  error: unknown;
}

/** The events a `Server` reports, by name, with their listener types (`server.on(name, listener)`). */
export interface ServerEvents {
  /** A model's instance was found unhealthy: its requests fail, and `model.ready()` is false until it serves again. */
  modelUnhealthy: (event: ModelUnhealthyEvent) => void;
  /** A model found unhealthy serves again. */
  modelRecovered: (event: ModelRecoveredEvent) => void;
  /** Reloading an unhealthy model failed (`recoverUnhealthyModels`). */
  modelRecoveryFailed: (event: ModelRecoveryFailedEvent) => void;
}

/** The name of a server event (`server.on(name, listener)`). */
export type ServerEventName = keyof ServerEvents;

interface Mark {
  instance: string;
  /** Health epoch when marked: requests started after it can clear the mark by succeeding. */
  epoch: number;
  /** Models marked because of this one (an ensemble whose step it is). */
  requested: Set<string>;
}

interface ChannelMessage {
  type: 'unhealthy' | 'recovered';
  model: string;
  instance?: string;
  requestedModel?: string;
  message?: string;
  /** Recoveries of the model the sender had heard of (stale reports are dropped). */
  recoveries?: number;
}

/** What ModelHealth needs of its server. */
export interface HealthHost {
  /** Reloads the model (unload without waiting, then load): the owner's recovery. */
  reload(model: string): Promise<void>;
  /** The model an instance name belongs to, from the models Triton knows; undefined when none matches. */
  modelOfInstance(instance: string): Promise<string | undefined>;
}

const BACKOFF_FIRST_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

/** @internal Per-thread health of a server's models (see the module comment). */
export class ModelHealth {
  /** Counts marks and recoveries; requests remember it when they start. */
  epoch = 0;
  /** Marked models: kept as a count so the response path checks one number. */
  count = 0;
  readonly #marks = new Map<string, Mark>();
  /** Model → recoveries completed (by any thread), and the epoch of the last one here. */
  readonly #recoveries = new Map<string, { count: number; epoch: number }>();
  readonly #recovering = new Map<string, Promise<void>>();
  readonly #backoff = new Map<string, { until: number; ms: number }>();
  readonly #listeners = new Map<ServerEventName, Set<(event: never) => void>>();
  /** Models this thread has seen an instance of die (marked, recovered or not since). */
  readonly #died = new Set<string>();
  #channel: BroadcastChannel | undefined;
  #host: HealthHost | undefined;
  #recover = false;
  #owner = true;

  /** @internal */
  configure(host: HealthHost, options: { recover: boolean; owner: boolean }): void {
    this.#host = host;
    this.#recover = options.recover;
    this.#owner = options.owner;
  }

  /** @internal Joins the server's channel (share()/attach()): reports go to the owner, recoveries to every thread. */
  join(shareId: number): void {
    if (this.#channel !== undefined) return;
    const channel = new BroadcastChannel(`tritonserver-node:server-health:${shareId}`);
    channel.unref();
    channel.onmessage = (event: unknown) => this.#onMessage((event as { data: ChannelMessage }).data);
    this.#channel = channel;
  }

  /** @internal */
  close(): void {
    this.#channel?.close();
    this.#channel = undefined;
  }

  isUnhealthy(model: string): boolean {
    return this.count !== 0 && this.#marks.has(model);
  }

  on<K extends ServerEventName>(name: K, listener: ServerEvents[K]): void {
    let set = this.#listeners.get(name);
    if (set === undefined) this.#listeners.set(name, (set = new Set()));
    set.add(listener as (event: never) => void);
  }

  off<K extends ServerEventName>(name: K, listener: ServerEvents[K]): void {
    this.#listeners.get(name)?.delete(listener as (event: never) => void);
  }

  #emit<K extends ServerEventName>(name: K, event: Parameters<ServerEvents[K]>[0]): void {
    const set = this.#listeners.get(name);
    if (set === undefined) return;
    for (const listener of [...set]) {
      try {
        (listener as (e: typeof event) => void)(event);
      } catch (failure) {
        // A broken listener must not cost the server its health tracking.
        queueMicrotask(() => {
          throw failure;
        });
      }
    }
  }

  /**
   * A request to `requestedModel`, started at `epoch`, failed with `error`.
   * Returns the error to reject it with: Triton's, with a sentence added
   * when it says a stub died.
   */
  failed(requestedModel: string, epoch: number, error: TritonError): TritonError {
    const found = STUB_UNHEALTHY.exec(error.message);
    if (found === null) return error;
    const instance = found[1]!;
    const model = instance.startsWith(`${requestedModel}_`) ? requestedModel : undefined;
    const target = model ?? requestedModel;
    const recovered = this.#recoveries.get(target);
    // Sent before the model was reloaded: that request met the old instance.
    const stale = !this.#marks.has(target) && recovered !== undefined && epoch < recovered.epoch;
    if (!stale) this.#detected(model, instance, requestedModel, error, recovered?.count ?? 0, true);
    const recovering = this.#recover && this.#owner;
    const hint = stale
      ? `model '${target}' had an unhealthy instance (its Python stub process died) and has been reloaded since this request was sent; send it again`
      : recovering
        ? `model '${target}' is unhealthy (its Python stub process died); the server is reloading it (recoverUnhealthyModels), send the request again shortly`
        : `model '${target}' is unhealthy (its Python stub process died); server.loadModel('${target}') replaces the instance, or start the server with recoverUnhealthyModels: true`;
    return new TritonError(error.code, `${error.message} (${hint})`, { cause: error });
  }

  /** A request to `model`, started at `epoch`, succeeded. */
  served(model: string, epoch: number): void {
    const mark = this.#marks.get(model);
    if (mark === undefined || epoch <= mark.epoch || this.#recovering.has(model)) return;
    this.#clear(model);
    this.#emit('modelRecovered', { model, how: 'served' });
  }

  /** The model was loaded (a new instance) or unloaded through this thread. */
  replaced(model: string, how: 'loaded' | 'unloaded'): void {
    const wasMarked = this.#marks.has(model);
    this.#clear(model);
    if (how === 'unloaded') return;
    const known = this.#recoveries.get(model);
    const count = (known?.count ?? 0) + 1;
    this.#recoveries.set(model, { count, epoch: ++this.epoch });
    this.#backoff.delete(model);
    this.#channel?.postMessage({ type: 'recovered', model, recoveries: count } satisfies ChannelMessage);
    if (wasMarked) this.#emit('modelRecovered', { model, how: 'reloaded' });
  }

  #clear(model: string): void {
    const mark = this.#marks.get(model);
    if (mark === undefined) return;
    this.#marks.delete(model);
    for (const other of mark.requested) this.#marks.delete(other);
    this.count = this.#marks.size;
  }

  #detected(
    resolved: string | undefined,
    instance: string,
    requestedModel: string,
    error: TritonError,
    recoveries: number,
    local: boolean,
  ): void {
    const target = resolved ?? requestedModel;
    this.#died.add(target);
    if (!this.#marks.has(target)) {
      this.#marks.set(target, { instance, epoch: ++this.epoch, requested: new Set() });
      this.count = this.#marks.size;
      const recovering = this.#recover && this.#owner;
      this.#emit('modelUnhealthy', { model: target, instance, requestedModel, error, recovering });
      if (local && !this.#owner) {
        this.#channel?.postMessage({
          type: 'unhealthy',
          model: target,
          instance,
          requestedModel,
          message: error.message,
          recoveries,
        } satisfies ChannelMessage);
      }
      if (resolved === undefined) void this.#resolveStep(target, instance);
    }
    if (this.#recover && this.#owner && resolved !== undefined) this.#startRecovery(target);
  }

  /** An ensemble's request met a step's dead stub: find the step, mark and recover it too. */
  async #resolveStep(requestedModel: string, instance: string): Promise<void> {
    let step: string | undefined;
    try {
      step = await this.#host?.modelOfInstance(instance);
    } catch {
      step = undefined;
    }
    const mark = this.#marks.get(requestedModel);
    if (mark === undefined) return;
    if (step === undefined || step === requestedModel) {
      if (this.#recover && this.#owner) this.#startRecovery(requestedModel);
      return;
    }
    let stepMark = this.#marks.get(step);
    if (stepMark === undefined) {
      stepMark = { instance, epoch: ++this.epoch, requested: new Set() };
      this.#marks.set(step, stepMark);
      this.count = this.#marks.size;
    }
    stepMark.requested.add(requestedModel);
    if (this.#recover && this.#owner) this.#startRecovery(step);
  }

  #startRecovery(model: string): void {
    if (this.#recovering.has(model) || this.#host === undefined) return;
    const backoff = this.#backoff.get(model);
    if (backoff !== undefined && Date.now() < backoff.until) return;
    const host = this.#host;
    const recovery = host
      .reload(model)
      .then(
        () => undefined,
        (error: unknown) => {
          const ms = Math.min((backoff?.ms ?? BACKOFF_FIRST_MS / 2) * 2, BACKOFF_MAX_MS);
          this.#backoff.set(model, { until: Date.now() + ms, ms });
          this.#emit('modelRecoveryFailed', { model, error });
        },
      )
      .finally(() => this.#recovering.delete(model));
    this.#recovering.set(model, recovery);
  }

  /**
   * Models this thread has seen an instance of die. Triton keeps a dead
   * instance's queued requests: its Python backend fails them one execution
   * at a time, each after about a second of waiting for the dead stub's
   * reply, cancelled or not (r25.07) — stop() names these models when
   * requests are still inside.
   */
  diedModels(): string[] {
    return [...this.#died];
  }

  /** The reloads under way (the chaos harness and tests await them). */
  recoveries(): Promise<void> {
    return Promise.all([...this.#recovering.values()]).then(() => undefined);
  }

  #onMessage(message: ChannelMessage): void {
    if (message === null || typeof message !== 'object' || typeof message.model !== 'string') return;
    if (message.type === 'recovered') {
      const known = this.#recoveries.get(message.model);
      if (known !== undefined && known.count >= (message.recoveries ?? 0)) return;
      this.#recoveries.set(message.model, { count: message.recoveries ?? 1, epoch: ++this.epoch });
      if (this.#marks.has(message.model)) {
        this.#clear(message.model);
        this.#emit('modelRecovered', { model: message.model, how: 'reloaded' });
      }
      return;
    }
    // A report of an attached thread: the owner decides and recovers.
    if (!this.#owner || typeof message.instance !== 'string') return;
    const known = this.#recoveries.get(message.model)?.count ?? 0;
    if ((message.recoveries ?? 0) < known) return;
    const error = new TritonError('INTERNAL', message.message ?? `Stub process '${message.instance}' is not healthy.`);
    const resolved = message.instance.startsWith(`${message.model}_`) ? message.model : undefined;
    this.#detected(resolved, message.instance, message.requestedModel ?? message.model, error, known, false);
  }
}
