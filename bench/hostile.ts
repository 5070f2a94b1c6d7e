/**
 * What a hostile client costs a KServe server, one attack at a time:
 *
 *   npx tsx bench/hostile.ts [--target native|node|tritonserver]... [--quick] [--case NAME]... [--json out.json]
 *
 * Each case starts a fresh server in a child process (so its memory is
 * measured apart from the attacker's): `serveKServe` with the `native` or
 * `node` engines (bench/hostile-server.ts, on the test core unless
 * TRITONSERVER_LIBRARY says otherwise), or Triton's own `tritonserver`
 * ($TRITONSERVER_BIN, default /tmp/triton/install/bin/tritonserver, backends
 * from $TRITON_BACKENDS). Per case it reports the server's RSS before, its
 * peak during the attack and its RSS 2 s after the attacker left; the worst
 * latency of a probe client sending one small binary inference
 * (identity_fp32 FP32 [1,16]) every 10 ms over HTTP on a keep-alive
 * connection of its own (with the native engine those are answered on the
 * front end's loop thread, so a long one means the attack held that loop);
 * and what the attacker saw; and for our engines, how long the server's JS
 * thread was held at most (its event loop's worst delay, read with
 * SIGUSR2): on 2 shared vCPUs the probe's latency also counts the time the
 * attacker and the server take the CPUs from each other, this does not.
 * The probe and the RSS sampler run on a worker
 * thread, so the attacker's own busy event loop does not show up as server
 * latency. Without a target, all three are run (tritonserver where found).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http2 from 'node:http2';
import { connect, createServer, type Socket } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { gzipSync } from 'node:zlib';
import { encodeModelInferRequest } from '../lib/kserve/infer-wire.js';
import {
  FLAG,
  FRAME,
  frame,
  grpcMessage,
  grpcRequestHeaders,
  hpackIndexed,
  hpackLiteral,
  SETTING,
  settingsFrame,
  type Frame,
} from '../test/h2-frames.js';

const ROOT = resolve(import.meta.dirname, '..');
const MODELS = resolve(ROOT, 'test/models');
const MODEL_INFER = '/inference.GRPCInferenceService/ModelInfer';
const MiB = 1024 * 1024;

const { values: args } = parseArgs({
  options: {
    target: { type: 'string', multiple: true },
    case: { type: 'string', multiple: true },
    quick: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const QUICK = args.quick ?? false;
/** How long the cases that repeat their attack go on. */
const ATTACK_MS = QUICK ? 1500 : 5000;

// ---------------------------------------------------------------------------
// Servers under attack, each in a child process.

interface Target {
  pid: number;
  http: number;
  grpc: number;
  child: ChildProcess;
  stderr: () => string;
  /** The JS thread's worst event-loop delay since the last call (ms); undefined for tritonserver. */
  jsLoopMaxMs(): Promise<number | undefined>;
  stop(): Promise<void>;
}

const TRITONSERVER_BIN = process.env.TRITONSERVER_BIN ?? '/tmp/triton/install/bin/tritonserver';
const TRITON_BACKENDS = process.env.TRITON_BACKENDS ?? '/tmp/triton/install/backends';

/** Ends a child: SIGTERM, then SIGKILL if it is still there after `graceMs` (a server may wait on the attacker's connections). */
async function endChild(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Keeps the last 16 KiB a child wrote to stderr, to say why it died. */
function tail(child: ChildProcess): () => string {
  let text = '';
  child.stderr?.on('data', (chunk: Buffer) => (text = (text + chunk.toString()).slice(-16384)));
  return () => text;
}

async function startEngine(engine: 'native' | 'node'): Promise<Target> {
  const child = spawn(process.execPath, ['--import', 'tsx', resolve(ROOT, 'bench/hostile-server.ts'), '--engine', engine], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr = tail(child);
  // The child's stdout, a JSON object per line: its ports first, then its answers to SIGUSR2.
  const waiting: Array<(line: Record<string, number>) => void> = [];
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    for (let end = out.indexOf('\n'); end !== -1; end = out.indexOf('\n')) {
      const line = out.slice(0, end);
      out = out.slice(end + 1);
      if (line.startsWith('{')) waiting.shift()?.(JSON.parse(line) as Record<string, number>);
    }
  });
  const next = (): Promise<Record<string, number>> => new Promise((done) => waiting.push(done));
  const ports = await new Promise<{ http: number; grpc: number }>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`the ${engine} server did not start in 60 s: ${stderr()}`)), 60_000);
    void next().then((line) => {
      clearTimeout(timer);
      done(line as { http: number; grpc: number });
    });
    child.once('exit', (code) => fail(new Error(`the ${engine} server exited (${code}): ${stderr()}`)));
  });
  const jsLoopMaxMs = async (): Promise<number | undefined> => {
    const answer = next();
    child.kill('SIGUSR2');
    return (await answer).jsLoopMaxMs;
  };
  return { pid: child.pid ?? 0, ...ports, child, stderr, jsLoopMaxMs, stop: () => endChild(child) };
}

