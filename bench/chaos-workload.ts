/**
 * The chaos harness's workload (bench/chaos.ts): requests of every kind,
 * each tracked until it settles — exactly once, with the right output or a
 * TritonError of a documented code — by the thread that sent it.
 */
import { ERROR_CODES, isTritonError, type InferenceServer } from '../lib/index.js';

/** A seeded PRNG (mulberry32): the same seed, the same choices. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** How long past its own timeout a request may take to settle before it counts as a hang. */
export const SETTLE_BOUND_MS = 15_000;
/** Every request gets this timeout (the slow ones may hit it: an outcome like any other). */
export const REQUEST_TIMEOUT_MS = 10_000;

export interface Tally {
  requests: number;
  outcomes: Record<string, number>;
  settledTwice: number;
  hangs: number;
  /** Settled with the wrong output, or with an error that is not a TritonError of a documented code. */
  wrong: number;
  wrongSamples: string[];
}

export function newTally(): Tally {
  return { requests: 0, outcomes: {}, settledTwice: 0, hangs: 0, wrong: 0, wrongSamples: [] };
}

export function mergeTally(into: Tally, from: Tally): void {
  into.requests += from.requests;
  into.settledTwice += from.settledTwice;
  into.hangs += from.hangs;
  into.wrong += from.wrong;
  for (const [code, n] of Object.entries(from.outcomes)) into.outcomes[code] = (into.outcomes[code] ?? 0) + n;
  for (const sample of from.wrongSamples) if (into.wrongSamples.length < 20) into.wrongSamples.push(sample);
}

/** The settled part of a tally (requests: those that settled), for a worker's progress reports. */
export function settledTally(tally: Tally): Tally {
  const settled = Object.values(tally.outcomes).reduce((a, b) => a + b, 0);
  return { ...tally, requests: settled, outcomes: { ...tally.outcomes }, wrongSamples: [...tally.wrongSamples] };
}

const DOCUMENTED = new Set<string>(ERROR_CODES);

/** Tracks requests in flight: each settles once, within its timeout plus SETTLE_BOUND_MS. */
export class Tracker {
  readonly tally = newTally();
  readonly #inFlight = new Map<number, { kind: string; deadline: number; hung: boolean }>();
  #next = 0;

  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Runs one request; `check` says what is wrong with a result ('' when right). */
  track<T>(
    kind: string,
    timeoutMs: number,
    run: () => Promise<T>,
    check: (value: T) => string,
    /** An outcome code for an error the caller expects besides TritonErrors (e.g. its own exception passed through). */
    expected?: (error: unknown) => string | undefined,
  ): Promise<void> {
    const id = this.#next++;
    this.tally.requests++;
    this.#inFlight.set(id, { kind, deadline: Date.now() + timeoutMs + SETTLE_BOUND_MS, hung: false });
    let settled = false;
    const settle = (code: string, problem: string): void => {
      if (settled) {
        this.tally.settledTwice++;
        return;
      }
      settled = true;
      this.#inFlight.delete(id);
      this.tally.outcomes[code] = (this.tally.outcomes[code] ?? 0) + 1;
      if (problem !== '') {
        this.tally.wrong++;
        if (this.tally.wrongSamples.length < 20) this.tally.wrongSamples.push(`${kind}: ${problem}`);
      }
    };
    let promise: Promise<T>;
    try {
      promise = run();
    } catch (error) {
      promise = Promise.reject(error);
    }
    return promise.then(
      (value) => {
        let problem: string;
        try {
          problem = check(value);
        } catch (error) {
          problem = `check threw ${String(error)}`;
        }
        settle('OK', problem);
      },
      (error: unknown) => {
        const code = expected?.(error);
        if (code !== undefined) settle(code, '');
        else if (isTritonError(error) && DOCUMENTED.has(error.code)) settle(error.code, '');
        else settle('NOT_A_TRITON_ERROR', `${String(error)}`.slice(0, 300));
      },
    );
  }

  /** Counts requests past their deadline (once each). */
  sweep(now = Date.now()): void {
    for (const entry of this.#inFlight.values()) {
      if (!entry.hung && now > entry.deadline) {
        entry.hung = true;
        this.tally.hangs++;
      }
    }
  }

