// The network-level fuzzer of bench/fuzz-network.ts, briefly: mutated
// HTTP/1.1 and gRPC inference requests sent alike to the native and the node
// engines of serveKServe, whose answers must agree, the front ends answering
// a plain request every 250 cases. Seed 1 makes the run the same each time;
// a mismatch prints the case's bytes (replay it with
// `npx tsx bench/fuzz-network.ts --seed 1 --replay INDEX`).
import { describe, expect, it } from 'vitest';
import { formatMismatch, fuzzNetwork } from '../bench/fuzz-network.js';

const CASES = 1500;

describe('network fuzzing, native against node engines', () => {
  it(`${CASES} mutated requests (seed 1) get the same answers from both engines`, async () => {
    const report = await fuzzNetwork({ cases: CASES, seed: 1 });
    expect(report.cases).toBe(CASES);
    expect(report.checks.flatMap((check) => check.failures)).toEqual([]);
    expect(report.frontendsAnswered).toBe(true);
    expect(report.mismatches.map(formatMismatch)).toEqual([]);
  }, 180_000);
});