/** A port free now (the kernel's choice for port 0); tritonserver needs numbers. */
function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => done(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

async function startTritonserver(): Promise<Target> {
  const repository = await mkdtemp(join(tmpdir(), 'hostile-repo-'));
  for (const model of ['identity_fp32', 'slow']) await cp(join(MODELS, model), join(repository, model), { recursive: true });
  const [http, grpc, metrics] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(
    TRITONSERVER_BIN,
    [
      `--model-repository=${repository}`,
      `--backend-directory=${TRITON_BACKENDS}`,
      `--http-port=${http}`,
      `--grpc-port=${grpc}`,
      `--metrics-port=${metrics}`,
      '--model-control-mode=none',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const stderr = tail(child);
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`tritonserver exited (${child.exitCode}): ${stderr()}`);
    const ready = await httpExchange(http, Buffer.from('GET /v2/health/ready HTTP/1.1\r\nHost: t\r\n\r\n'), 1000).catch(() => undefined);
    if (ready?.status === 200) break;
    if (Date.now() > deadline) {
      await endChild(child);
      throw new Error(`tritonserver was not ready in 120 s: ${stderr()}`);
    }
    await sleep(250);
  }
  return {
    pid: child.pid ?? 0,
    http,
    grpc,
    child,
    stderr,
    jsLoopMaxMs: async () => undefined,
    stop: async () => {
      await endChild(child, 5000);
      await rm(repository, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------
// Small clients.

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

function rssKb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

async function open(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((done, fail) => socket.once('connect', done).once('error', fail));
  socket.setNoDelay(true);
  return socket;
}

interface HttpAnswer {
  status: number;
  body: Buffer;
  ms: number;
}

/**
 * Reads one HTTP/1.1 response as it arrives (Content-Length or chunked
 * framing): the head is parsed once and the body's chunks are kept as they
 * come, since some answers here are tens of MB.
 */
class ResponseReader {
  #head: Buffer = Buffer.alloc(0);
  #parsed: { status: number; length: number | 'chunked' } | undefined;
  #body: Buffer[] = [];
  #bodyBytes = 0;
  #tail: Buffer = Buffer.alloc(0);
  received = 0;

  /** Takes a chunk; the response once complete. */
  push(chunk: Buffer): { status: number; body: Buffer } | undefined {
    this.received += chunk.length;
    if (this.#parsed === undefined) {
      this.#head = Buffer.concat([this.#head, chunk]);
      const end = this.#head.indexOf('\r\n\r\n');
      if (end === -1) return undefined;
      const text = this.#head.subarray(0, end).toString('latin1');
      const chunked = /\r\ntransfer-encoding: *chunked/i.test(text);
      this.#parsed = { status: Number(text.slice(9, 12)), length: chunked ? 'chunked' : Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? 0) };
      chunk = this.#head.subarray(end + 4);
    }
    this.#body.push(chunk);
    this.#bodyBytes += chunk.length;
    const { status, length } = this.#parsed;
    if (length === 'chunked') {
      // The last chunk's marker may straddle two reads: look at the last bytes of both.
      this.#tail = Buffer.concat([this.#tail, chunk]).subarray(-7);
      if (!this.#tail.equals(Buffer.from('\r\n0\r\n\r\n')) && !(this.#bodyBytes === 5 && this.#tail.equals(Buffer.from('0\r\n\r\n')))) return undefined;
      return { status, body: Buffer.concat(this.#body) };
    }
    if (this.#bodyBytes < length) return undefined;
    return { status, body: Buffer.concat(this.#body).subarray(0, length) };
  }
}

/** One HTTP/1.1 exchange on a connection of its own; rejects on a close or timeout before a whole answer. */
async function httpExchange(port: number, request: Buffer, timeoutMs: number): Promise<HttpAnswer> {
  const started = performance.now();
  const socket = await open(port);
  try {
    return await new Promise<HttpAnswer>((done, fail) => {
      const reader = new ResponseReader();
      const timer = setTimeout(() => fail(new Error(`no answer in ${timeoutMs} ms (${reader.received} bytes in)`)), timeoutMs);
      socket.on('data', (chunk: Buffer) => {
        const answer = reader.push(chunk);
        if (answer === undefined) return;
        clearTimeout(timer);
        done({ ...answer, ms: performance.now() - started });
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        fail(error);
      });
      socket.once('close', () => {
        clearTimeout(timer);
        fail(new Error(`closed before a whole answer (${reader.received} bytes in)`));
      });
      socket.write(request);
    });
  } finally {
    socket.destroy();
  }
}

/** An HTTP/1.1 binary inference request for identity_fp32: `header` is its JSON, `binary` the tensor bytes after it. */
function httpInfer(header: string, binary: Buffer = Buffer.alloc(0), extra = ''): Buffer {
  const head = Buffer.from(header);
  return Buffer.concat([
    Buffer.from(
      `POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: t\r\n${extra}Inference-Header-Content-Length: ${head.length}\r\nContent-Length: ${head.length + binary.length}\r\n\r\n`,
    ),
    head,
    binary,
  ]);
}

const PROBE = httpInfer(
  JSON.stringify({
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
    outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
  }),
  Buffer.from(new Float32Array(16).fill(1.5).buffer),
);

/** An answer as a short line: status and the start of the body. */
function shortAnswer(answer: HttpAnswer): string {
  const body = answer.body.toString('latin1').replace(/\s+/g, ' ');
  const size = answer.body.length >= 1024 * 1024 ? ` (${(answer.body.length / MiB).toFixed(1)} MiB)` : '';
  return `${answer.status}${size} ${body.length > 90 ? `${body.slice(0, 90)}…` : body}`;
}

function counted(counts: Map<string, number>): string {
  return [...counts].map(([what, n]) => (n === 1 ? what : `${what} ×${n}`)).join(', ');
}

function bump(counts: Map<string, number>, what: string): void {
  counts.set(what, (counts.get(what) ?? 0) + 1);
}

const H2_ERRORS: Record<number, string> = {
  0: 'NO_ERROR',
  1: 'PROTOCOL_ERROR',
  2: 'INTERNAL_ERROR',
  3: 'FLOW_CONTROL_ERROR',
  5: 'STREAM_CLOSED',
  6: 'FRAME_SIZE_ERROR',
  7: 'REFUSED_STREAM',
  8: 'CANCEL',
  9: 'COMPRESSION_ERROR',
  11: 'ENHANCE_YOUR_CALM',
};
const h2Error = (code: number): string => H2_ERRORS[code] ?? `0x${code.toString(16)}`;

/**
 * A raw HTTP/2 client connection (test/h2-frames.ts writes its frames) that
 * keeps count of what it received instead of every frame, and sends DATA
 * within the server's flow-control windows, as a real client must, so that
 * what is measured is the server's handling of the attack, not a flow
 * control error.
 */
class H2Conn {
  readonly resets = new Map<number, number>();
  readonly answered = new Set<number>();
  goaway: { lastStream: number; code: number } | undefined;
  closed = false;
  settingsSeen = false;
  dataBytesSent = 0;
  #buffered: Buffer = Buffer.alloc(0);
  #peerInitialWindow = 65535;
  #peerMaxFrame = 16384;
  #connectionWindow = 65535;
  #streamWindows = new Map<number, number>();
  #queued = new Map<number, { data: Buffer; end: boolean }>();
  #waiters: Array<() => void> = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.#receive(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.closed = true;
      this.#wake();
    });
  }

  /** Connects, sends the preface with `settings`, waits for the server's SETTINGS. */
  static async open(port: number, settings: Array<[number, number]> = []): Promise<H2Conn> {
    const conn = new H2Conn(await open(port));
    conn.socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), settingsFrame(settings)]));
    await conn.until(() => conn.settingsSeen, 5000);
    return conn;
  }

  send(...frames: Buffer[]): boolean {
    return this.socket.write(Buffer.concat(frames));
  }

  /** DATA for `stream`, sent as the server's windows allow. */
  sendData(stream: number, data: Buffer, end: boolean): void {
    if (data.length === 0) {
      if (end) this.socket.write(frame(FRAME.data, FLAG.endStream, stream));
      return;
    }
    if (!this.#streamWindows.has(stream)) this.#streamWindows.set(stream, this.#peerInitialWindow);
    this.#queued.set(stream, { data, end });
    this.#flush();
  }

  /** Resolves true once `condition` holds, false after `timeoutMs` or once the connection closed without it. */
  async until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!condition()) {
      if (this.closed || Date.now() > deadline) return condition();
      await new Promise<void>((done) => {
        const timer = setTimeout(done, Math.min(100, Math.max(1, deadline - Date.now())));
        this.#waiters.push(() => {
          clearTimeout(timer);
          done();
        });
      });
    }
    return true;
  }

  close(): void {
    this.socket.destroy();
  }

  #receive(chunk: Buffer): void {
    this.#buffered = this.#buffered.length === 0 ? chunk : Buffer.concat([this.#buffered, chunk]);
    let at = 0;
    while (this.#buffered.length - at >= 9) {
      const length = this.#buffered.readUIntBE(at, 3);
      if (this.#buffered.length - at < 9 + length) break;
      this.#onFrame({
        type: this.#buffered[at + 3]!,
        flags: this.#buffered[at + 4]!,
        stream: this.#buffered.readUInt32BE(at + 5) & 0x7fffffff,
        payload: this.#buffered.subarray(at + 9, at + 9 + length),
      });
      at += 9 + length;
    }
    this.#buffered = this.#buffered.subarray(at);
    this.#wake();
  }

  #onFrame(received: Frame): void {
    const { type, flags, stream, payload } = received;
    if (type === FRAME.settings && (flags & FLAG.ack) === 0) {
      for (let at = 0; at + 6 <= payload.length; at += 6) {
        const id = payload.readUInt16BE(at);
        const value = payload.readUInt32BE(at + 2);
        if (id === SETTING.initialWindowSize) {
          const delta = value - this.#peerInitialWindow;
          for (const [s, window] of this.#streamWindows) this.#streamWindows.set(s, window + delta);
          this.#peerInitialWindow = value;
        } else if (id === 5) this.#peerMaxFrame = value;
      }
      this.settingsSeen = true;
      this.socket.write(frame(FRAME.settings, FLAG.ack, 0));
      this.#flush();
    } else if (type === FRAME.ping && (flags & FLAG.ack) === 0) {
      this.socket.write(frame(FRAME.ping, FLAG.ack, 0, payload));
    } else if (type === FRAME.windowUpdate) {
      const increment = payload.readUInt32BE(0) & 0x7fffffff;
      if (stream === 0) this.#connectionWindow += increment;
      else this.#streamWindows.set(stream, (this.#streamWindows.get(stream) ?? this.#peerInitialWindow) + increment);
      this.#flush();
    } else if (type === FRAME.headers) {
      this.answered.add(stream);
    } else if (type === FRAME.rstStream) {
      this.resets.set(stream, payload.readUInt32BE(0));
      this.#queued.delete(stream);
      this.#streamWindows.delete(stream);
    } else if (type === FRAME.goaway) {
      this.goaway = { lastStream: payload.readUInt32BE(0) & 0x7fffffff, code: payload.readUInt32BE(4) };
    }
  }

  #flush(): void {
    if (this.closed) return;
    for (const [stream, queued] of this.#queued) {
      let window = this.#streamWindows.get(stream) ?? 0;
      while (queued.data.length > 0 && window > 0 && this.#connectionWindow > 0) {
        const size = Math.min(queued.data.length, window, this.#connectionWindow, this.#peerMaxFrame);
        const last = size === queued.data.length;
        this.socket.write(frame(FRAME.data, last && queued.end ? FLAG.endStream : 0, stream, queued.data.subarray(0, size)));
        queued.data = queued.data.subarray(size);
        window -= size;
        this.#connectionWindow -= size;
        this.dataBytesSent += size;
      }
      this.#streamWindows.set(stream, window);
      if (queued.data.length === 0) this.#queued.delete(stream);
      else break; // streams go in order: the connection window is what they share
    }
  }

  #wake(): void {
    this.#waiters.splice(0).forEach((wake) => wake());
  }
}

