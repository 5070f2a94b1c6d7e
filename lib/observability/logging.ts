/**
 * Triton's log: writing through its logger (`TRITONSERVER_LogMessage`),
 * parsing its lines, and following its log file into a JS logger.
 *
 * Triton's logger is process-wide and writes either to stdout/stderr or to
 * the file of the `log.file` option. To route it to pino (or any logger with
 * pino's `info(obj, msg)` methods), start the server with a `log.file` and
 * follow that file with `followTritonLog()`: reads are asynchronous (the
 * event loop is never blocked) and `close()` reads to the end of the file
 * first, so no line written before it is lost.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { TritonError } from '../errors.js';
import { native } from '../native.js';

/** `TRITONSERVER_LogLevel` values. */
const LEVELS = { info: 0, warn: 1, error: 2, verbose: 3 } as const;
/**
 * A Triton log level (`TRITONSERVER_LogLevel`), as `server.log()` and
 * `server.logEnabled()` take it. Any other string throws
 * `TritonError('INVALID_ARG')`.
 */
export type LogLevel = keyof typeof LEVELS;

function levelValue(level: LogLevel): number {
  const value = (LEVELS as Record<string, number>)[level];
  if (value === undefined) {
    throw new TritonError('INVALID_ARG', `log level must be one of ${Object.keys(LEVELS).join(', ')}; got '${String(level)}'`);
  }
  return value;
}

/** @internal Server.log */
export function logMessage(libraryPath: string, level: LogLevel, message: string, file: string, line: number): void {
  if (typeof message !== 'string') throw new TritonError('INVALID_ARG', 'a log message must be a string');
  native.logMessage(libraryPath, levelValue(level), file, Math.trunc(line), message);
}

/** @internal Server.logEnabled */
export function logIsEnabled(libraryPath: string, level: LogLevel): boolean {
  return native.logIsEnabled(libraryPath, levelValue(level));
}

/** One line of Triton's log as a pino-style record. */
export interface TritonLogRecord {
  /** The line's severity letter (I, W, E) as a pino level name; Triton's verbose messages are written as I. */
  level: 'info' | 'warn' | 'error';
  /**
   * The message, unquoted when Triton wrote it as a JSON string (its default,
   * TRITON_SERVER_ESCAPE_LOG_MESSAGES); the lines that continue a multi-line
   * record are appended after `\n`.
   */
  msg: string;
  /** Source file and line in Triton (or the `file`/`line` given to `server.log`). */
  file: string;
  /** The line number that goes with `file`. */
  line: number;
  /** Milliseconds since the epoch (UTC). The default format has no year: the current one is assumed. */
  time: number;
  /** The process id Triton printed. */
  pid: number;
}

const LETTERS: Record<string, TritonLogRecord['level']> = { I: 'info', W: 'warn', E: 'error' };

// I1201 08:42:27.123456 1234 server.cc:123] message
const DEFAULT_LINE = /^([IWE])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6}) (\d+) ([^:\s]+):(\d+)\] ?(.*)$/s;
// 2026-12-01T08:42:27Z I 1234 server.cc:123] message
const ISO_LINE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?Z ([IWE]) (\d+) ([^:\s]+):(\d+)\] ?(.*)$/s;

/**
 * Triton quotes messages as JSON strings by default
 * (TRITON_SERVER_ESCAPE_LOG_MESSAGES); unquote them when they are.
 */
function unquote(message: string): string {
  if (message.length >= 2 && message.startsWith('"') && message.endsWith('"')) {
    try {
      const value: unknown = JSON.parse(message);
      if (typeof value === 'string') return value;
    } catch {
      // Not a JSON string after all: keep it as written.
    }
  }
  return message;
}

/**
 * Parses one line of Triton's log, in the default or the ISO8601 format.
 * Returns undefined for lines that are not records (continuations of a
 * multi-line message such as Triton's start-up tables).
 */
export function parseTritonLogLine(text: string, now: Date = new Date()): TritonLogRecord | undefined {
  let match = DEFAULT_LINE.exec(text);
  if (match !== null) {
    const [, letter, month, day, hours, minutes, seconds, micros, pid, file, line, message] = match as unknown as string[];
    const time =
      Date.UTC(now.getUTCFullYear(), Number(month) - 1, Number(day), Number(hours), Number(minutes), Number(seconds)) +
      Math.floor(Number(micros) / 1000);
    return { level: LETTERS[letter as string] as TritonLogRecord['level'], msg: unquote(message as string), file: file as string, line: Number(line), time, pid: Number(pid) };
  }
  match = ISO_LINE.exec(text);
  if (match !== null) {
    const [, year, month, day, hours, minutes, seconds, fraction, letter, pid, file, line, message] = match as unknown as Array<string | undefined>;
    const millis = fraction === undefined ? 0 : Math.floor(Number(`0.${fraction}`) * 1000);
    const time = Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hours), Number(minutes), Number(seconds)) + millis;
    return { level: LETTERS[letter as string] as TritonLogRecord['level'], msg: unquote(message as string), file: file as string, line: Number(line), time, pid: Number(pid) };
  }
  return undefined;
}

