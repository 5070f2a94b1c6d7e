/**
 * Values by request token (the addon's, counting up from 1) while their
 * requests are in flight.
 *
 * Not a `Map`: when a Map's keys are added and deleted at the rate requests
 * come and go, V8 replaces its backing table every few dozen requests and
 * links each replaced table to its successor (for live iterators). Once one
 * of those tables reaches the old generation, it keeps every later table,
 * and whatever their entries held (pending requests, their promises and
 * responses), alive through each minor GC: at 64 requests in flight a third
 * of the young generation was promoted, and full GCs followed every few
 * hundred milliseconds. Here a token has a fixed slot, cleared when it is
 * deleted; a token whose slot is held by an older one that is still in
 * flight (a long stream) waits in a small Map.
 */
export class TokenTable<T> {
  readonly #tokens: Float64Array;
  readonly #values: Array<T | undefined>;
  readonly #mask: number;
  readonly #overflow = new Map<number, T>();
  #size = 0;

  /** `slots`: a power of two, more than the requests usually in flight. */
  constructor(slots = 4096) {
    this.#tokens = new Float64Array(slots);
    this.#values = new Array<T | undefined>(slots).fill(undefined);
    this.#mask = slots - 1;
  }

  /** How many tokens have a value. */
  get size(): number {
    return this.#size;
  }

  get(token: number): T | undefined {
    const slot = token & this.#mask;
    if (this.#tokens[slot] === token) return this.#values[slot];
    return this.#overflow.size === 0 ? undefined : this.#overflow.get(token);
  }

  has(token: number): boolean {
    return this.#tokens[token & this.#mask] === token || this.#overflow.has(token);
  }

  set(token: number, value: T): void {
    const slot = token & this.#mask;
    const held = this.#tokens[slot];
    if (held === token) {
      this.#values[slot] = value;
    } else if (held === 0) {
      this.#tokens[slot] = token;
      this.#values[slot] = value;
      this.#size++;
    } else {
      if (!this.#overflow.has(token)) this.#size++;
      this.#overflow.set(token, value);
    }
  }

  /** Whether the token had a value. */
  delete(token: number): boolean {
    const slot = token & this.#mask;
    if (this.#tokens[slot] === token) {
      this.#tokens[slot] = 0;
      this.#values[slot] = undefined;
      this.#size--;
      return true;
    }
    if (!this.#overflow.delete(token)) return false;
    this.#size--;
    return true;
  }
}