interface GrpcAnswer {
  status: string;
  message: string;
  bytes: number;
}

/** One gRPC call over node:http2 with `body` (a framed message) as its DATA. */
async function grpcCall(port: number, path: string, body: Buffer, timeoutMs = 30_000): Promise<GrpcAnswer> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined);
  try {
    return await new Promise<GrpcAnswer>((done, fail) => {
      const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers' });
      const timer = setTimeout(() => fail(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
      let headers: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      let bytes = 0;
      stream.on('response', (h) => (headers = h));
      stream.on('trailers', (t) => (trailers = t));
      stream.on('data', (chunk: Buffer) => (bytes += chunk.length));
      stream.on('error', (error) => {
        clearTimeout(timer);
        fail(error);
      });
      stream.on('close', () => {
        clearTimeout(timer);
        const status = trailers['grpc-status'] ?? headers['grpc-status'];
        const message = trailers['grpc-message'] ?? headers['grpc-message'];
        done({ status: String(status ?? `rst ${h2Error(stream.rstCode ?? 0)}`), message: decodeURIComponent(String(message ?? '')), bytes });
      });
      stream.end(body);
    });
  } finally {
    session.close();
  }
}

// ---------------------------------------------------------------------------
// The probe and the RSS sampler, on a worker thread of their own (plain JS:
// eval'd workers do not go through tsx).

const MONITOR = `
const { parentPort, workerData } = require('node:worker_threads');
const net = require('node:net');
const fs = require('node:fs');
const { port, pid, request } = workerData;
const probe = Buffer.from(request);
const rss = () => { try { return Number(/VmRSS:\\s+(\\d+)/.exec(fs.readFileSync('/proc/' + pid + '/status', 'latin1'))[1]); } catch { return 0; } };
let peakKb = rss();
const sampler = setInterval(() => { peakKb = Math.max(peakKb, rss()); }, 20);
let worst = 0, sent = 0, answered = 0, failed = 0, reconnects = 0, since = 0, lastSent = 0, stopped = false;
let socket, received = Buffer.alloc(0), next;
function end(buf) {
  const head = buf.indexOf('\\r\\n\\r\\n');
  if (head === -1) return -1;
  const m = /\\r\\ncontent-length: *(\\d+)/i.exec(buf.subarray(0, head).toString('latin1'));
  const total = head + 4 + Number(m ? m[1] : 0);
  return buf.length >= total ? total : -1;
}
function send() {
  if (stopped) return;
  since = performance.now(); lastSent = since; sent++;
  socket.write(probe);
}
function schedule() { next = setTimeout(send, Math.max(0, lastSent + 10 - performance.now())); }
function open() {
  received = Buffer.alloc(0);
  socket = net.connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  socket.on('connect', send);
  socket.on('data', (chunk) => {
    received = Buffer.concat([received, chunk]);
    const at = end(received);
    if (at === -1) return;
    if (received.subarray(9, 12).toString() === '200') answered++; else failed++;
    received = received.subarray(at);
    worst = Math.max(worst, performance.now() - since);
    since = 0;
    schedule();
  });
  socket.on('error', () => {});
  socket.on('close', () => {
    if (stopped) return;
    // A lost answer counts for as long as it was waited on; then a new connection.
    if (since) { worst = Math.max(worst, performance.now() - since); failed++; since = 0; }
    reconnects++;
    setTimeout(open, 10);
  });
}
open();
parentPort.on('message', () => {
  stopped = true;
  clearTimeout(next);
  clearInterval(sampler);
  const pending = since ? performance.now() - since : 0;
  peakKb = Math.max(peakKb, rss());
  socket.destroy();
  parentPort.postMessage({ peakKb, worstMs: Math.max(worst, pending), sent, answered, failed, reconnects, pendingMs: pending });
});
`;

interface MonitorReport {
  peakKb: number;
  worstMs: number;
  sent: number;
  answered: number;
  failed: number;
  reconnects: number;
  pendingMs: number;
}

function startMonitor(port: number, pid: number): { stop: () => Promise<MonitorReport> } {
  const worker = new Worker(MONITOR, { eval: true, workerData: { port, pid, request: new Uint8Array(PROBE) } });
  return {
    stop: async () => {
      const report = new Promise<MonitorReport>((done) => worker.once('message', done));
      worker.postMessage('stop');
      const result = await report;
      await worker.terminate();
      return result;
    },
  };
}

// ---------------------------------------------------------------------------
// The attacks. Each returns what the attacker saw, in a line, and details.

interface Seen {
  saw: string;
  details?: Record<string, unknown>;
}

interface Case {
  name: string;
  what: string;
  run(target: Target): Promise<Seen>;
}

/** identity_fp32's JSON header with a shape of `bytes` bytes of zeros in total. */
function zeroShapeHeader(bytes: number): string {
  const prefix = '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[';
  const suffix = '],"parameters":{"binary_data_size":0}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}';
  const dims = Math.floor((bytes - prefix.length - suffix.length + 1) / 2);
  return `${prefix}${'0,'.repeat(dims - 1)}0${suffix}`;
}

/** Runs `attempt` one after another until `ms` passed (at least once); the answers counted by their line. */
async function repeatFor(ms: number, attempt: () => Promise<string>): Promise<{ counts: Map<string, number>; times: number[] }> {
  const counts = new Map<string, number>();
  const times: number[] = [];
  const deadline = performance.now() + ms;
  do {
    const started = performance.now();
    bump(counts, await attempt().catch((error: Error) => `error: ${error.message}`));
    times.push(performance.now() - started);
  } while (performance.now() < deadline);
  return { counts, times };
}

const msRange = (times: number[]): string => {
  const sorted = [...times].sort((a, b) => a - b);
  const fmt = (ms: number): string => (ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));
  return sorted.length === 1 ? `${fmt(sorted[0]!)} ms` : `${fmt(sorted[0]!)}–${fmt(sorted[sorted.length - 1]!)} ms`;
};

