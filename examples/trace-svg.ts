// Traces one request through Triton and draws its timeline as SVG (stdout):
// one row per trace (the request, then each ensemble step), one bar per
// phase. docs/trace-ensemble.svg was made with it on a CPU build of Triton:
//
//   npx tsx examples/trace-svg.ts > docs/trace-ensemble.svg
//
// It serves an ensemble of two identity steps from a temporary repository
// (ensembles need real Triton; with the test core use a plain model:
// `npx tsx examples/trace-svg.ts identity_fp32`).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server, Tensor, writeModelRepository, type RequestTrace } from 'tritonserver-node';

const PHASES = [
  ['queue', 'QUEUE_START', 'COMPUTE_START', '#f2b134'],
  ['compute input', 'COMPUTE_START', 'COMPUTE_INPUT_END', '#6aa5d8'],
  ['compute infer', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', '#2f6db3'],
  ['compute output', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', '#8fbf5a'],
] as const;

function rows(trace: RequestTrace, depth = 0): Array<{ trace: RequestTrace; depth: number }> {
  return [{ trace, depth }, ...trace.children.flatMap((child) => rows(child, depth + 1))];
}

export function traceToSvg(root: RequestTrace): string {
  const all = rows(root);
  const times = all.flatMap(({ trace }) => trace.activities.map((activity) => activity.ns));
  const start = times.reduce((a, b) => (b < a ? b : a));
  const end = times.reduce((a, b) => (b > a ? b : a));
  const width = 720;
  const left = 170;
  const scale = (width - left - 20) / Number(end - start || 1n);
  const x = (ns: bigint) => left + Number(ns - start) * scale;
  const us = (ns: bigint) => `${(Number(ns) / 1000).toFixed(1)} µs`;
  const height = 40 + all.length * 34 + 30;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="13" font-weight="bold">One traced request (${us(end - start)})</text>`,
  ];
  all.forEach(({ trace, depth }, row) => {
    const y = 40 + row * 34;
    const at = (name: string) => trace.activities.find((activity) => activity.name === name)?.ns;
    out.push(`<text x="${10 + depth * 14}" y="${y + 14}">${trace.model} (trace ${trace.id})</text>`);
    const requestStart = at('REQUEST_START');
    const requestEnd = at('REQUEST_END');
    if (requestStart !== undefined && requestEnd !== undefined) {
      out.push(
        `<rect x="${x(requestStart).toFixed(1)}" y="${y}" width="${Math.max(1, x(requestEnd) - x(requestStart)).toFixed(1)}" height="20" fill="#e6e6e6" stroke="#999"/>`,
      );
    }
    for (const [label, from, to, color] of PHASES) {
      const a = at(from);
      const b = at(to);
      if (a === undefined || b === undefined) continue;
      out.push(
        `<rect x="${x(a).toFixed(1)}" y="${y + 3}" width="${Math.max(1, x(b) - x(a)).toFixed(1)}" height="14" fill="${color}"><title>${label}: ${us(b - a)}</title></rect>`,
      );
    }
    if (requestStart !== undefined && requestEnd !== undefined) {
      out.push(`<text x="${x(requestStart).toFixed(1)}" y="${y + 31}" fill="#555">${us(requestEnd - requestStart)} (REQUEST_START → REQUEST_END)</text>`);
    }
  });
  const legendY = height - 14;
  PHASES.forEach(([label, , , color], i) => {
    out.push(`<rect x="${left + i * 130}" y="${legendY - 9}" width="10" height="10" fill="${color}"/>`);
    out.push(`<text x="${left + i * 130 + 14}" y="${legendY}">${label}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

const modelName = process.argv[2] ?? 'ens';
const repository = await mkdtemp(join(tmpdir(), 'trace-svg-'));
try {
  const identity = {
    config: {
      backend: 'identity',
      max_batch_size: 8,
      input: [{ name: 'INPUT0', data_type: 'TYPE_FP32' as const, dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32' as const, dims: [-1] }],
    },
    files: { '1/.keep': '' },
  };
  const step = (input: string, output: string) => ({
    model_name: 'identity_fp32',
    model_version: -1,
    input_map: { INPUT0: input },
    output_map: { OUTPUT0: output },
  });
  await writeModelRepository(repository, {
    identity_fp32: identity,
    ...(modelName === 'ens'
      ? {
          ens: {
            config: {
              platform: 'ensemble',
              max_batch_size: 8,
              input: [{ name: 'IN', data_type: 'TYPE_FP32' as const, dims: [-1] }],
              output: [{ name: 'OUT', data_type: 'TYPE_FP32' as const, dims: [-1] }],
              ensemble_scheduling: { step: [step('IN', 'MID'), step('MID', 'OUT')] },
            },
            files: { '1/.keep': '' },
          },
        }
      : {}),
  });
  const server = await Server.start({ modelRepository: repository, modelControlMode: 'explicit', log: { info: false, warn: false } });
  try {
    await server.loadModel('identity_fp32');
    const model = await server.loadModel(modelName);
    const input = Tensor.from(new Float32Array([1, 2, 3, 4]), { shape: [1, 4] });
    const inputs: Record<string, Tensor> = modelName === 'ens' ? { IN: input } : { INPUT0: input };
    await model.infer({ inputs }); // warm up
    const { trace } = await model.infer({ inputs, trace: true });
    if (trace === undefined) throw new Error('no trace');
    process.stdout.write(traceToSvg(trace));
  } finally {
    await server.stop();
  }
} finally {
  await rm(repository, { recursive: true, force: true });
}