/** A pino-compatible logger (pino's own `Logger` fits). */
export interface PinoLikeLogger {
  /**
   * Logs an info record.
   *
   * @param obj - The record's fields but `level` and `msg` (`file`, `line`,
   *   `time`, `pid`), plus `source: 'triton'`.
   * @param msg - The message.
   */
  info(obj: object, msg: string): void;
  /** Logs a warning record; arguments as for {@link PinoLikeLogger.info}. */
  warn(obj: object, msg: string): void;
  /** Logs an error record; arguments as for {@link PinoLikeLogger.info}. */
  error(obj: object, msg: string): void;
}

/**
 * Where {@link followTritonLog} delivers records: a pino-style logger (each
 * record to the method of its level), or a function given each record as is.
 */
export type TritonLogSink = PinoLikeLogger | ((record: TritonLogRecord) => void);

/** Options of {@link followTritonLog}. */
export interface FollowLogOptions {
  /** How often to look for new lines, in ms. Default 100. */
  intervalMs?: number;
  /** Start at the current end of the file instead of its beginning. Default false. */
  fromEnd?: boolean;
}

/** A running {@link followTritonLog}: read now, or stop. */
export interface TritonLogFollower {
  /** Reads what was written so far now (without waiting for the next interval). */
  flush(): Promise<void>;
  /** Reads to the end of the file, delivers the last lines, stops following. */
  close(): Promise<void>;
}

function deliver(sink: TritonLogSink, record: TritonLogRecord): void {
  if (typeof sink === 'function') {
    sink(record);
    return;
  }
  const { level, msg, ...rest } = record;
  sink[level]({ ...rest, source: 'triton' }, msg);
}

/**
 * Follows Triton's log file and hands every record to `sink`. Lines that
 * continue a multi-line record (start-up tables) are appended to it.
 *
 * @param path - Triton's log file (the server's `log.file` option); created
 *   if it does not exist yet.
 * @throws {@link TritonError} `NOT_FOUND` when the file cannot be opened.
 */
export async function followTritonLog(path: string, sink: TritonLogSink, options: FollowLogOptions = {}): Promise<TritonLogFollower> {
  const intervalMs = options.intervalMs ?? 100;
  let handle: FileHandle;
  try {
    handle = await open(path, 'a+');
  } catch (error) {
    throw new TritonError('NOT_FOUND', `cannot open Triton's log file ${path}: ${(error as Error).message}`);
  }
  let position = options.fromEnd ? (await handle.stat()).size : 0;
  let partial = '';
  let pending: TritonLogRecord | undefined;
  const buffer = Buffer.alloc(64 * 1024);
  const decoder = new TextDecoder();

  const emitPending = (): void => {
    if (pending !== undefined) deliver(sink, pending);
    pending = undefined;
  };
  const handleLine = (line: string): void => {
    const record = parseTritonLogLine(line);
    if (record !== undefined) {
      emitPending();
      pending = record;
    } else if (pending !== undefined) {
      pending.msg += `\n${line}`;
    } else if (line !== '') {
      // A continuation whose record was already delivered: keep it anyway.
      pending = { level: 'info', msg: line, file: '', line: 0, time: Date.now(), pid: 0 };
    }
  };

  // One read loop at a time; a flush waits for the one running.
  let reading: Promise<void> = Promise.resolve();
  const readNew = (final: boolean): Promise<void> => {
    reading = reading.then(async () => {
      for (;;) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
        if (bytesRead === 0) break;
        position += bytesRead;
        partial += decoder.decode(buffer.subarray(0, bytesRead), { stream: true });
        const lines = partial.split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) handleLine(line);
      }
      if (final && partial !== '') {
        handleLine(partial);
        partial = '';
      }
      // A record is complete once a newer one starts or reading stops for now.
      emitPending();
    });
    return reading;
  };

  const timer = setInterval(() => {
    readNew(false).catch(() => undefined);
  }, intervalMs);
  timer.unref();
  let closed: Promise<void> | undefined;
  return {
    flush: () => readNew(false),
    close: () => {
      closed ??= (async () => {
        clearInterval(timer);
        try {
          await readNew(true);
        } finally {
          await handle.close();
        }
      })();
      return closed;
    },
  };
}