function jsonHeaderCase(size: number): Case {
  return {
    name: `json-header-${size / MiB}MiB`,
    what: `binary inference whose JSON header is ${size / MiB} MiB of "shape":[0,0,…]`,
    async run({ http }) {
      const request = httpInfer(zeroShapeHeader(size));
      const { counts, times } = await repeatFor(ATTACK_MS, async () => shortAnswer(await httpExchange(http, request, 60_000)));
      return { saw: `${counted(counts)}; ${times.length} sent, each ${msRange(times)}`, details: { answers: Object.fromEntries(counts), times } };
    },
  };
}

const HPACK_BOMB = Buffer.concat([
  grpcRequestHeaders(MODEL_INFER),
  hpackLiteral('x-bomb', 'a'.repeat(4000), true),
  Buffer.alloc(11_000, hpackIndexed(62)),
]);

const inferMessage = (shape: number[], bytes: Buffer): Buffer =>
  encodeModelInferRequest({
    model_name: 'identity_fp32',
    model_version: '',
    id: '',
    parameters: {},
    outputs: [],
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape, bytes }],
  });

const SHAPE_OVERFLOW = [4294967296, 4294967296];

const MODEL_NAME_FIELD = Buffer.from([0x0a, 13, ...Buffer.from('identity_fp32')]);