  /** Waits until nothing is in flight or `ms` pass; returns how many are left. */
  async drain(ms: number): Promise<number> {
    const deadline = Date.now() + ms;
    while (this.#inFlight.size > 0 && Date.now() < deadline) {
      this.sweep();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    this.sweep();
    return this.#inFlight.size;
  }
}

function f32(data: unknown): Float32Array {
  return data as Float32Array;
}

/** One request of the mixed in-process workload, picked by `r`. */
export function inProcessRequest(server: InferenceServer, tracker: Tracker, r: () => number, kinds: { text: boolean }): Promise<void> {
  const pick = r();
  const timeoutMs = REQUEST_TIMEOUT_MS;
  if (pick < 0.35) {
    const data = new Float32Array(16).map(() => r());
    return tracker.track('identity_small', timeoutMs, () => server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 16], data } }, timeoutMs }), (response) => {
      const ok = f32(response.outputs.OUTPUT0?.data).every((v, i) => v === data[i]) && response.outputs.OUTPUT0?.data.length === 16;
      response.dispose();
      return ok ? '' : 'identity_fp32 [1,16] output differs';
    });
  }
  if (pick < 0.45) {
    const data = new Float32Array(16384);
    data[0] = r();
    data[16383] = r();
    return tracker.track('identity_64k', timeoutMs, () => server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 16384], data } }, timeoutMs }), (response) => {
      const out = f32(response.outputs.OUTPUT0?.data);
      const ok = out.length === 16384 && out[0] === data[0] && out[16383] === data[16383];
      response.dispose();
      return ok ? '' : 'identity_fp32 64 KiB output differs';
    });
  }
  if (pick < 0.55) {
    const words = ['alpha', 'beta', `w${Math.floor(r() * 1000)}`];
    return tracker.track('bytes', timeoutMs, () => server.model('identity_bytes').infer({ inputs: { INPUT0: { shape: [1, 3], data: words } }, timeoutMs }), (response) => {
      const out = (response.outputs.OUTPUT0?.strings?.() ?? []).join(',');
      response.dispose();
      return out === words.join(',') ? '' : `identity_bytes output ${out}`;
    });
  }
  if (pick < 0.7) {
    const a = new Float32Array(4).map(() => Math.round(r() * 100));
    const b = new Float32Array(4).map(() => Math.round(r() * 100));
    if (pick < 0.62) {
      return tracker.track('python_add_sub', timeoutMs, () => server.model('add_sub').infer({ inputs: { INPUT0: a, INPUT1: b }, timeoutMs }), (response) => {
        const ok = f32(response.outputs.OUTPUT0?.data).every((v, i) => v === a[i]! + b[i]!);
        response.dispose();
        return ok ? '' : 'add_sub sum differs';
      });
    }
    return tracker.track('ensemble', timeoutMs, () => server.model('add_sub_chain').infer({ inputs: { INPUT0: a, INPUT1: b }, timeoutMs }), (response) => {
      const ok = f32(response.outputs.OUTPUT0?.data).every((v, i) => v === 2 * a[i]!);
      response.dispose();
      return ok ? '' : 'add_sub_chain output differs';
    });
  }
  if (pick < 0.8 && kinds.text) {
    const texts = ['good day', `text ${Math.floor(r() * 100)}`];
    return tracker.track('python_text_batched', timeoutMs, () => server.model('text_processor').infer({ inputs: { TEXT: { shape: [1, 2], data: texts } }, timeoutMs }), (response) => {
      const out = Array.from(f32(response.outputs.SCORE?.data));
      response.dispose();
      return out.length === 2 && out.every(Number.isFinite) ? '' : `text_processor SCORE ${out.join(',')}`;
    });
  }
  if (pick < 0.9) {
    const n = 1 + Math.floor(r() * 4);
    const values = Int32Array.from({ length: n }, (_, i) => i * 7);
    return tracker.track('stream', timeoutMs, async () => {
      const got: number[] = [];
      for await (const response of server.model('repeat_int32').stream({ inputs: { IN: values, DELAY_MS: new Uint32Array([0]) }, timeoutMs })) {
        const out = response.outputs.OUT?.data as Int32Array | undefined;
        if (out !== undefined && out.length > 0) got.push(out[0]!);
        response.dispose();
      }
      return got;
    }, (got) => (got.join(',') === Array.from(values).join(',') ? '' : `repeat_int32 yielded ${got.join(',')}`));
  }
  const value = Math.round(r() * 100);
  return tracker.track('python_slow', timeoutMs, () => server.model('slow').infer({ inputs: { INPUT0: new Float32Array([value]), DELAY_MS: new Uint32Array([Math.floor(r() * 20)]) }, timeoutMs }), (response) => {
    const got = f32(response.outputs.OUTPUT0?.data)[0];
    response.dispose();
    return got === value ? '' : 'slow output differs';
  });
}
