/**
 * The endpoints of a client: each call goes to the healthy endpoint with the
 * fewest calls pending; an endpoint whose connection failed leaves the pool
 * until its health route answers again; calls safe to repeat are retried
 * with backoff on another endpoint.
 */
import { TritonError } from '../errors.js';
import type { ResolvedClientOptions } from './options.js';
import { ConnectionError, PermissionError, type Transport } from './transport.js';

interface Member {
  transport: Transport;
  pending: number;
  healthy: boolean;
  /** The health check loop, while the endpoint is out. */
  check: NodeJS.Timeout | undefined;
}

/** What happens around each attempt (client metrics listen here). */
export interface AttemptObserver {
  retry(endpoint: string): void;
}

/** The server's own UNAVAILABLE (not a refusal of credentials, which another try would not change). */
function isUnavailableAnswer(error: unknown): boolean {
  return error instanceof TritonError && error.code === 'UNAVAILABLE' && !(error instanceof PermissionError);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export class EndpointPool {
  #members: Member[];
  readonly #options: ResolvedClientOptions;
  #next = 0;
  #closed = false;
  observer: AttemptObserver | undefined;

  /** The last failure of a health check, for connect()'s error. */
  lastFailure: unknown;
  #healthyWaiters: Array<() => void> = [];

  constructor(transports: Transport[], options: ResolvedClientOptions) {
    this.#options = options;
    this.#members = transports.map((transport) => this.#join(transport));
  }

  /** A new endpoint is in the pool once its health route has answered. */
  #join(transport: Transport): Member {
    const member: Member = { transport, pending: 0, healthy: false, check: undefined };
    void this.#check(member);
    return member;
  }

  /** Resolves once an endpoint is healthy (at once when one is); false after `timeoutMs`. */
  whenHealthy(timeoutMs: number): Promise<boolean> {
    if (this.#members.some((member) => member.healthy)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#healthyWaiters = this.#healthyWaiters.filter((waiter) => waiter !== done);
        resolve(false);
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      this.#healthyWaiters.push(done);
    });
  }

  get endpoints(): string[] {
    return this.#members.map((member) => member.transport.endpoint);
  }

  /** Endpoints that are in the pool now (not out after a failure). */
  get healthyEndpoints(): string[] {
    return this.#members.filter((member) => member.healthy).map((member) => member.transport.endpoint);
  }

  get size(): number {
    return this.#members.length;
  }

  /** The healthy endpoint with the fewest pending calls (ties in turn); any endpoint when none is healthy. */
  #pick(avoid: Member | undefined): Member {
    const members = this.#members;
    if (members.length === 0) throw new TritonError('UNAVAILABLE', 'the client has no endpoint (the DNS name resolved to no address)');
    let best: Member | undefined;
    const start = this.#next++ % members.length;
    for (let i = 0; i < members.length; i++) {
      const member = members[(start + i) % members.length]!;
      if (!member.healthy || member === avoid) continue;
      if (best === undefined || member.pending < best.pending) best = member;
    }
    if (best !== undefined) return best;
    // Nobody healthy: try one anyway (it may be back before its check says so).
    return members[start]!;
  }

  /**
   * Runs `attempt` on an endpoint. A connection failure takes the endpoint
   * out of the pool; the call is tried again on another when `repeatable`
   * (or when the request never left, whatever `repeatable` says).
   */
  async run<T>(attempt: (transport: Transport) => Promise<T>, repeatable: boolean, signal: AbortSignal | undefined, deadline: number | undefined): Promise<T> {
    if (this.#closed) throw new TritonError('UNAVAILABLE', 'the client is closed');
    const { attempts, backoffMs, maxBackoffMs } = this.#options.retry;
    let previous: Member | undefined;
    for (let tried = 1; ; tried++) {
      const member = this.#pick(previous);
      member.pending++;
      try {
        return await attempt(member.transport);
      } catch (error) {
        // A lost connection, or a server answering UNAVAILABLE (stopping, not ready): another
        // endpoint may serve. Only a failed connection takes the endpoint out of the pool.
        const connection = error instanceof ConnectionError;
        if (!connection && !isUnavailableAnswer(error)) throw error;
        if (connection) this.#markDown(member);
        const neverSent = connection && !error.sent;
        const again = (repeatable || neverSent) && tried < attempts && !signal?.aborted && !this.#closed;
        const wait = Math.min(maxBackoffMs, backoffMs * 2 ** (tried - 1));
        if (!again || (deadline !== undefined && Date.now() + wait >= deadline)) throw error;
        this.observer?.retry(member.transport.endpoint);
        previous = member;
        await sleep(wait, signal);
      } finally {
        member.pending--;
      }
    }
  }

  /** Takes a failed endpoint out and checks its health until it answers. */
  #markDown(member: Member): void {
    if (!member.healthy || this.#closed) return;
    member.healthy = false;
    member.check = setTimeout(() => void this.#check(member), this.#options.healthCheckIntervalMs).unref();
  }

  /** One health check (`live`, bounded by the connect timeout); again after the interval until it passes. */
  async #check(member: Member): Promise<void> {
    member.check = undefined;
    if (this.#closed) return;
    try {
      const deadline = Date.now() + this.#options.connectTimeoutMs;
      const signal = AbortSignal.timeout(this.#options.connectTimeoutMs);
      if (await member.transport.live({ deadline, signal, headers: {} })) {
        if (this.#closed || !this.#members.includes(member)) return;
        member.healthy = true;
        for (const waiter of this.#healthyWaiters.splice(0)) waiter();
        return;
      }
      this.lastFailure = new TritonError('UNAVAILABLE', `${member.transport.endpoint} is not live`);
    } catch (error) {
      this.lastFailure = error;
    }
    if (this.#closed || !this.#members.includes(member)) return;
    member.check = setTimeout(() => void this.#check(member), this.#options.healthCheckIntervalMs).unref();
  }

  /** Replaces the endpoints (a DNS name resolved again): new ones join, gone ones close. */
  replace(endpoints: ReadonlyArray<{ endpoint: string; make: () => Transport }>): void {
    const byEndpoint = new Map(this.#members.map((member) => [member.transport.endpoint, member]));
    const next: Member[] = [];
    for (const { endpoint, make } of endpoints) {
      const kept = byEndpoint.get(endpoint);
      if (kept !== undefined) {
        byEndpoint.delete(endpoint);
        next.push(kept);
      } else {
        next.push(this.#join(make()));
      }
    }
    for (const gone of byEndpoint.values()) this.#retire(gone);
    this.#members = next;
  }

  #retire(member: Member): void {
    if (member.check !== undefined) clearTimeout(member.check);
    member.transport.close();
  }

  close(): void {
    this.#closed = true;
    for (const member of this.#members) this.#retire(member);
  }
}