/** A ModelInfer message for identity_fp32 that repeats `field` (a protobuf tag and its body) to `size` bytes. */
function repeatedFieldMessage(field: Buffer, size: number): Buffer {
  const head = MODEL_NAME_FIELD;
  return Buffer.concat([head, Buffer.alloc(Math.floor((size - head.length) / field.length) * field.length, field)]);
}

/** A packed varint field: tag, the length as a varint, then the bytes. */
function packed(tag: number, bytes: Buffer): Buffer {
  const length: number[] = [];
  for (let n = bytes.length; ; n >>>= 7) {
    length.push(n >= 0x80 ? (n & 0x7f) | 0x80 : n);
    if (n < 0x80) break;
  }
  return Buffer.concat([Buffer.from([tag, ...length]), bytes]);
}

/** The cases that send one gRPC message of `size` bytes, over and over, one call at a time. */
function grpcMessageCase(name: string, what: string, message: () => Buffer): Case {
  return {
    name,
    what,
    async run({ grpc }) {
      const body = grpcMessage(message());
      const { counts, times } = await repeatFor(ATTACK_MS, async () => {
        const a = await grpcCall(grpc, MODEL_INFER, body, 60_000);
        return `grpc-status ${a.status} "${a.message.slice(0, 90)}"`;
      });
      return { saw: `${counted(counts)}; ${times.length} sent, each ${msRange(times)}`, details: { answers: Object.fromEntries(counts), times } };
    },
  };
}

/** A JSON inference body of `size` bytes whose input declares shape [1] and carries `data` of zeros. */
function jsonDataCase(size: number): Case {
  return {
    name: `json-data-${size / MiB}MiB`,
    what: `JSON inference of ${size / MiB} MiB: shape [1], "data":[0,0,…]`,
    async run({ http }) {
      const prefix = '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[';
      const suffix = ']}]}';
      const count = Math.floor((size - prefix.length - suffix.length + 1) / 2);
      const body = Buffer.from(`${prefix}${'0,'.repeat(count - 1)}0${suffix}`);
      const request = Buffer.concat([
        Buffer.from(`POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`),
        body,
      ]);
      const { counts, times } = await repeatFor(ATTACK_MS, async () => shortAnswer(await httpExchange(http, request, 60_000)));
      return { saw: `${counted(counts)}; ${times.length} sent, each ${msRange(times)}`, details: { answers: Object.fromEntries(counts), times } };
    },
  };
}

