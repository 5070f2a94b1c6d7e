/**
 * Typed model statistics in Triton's own shape
 * (`TRITONSERVER_ServerModelStatistics`), checked by zod.
 *
 * 64-bit counters: Triton prints its uint64 counters as JSON numbers, and
 * `JSON.parse` rounds integers above 2^53. The JSON is therefore read with
 * lossless-json, and every cumulative duration (`ns`) is a `bigint` — 2^53 ns
 * is only 104 days of summed compute time, which a busy server reaches.
 * Counts (`count`, `inference_count`, `execution_count`, `batch_size`,
 * `byte_size`) and `last_inference` (ms since the epoch) are `number`: they
 * stay exact up to 2^53 (9·10^15 requests); a count above that is rejected
 * with INTERNAL instead of being rounded silently.
 */
import { isInteger, isSafeNumber, parse as parseLossless } from 'lossless-json';
import { z } from 'zod';
import { TritonError } from '../errors.js';

/** Exact integers arrive as number or (above 2^53) bigint. */
const wide = z.union([z.number(), z.bigint()]);
const nanoseconds = wide.transform((value) => BigInt(value));
const count = wide.transform((value, ctx) => {
  if (typeof value === 'number') return value;
  ctx.addIssue({ code: 'custom', message: `count ${value} exceeds 2^53 and cannot be a number exactly` });
  return z.NEVER;
});

/** A count of events and their summed duration in nanoseconds. */
export const durationStatSchema = z.object({ count, ns: nanoseconds });

export const inferenceStatsSchema = z.object({
  success: durationStatSchema,
  fail: durationStatSchema,
  queue: durationStatSchema,
  compute_input: durationStatSchema,
  compute_infer: durationStatSchema,
  compute_output: durationStatSchema,
  cache_hit: durationStatSchema,
  cache_miss: durationStatSchema,
});

export const batchStatsSchema = z.object({
  batch_size: count,
  compute_input: durationStatSchema,
  compute_infer: durationStatSchema,
  compute_output: durationStatSchema,
});

/** Per response index of a decoupled model (Triton 2.4x+). */
export const responseStatsSchema = z.object({
  compute_infer: durationStatSchema,
  compute_output: durationStatSchema,
  success: durationStatSchema,
  fail: durationStatSchema,
  empty_response: durationStatSchema,
  cancel: durationStatSchema.optional(),
});

export const memoryUsageSchema = z.object({
  type: z.string(),
  id: count,
  byte_size: count,
});

/**
 * One model version's statistics as Triton reports them
 * (`TRITONSERVER_ServerModelStatistics`, `model_stats[i]`): see
 * {@link ModelStatistics}. Durations are bigint nanoseconds, counts numbers.
 */
export const modelStatisticsSchema = z.object({
  name: z.string(),
  version: z.string(),
  /** Milliseconds since the epoch; 0 before the first request. */
  last_inference: count,
  inference_count: count,
  execution_count: count,
  inference_stats: inferenceStatsSchema,
  /** Keyed by response index ("0", "1", …); empty for non-decoupled models. Older Tritons omit it. */
  response_stats: z.record(z.string(), responseStatsSchema).default({}),
  batch_stats: z.array(batchStatsSchema).default([]),
  memory_usage: z.array(memoryUsageSchema).default([]),
});

/** A count of events and their summed duration: `count` (number) and `ns` (bigint nanoseconds). */
export type DurationStat = z.infer<typeof durationStatSchema>;
/**
 * Cumulative request statistics of a model version (Triton's
 * `inference_stats`): successful and failed requests, time queued, time in
 * the model's input, inference and output phases, and response cache hits
 * and misses, each as a {@link DurationStat}.
 */
export type InferenceStats = z.infer<typeof inferenceStatsSchema>;
/**
 * Statistics of the executions of one batch size (Triton's `batch_stats`
 * entry): the compute phases of the executions that ran `batch_size` requests.
 */
export type BatchStats = z.infer<typeof batchStatsSchema>;
/**
 * Statistics of one response index of a decoupled model (Triton's
 * `response_stats` entry): compute time, successes, failures, empty final
 * responses and (newer Tritons) cancellations.
 */
export type ResponseStats = z.infer<typeof responseStatsSchema>;
/**
 * Memory a model version holds (Triton's `memory_usage` entry): `type`
 * (`CPU`, `CPU_PINNED`, `GPU`), device `id` and `byte_size` in bytes.
 */
export type MemoryUsage = z.infer<typeof memoryUsageSchema>;
/** One model version's statistics, in Triton's shape. */
export type ModelStatistics = z.infer<typeof modelStatisticsSchema>;

const statisticsMessageSchema = z.object({ model_stats: z.array(modelStatisticsSchema) });

/** Integers beyond 2^53 become bigint; everything else a plain number. */
function parseNumber(text: string): number | bigint {
  return isInteger(text) && !isSafeNumber(text) ? BigInt(text) : Number(text);
}

/** Parses the JSON of `TRITONSERVER_ServerModelStatistics` exactly. */
export function parseStatisticsJson(text: string): ModelStatistics[] {
  let raw: unknown;
  try {
    raw = parseLossless(text, null, parseNumber);
  } catch (error) {
    throw new TritonError('INTERNAL', `statistics are not valid JSON: ${(error as Error).message}`);
  }
  return parseStatistics(raw);
}

/** Checks a `{ model_stats: [...] }` message already parsed (counts as number or bigint). */
export function parseStatistics(raw: unknown): ModelStatistics[] {
  const result = statisticsMessageSchema.safeParse(raw);
  if (!result.success) {
    throw new TritonError('INTERNAL', `statistics do not have Triton's shape: ${z.prettifyError(result.error)}`);
  }
  return result.data.model_stats;
}