const CASES: Case[] = [
  {
    name: 'hpack-bomb',
    what: 'gRPC connections of 16 streams, each HEADERS (no END_STREAM) a 4,000-byte table entry referred to 11,000 times (44 MB decoded)',
    async run({ grpc }) {
      const outcomes = new Map<string, number>();
      let connections = 0;
      const deadline = performance.now() + ATTACK_MS;
      do {
        const conn = await H2Conn.open(grpc);
        connections++;
        const streams = Array.from({ length: 16 }, (_, i) => 2 * i + 1);
        conn.send(...streams.map((s) => frame(FRAME.headers, FLAG.endHeaders, s, HPACK_BOMB)));
        await conn.until(() => streams.every((s) => conn.resets.has(s) || conn.answered.has(s)), 5000);
        for (const s of streams) {
          const code = conn.resets.get(s);
          bump(outcomes, code !== undefined ? `RST ${h2Error(code)}` : conn.answered.has(s) ? 'HEADERS' : conn.closed ? 'connection closed' : 'nothing in 5 s');
        }
        if (conn.goaway) bump(outcomes, `GOAWAY ${h2Error(conn.goaway.code)}`);
        conn.close();
      } while (performance.now() < deadline);
      return { saw: `${connections} connections: ${counted(outcomes)}`, details: { connections, outcomes: Object.fromEntries(outcomes) } };
    },
  },
  {
    name: 'pipelined-flood',
    what: `pipelined GET /v2/health/live on one HTTP/1.1 connection for ${ATTACK_MS / 1000} s, answers never read`,
    async run({ http }) {
      const socket = await open(http);
      socket.pause();
      let closed = false;
      socket.on('error', () => undefined);
      socket.once('close', () => (closed = true));
      const request = 'GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n';
      const chunk = Buffer.from(request.repeat(Math.floor(65536 / request.length)));
      let accepted = 0;
      const started = performance.now();
      while (performance.now() - started < ATTACK_MS && !closed) {
        const more = socket.write(chunk, (error) => {
          if (!error) accepted += chunk.length;
        });
        if (!more) await Promise.race([new Promise((done) => socket.once('drain', done)), sleep(100)]);
      }
      socket.destroy();
      const requests = Math.floor(accepted / request.length);
      return {
        saw: `${(accepted / MiB).toFixed(1)} MiB accepted (${requests.toLocaleString('en-US')} requests)${closed ? ', closed by the server' : ''}`,
        details: { acceptedBytes: accepted, requests, closedByServer: closed },
      };
    },
  },
  jsonHeaderCase(8 * MiB),
  jsonHeaderCase(16 * MiB),
  {
    name: 'window-zero',
    what: `gRPC client with SETTINGS_INITIAL_WINDOW_SIZE 0: ${QUICK ? 500 : 2000} ModelInfer calls of 64 KiB, window never opened`,
    async run({ grpc }) {
      const calls = QUICK ? 500 : 2000;
      const conn = await H2Conn.open(grpc, [[SETTING.initialWindowSize, 0]]);
      const message = grpcMessage(inferMessage([1, 16384], Buffer.alloc(65536)));
      const outcomes = new Map<string, number>();
      const deadline = performance.now() + 20_000;
      let sent = 0;
      // One call at a time: each waits for its answer's HEADERS (or reset) before the next.
      for (let i = 0; i < calls && !conn.closed && conn.goaway === undefined && performance.now() < deadline; i++) {
        const stream = 2 * i + 1;
        conn.send(frame(FRAME.headers, FLAG.endHeaders, stream, grpcRequestHeaders(MODEL_INFER)));
        conn.sendData(stream, message, true);
        sent++;
        await conn.until(() => conn.answered.has(stream) || conn.resets.has(stream) || conn.goaway !== undefined, 10_000);
        const code = conn.resets.get(stream);
        bump(outcomes, code !== undefined ? `RST ${h2Error(code)}` : conn.answered.has(stream) ? 'answered' : 'no answer');
      }
      if (conn.goaway) bump(outcomes, `GOAWAY ${h2Error(conn.goaway.code)}`);
      if (conn.closed) bump(outcomes, 'connection closed');
      const dataBytes = conn.dataBytesSent;
      conn.close();
      return {
        saw: `${sent} calls, ${(dataBytes / MiB).toFixed(0)} MiB sent: ${counted(outcomes)}`,
        details: { calls: sent, dataBytes, outcomes: Object.fromEntries(outcomes) },
      };
    },
  },
  {
    name: 'many-streams',
    what: `one gRPC connection opens ${QUICK ? '10,000' : '50,000'} ModelInfer streams (HEADERS only, no END_STREAM)`,
    async run({ grpc }) {
      const streams = QUICK ? 10_000 : 50_000;
      const conn = await H2Conn.open(grpc);
      const headers = grpcRequestHeaders(MODEL_INFER);
      let opened = 0;
      while (opened < streams && !conn.closed) {
        const batch: Buffer[] = [];
        for (let i = 0; i < 1000 && opened < streams; i++, opened++) batch.push(frame(FRAME.headers, FLAG.endHeaders, 2 * opened + 1, headers));
        if (!conn.send(...batch)) await Promise.race([new Promise((done) => conn.socket.once('drain', done)), sleep(200)]);
      }
      // What the server makes of them, for 2 s more.
      await conn.until(() => conn.closed, 2000);
      const resets = new Map<string, number>();
      for (const code of conn.resets.values()) bump(resets, `RST ${h2Error(code)}`);
      const parts = [`${opened.toLocaleString('en-US')} sent`, counted(resets), conn.answered.size > 0 ? `HEADERS ×${conn.answered.size}` : ''];
      if (conn.goaway) parts.push(`GOAWAY ${h2Error(conn.goaway.code)} (last stream ${conn.goaway.lastStream})`);
      if (conn.closed) parts.push('closed by the server');
      conn.close();
      return {
        saw: parts.filter((p) => p !== '').join(', '),
        details: { sent: opened, resets: Object.fromEntries(resets), answered: conn.answered.size, goaway: conn.goaway, closedByServer: conn.closed },
      };
    },
  },
  {
    name: 'garbage-head',
    what: '11 bytes of a TLS ClientHello to the HTTP port',
    async run({ http }) {
      const socket = await open(http);
      const started = performance.now();
      const result = await new Promise<{ first: string; answerMs: number | undefined; closeMs: number | undefined }>((done) => {
        let text = '';
        let answerMs: number | undefined;
        const finish = (closeMs: number | undefined): void => done({ first: text.split('\r\n')[0] ?? '', answerMs, closeMs });
        const timer = setTimeout(() => finish(undefined), 15_000);
        socket.on('data', (chunk: Buffer) => {
          answerMs ??= performance.now() - started;
          text += chunk.toString('latin1');
        });
        socket.on('error', () => undefined);
        socket.once('close', () => {
          clearTimeout(timer);
          finish(performance.now() - started);
        });
        socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]));
      });
      socket.destroy();
      const answer = result.answerMs === undefined ? 'no answer' : `"${result.first}" after ${result.answerMs.toFixed(1)} ms`;
      const close = result.closeMs === undefined ? 'still open after 15 s' : `closed after ${result.closeMs.toFixed(1)} ms`;
      return { saw: `${answer}, ${close}`, details: result };
    },
  },
  {
    name: 'gzip-bomb',
    what: 'HTTP POST infer, Content-Encoding gzip of 64 MiB of zeros (64 KiB on the wire), default maxBodyBytes',
    async run({ http }) {
      const bomb = gzipSync(Buffer.alloc(64 * MiB));
      const request = Buffer.concat([
        Buffer.from(
          `POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: ${bomb.length}\r\n\r\n`,
        ),
        bomb,
      ]);
      const { counts, times } = await repeatFor(ATTACK_MS, async () => shortAnswer(await httpExchange(http, request, 60_000)));
      return { saw: `${counted(counts)}; ${times.length} sent, each ${msRange(times)}`, details: { answers: Object.fromEntries(counts), times } };
    },
  },
  {
    name: 'shape-overflow',
    what: 'inference with shape [4294967296,4294967296] and zero bytes, over HTTP and gRPC',
    async run({ http, grpc }) {
      const header = JSON.stringify({
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: SHAPE_OVERFLOW, parameters: { binary_data_size: 0 } }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
      });
      const overHttp = await httpExchange(http, httpInfer(header), 30_000).then(shortAnswer, (error: Error) => `error: ${error.message}`);
      const overGrpc = await grpcCall(grpc, MODEL_INFER, grpcMessage(inferMessage(SHAPE_OVERFLOW, Buffer.alloc(0)))).then(
        (a) => `grpc-status ${a.status} "${a.message}"${a.bytes > 0 ? `, ${a.bytes} bytes` : ''}`,
        (error: Error) => `error: ${error.message}`,
      );
      return { saw: `HTTP ${overHttp}; gRPC ${overGrpc}`, details: { http: overHttp, grpc: overGrpc } };
    },
  },
  grpcMessageCase(
    'grpc-empty-raw-contents',
    'gRPC ModelInfer of 16 MiB: 8 M empty raw_input_contents (2 bytes each)',
    () => repeatedFieldMessage(Buffer.from([0x3a, 0x00]), 16 * MiB),
  ),
  grpcMessageCase(
    'grpc-empty-inputs',
    'gRPC ModelInfer of 16 MiB: 8 M empty inputs (2 bytes each)',
    () => repeatedFieldMessage(Buffer.from([0x2a, 0x00]), 16 * MiB),
  ),
  grpcMessageCase('grpc-shape-dims', 'gRPC ModelInfer of 16 MiB: one input whose packed shape has 16 M dims of 1', () =>
    Buffer.concat([
      MODEL_NAME_FIELD,
      (() => {
        const input = Buffer.concat([Buffer.from([0x0a, 6, ...Buffer.from('INPUT0'), 0x12, 4, ...Buffer.from('FP32')]), packed(0x1a, Buffer.alloc(16 * MiB, 1))]);
        return packed(0x2a, input);
      })(),
    ]),
  ),
  grpcMessageCase('grpc-bool-contents', 'gRPC ModelInfer of 16 MiB: one BOOL input of shape [1] with 16 M packed bool_contents', () =>
    Buffer.concat([
      MODEL_NAME_FIELD,
      (() => {
        const contents = packed(0x0a, Buffer.alloc(16 * MiB, 1));
        const input = Buffer.concat([Buffer.from([0x0a, 6, ...Buffer.from('INPUT0'), 0x12, 4, ...Buffer.from('BOOL'), 0x1a, 1, 1]), packed(0x2a, contents)]);
        return packed(0x2a, input);
      })(),
    ]),
  ),
  jsonDataCase(8 * MiB),
];

// ---------------------------------------------------------------------------
// The runner.

interface CaseResult {
  case: string;
  what: string;
  rssBeforeMB: number;
  rssPeakMB: number;
  rssAfterMB: number;
  probe: MonitorReport;
  /** The server's JS thread: its event loop's worst delay during the case. */
  jsLoopMaxMs?: number;
  attackMs: number;
  saw: string;
  details?: Record<string, unknown>;
  serverAlive: boolean;
  error?: string;
}

const mb = (kb: number): number => Math.round(kb / 102.4) / 10;

async function runCase(start: () => Promise<Target>, attack: Case): Promise<CaseResult> {
  const target = await start();
  try {
    // Warm: the first inferences allocate what every later one reuses.
    for (let i = 0; i < 20; i++) await httpExchange(target.http, PROBE, 10_000);
    await sleep(500);
    const before = rssKb(target.pid);
    await target.jsLoopMaxMs(); // measured from here
    const monitor = startMonitor(target.http, target.pid);
    await sleep(100);
    const started = performance.now();
    let seen: Seen;
    let error: string | undefined;
    try {
      seen = await attack.run(target);
    } catch (e) {
      error = (e as Error).message;
      seen = { saw: `attack failed: ${error}` };
    }
    const attackMs = performance.now() - started;
    // The attacker has left (every case closes what it opened); the server has 2 s to give back.
    await sleep(2000);
    const after = rssKb(target.pid);
    const probe = await monitor.stop();
    const jsLoopMaxMs = target.child.exitCode === null ? await target.jsLoopMaxMs() : undefined;
    const alive =
      target.child.exitCode === null &&
      (await httpExchange(target.http, Buffer.from('GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n'), 5000).then(
        (a) => a.status === 200,
        () => false,
      ));
    if (!alive) seen.saw += ` — SERVER DOWN (${target.child.exitCode ?? target.child.signalCode ?? 'not answering'}): ${target.stderr().slice(-300)}`;
    return {
      case: attack.name,
      what: attack.what,
      rssBeforeMB: mb(before),
      rssPeakMB: mb(Math.max(before, probe.peakKb, after)),
      rssAfterMB: mb(after),
      probe,
      ...(jsLoopMaxMs === undefined ? {} : { jsLoopMaxMs }),
      attackMs: Math.round(attackMs),
      saw: seen.saw,
      ...(seen.details ? { details: seen.details } : {}),
      serverAlive: alive,
      ...(error ? { error } : {}),
    };
  } finally {
    await target.stop();
  }
}

function table(results: CaseResult[]): string {
  const rows = results.map((r) => {
    // A probe in flight when the case ended is only worth a word if it had waited long.
    const pending = r.probe.pendingMs > 100 ? ' (still waiting at the end)' : '';
    const probe = `${r.probe.worstMs.toFixed(1)}${pending}${r.probe.failed > 0 ? `, ${r.probe.failed} failed` : ''}`;
    const js = r.jsLoopMaxMs === undefined ? '–' : r.jsLoopMaxMs.toFixed(1);
    return `| ${r.case} | ${r.rssBeforeMB} | ${r.rssPeakMB} | ${r.rssAfterMB} | ${probe} | ${js} | ${r.saw.replaceAll('|', '\\|')} |`;
  });
  return [
    '| case | RSS before (MB) | peak (MB) | after 2 s (MB) | probe worst (ms) | JS thread held (ms) | the attacker saw |',
    '|---|--:|--:|--:|--:|--:|---|',
    ...rows,
  ].join('\n');
}

const targets = args.target ?? ['native', 'node', 'tritonserver'];
const chosen = args.case === undefined ? CASES : CASES.filter((c) => args.case?.some((name) => c.name.startsWith(name)));
const output: Record<string, unknown> = { quick: QUICK, cpus: cpus().length, started: new Date().toISOString(), targets: {} };

for (const name of targets) {
  let start: () => Promise<Target>;
  if (name === 'native' || name === 'node') start = () => startEngine(name);
  else if (name === 'tritonserver') {
    if (!existsSync(TRITONSERVER_BIN)) {
      console.log(`\n## tritonserver\n\nunavailable: no ${TRITONSERVER_BIN} (set TRITONSERVER_BIN and TRITON_BACKENDS)\n`);
      (output.targets as Record<string, unknown>)[name] = { unavailable: `no ${TRITONSERVER_BIN}` };
      continue;
    }
    start = startTritonserver;
  } else throw new Error(`unknown target ${name} (native, node or tritonserver)`);
  const loadBefore = loadavg();
  const results: CaseResult[] = [];
  for (const attack of chosen) {
    process.stderr.write(`${name}: ${attack.name}…\n`);
    results.push(await runCase(start, attack));
  }
  const loadAfter = loadavg();
  const load = `load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')} before, ${loadAfter.map((l) => l.toFixed(2)).join(' ')} after (${cpus().length} CPUs)`;
  console.log(`\n## ${name}${name === 'tritonserver' ? '' : ` engine (${process.env.TRITONSERVER_LIBRARY ?? 'test core'})`}\n\n${table(results)}\n\n${load}\n`);
  (output.targets as Record<string, unknown>)[name] = { load: { before: loadBefore, after: loadAfter }, results };
}

if (args.json) await writeFile(args.json, `${JSON.stringify(output, null, 2)}\n`);
