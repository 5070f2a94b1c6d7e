/**
 * A throughput-against-p99-latency chart as a standalone SVG, one series per
 * side (binding, native), one point per concurrency level. Hand-written:
 * two polylines and their axes do not need a plotting library.
 */

export interface ChartPoint {
  concurrency: number;
  throughput: number;
  p99Us: number;
}

export interface ChartSeries {
  name: string;
  color: string;
  points: ChartPoint[];
}

const WIDTH = 720;
const HEIGHT = 440;
const MARGIN = { left: 80, right: 24, top: 40, bottom: 56 };

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** About five round ticks from 0 to at least max (1, 2 or 5 × 10^k apart). */
function ticks(max: number): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / 5;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) ?? 10 * power;
  const list: number[] = [];
  for (let v = 0; v < max + step / 2; v += step) list.push(v);
  if (list[list.length - 1]! < max) list.push(list[list.length - 1]! + step);
  return list;
}

function label(value: number): string {
  if (value >= 1e6) return `${+(value / 1e6).toFixed(1)}M`;
  if (value >= 1e3) return `${+(value / 1e3).toFixed(1)}k`;
  return `${+value.toFixed(1)}`;
}

export function renderChart(title: string, series: ChartSeries[]): string {
  const all = series.flatMap((s) => s.points);
  const xTicks = ticks(Math.max(0, ...all.map((p) => p.throughput)));
  // Latencies of the two sides differ by orders of magnitude: log scale, decades.
  const latencies = all.length > 0 ? all.map((p) => Math.max(0.1, p.p99Us)) : [1];
  const yLo = Math.floor(Math.log10(Math.min(...latencies)));
  const yHi = Math.max(yLo + 1, Math.ceil(Math.log10(Math.max(...latencies))));
  const yTicks = Array.from({ length: yHi - yLo + 1 }, (_, i) => 10 ** (yLo + i));
  const xMax = xTicks[xTicks.length - 1]!;
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (v: number): number => MARGIN.left + (v / xMax) * plotW;
  const y = (v: number): number =>
    MARGIN.top + plotH - ((Math.log10(Math.max(0.1, v)) - yLo) / (yHi - yLo)) * plotH;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${WIDTH / 2}" y="22" text-anchor="middle" font-size="14">${escape(title)}</text>`,
  );
  for (const t of xTicks) {
    out.push(
      `<line x1="${x(t)}" y1="${MARGIN.top}" x2="${x(t)}" y2="${MARGIN.top + plotH}" stroke="#eee"/>`,
      `<text x="${x(t)}" y="${MARGIN.top + plotH + 18}" text-anchor="middle">${label(t)}</text>`,
    );
  }
  for (const t of yTicks) {
    out.push(
      `<line x1="${MARGIN.left}" y1="${y(t)}" x2="${MARGIN.left + plotW}" y2="${y(t)}" stroke="#eee"/>`,
      `<text x="${MARGIN.left - 8}" y="${y(t) + 4}" text-anchor="end">${label(t)}</text>`,
    );
  }
  out.push(
    `<line x1="${MARGIN.left}" y1="${MARGIN.top + plotH}" x2="${MARGIN.left + plotW}" y2="${MARGIN.top + plotH}" stroke="black"/>`,
    `<line x1="${MARGIN.left}" y1="${MARGIN.top}" x2="${MARGIN.left}" y2="${MARGIN.top + plotH}" stroke="black"/>`,
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 14}" text-anchor="middle">throughput (requests/s)</text>`,
    `<text transform="translate(18 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">p99 latency (µs, log scale)</text>`,
  );
  series.forEach((s, i) => {
    const points = [...s.points].sort((a, b) => a.concurrency - b.concurrency);
    if (points.length > 1) {
      const path = points.map((p) => `${x(p.throughput).toFixed(1)},${y(p.p99Us).toFixed(1)}`).join(' ');
      out.push(`<polyline points="${path}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
    }
    for (const p of points) {
      out.push(
        `<circle cx="${x(p.throughput).toFixed(1)}" cy="${y(p.p99Us).toFixed(1)}" r="3.5" fill="${s.color}"><title>${escape(
          `${s.name} C=${p.concurrency}: ${Math.round(p.throughput)} req/s, p99 ${p.p99Us.toFixed(1)} µs`,
        )}</title></circle>`,
        `<text x="${(x(p.throughput) + 6).toFixed(1)}" y="${(y(p.p99Us) - 6).toFixed(1)}" fill="${s.color}" font-size="10">C=${p.concurrency}</text>`,
      );
    }
    const ly = MARGIN.top + 12 + i * 18;
    const lx = MARGIN.left + plotW - 150;
    out.push(
      `<rect x="${lx}" y="${ly - 9}" width="12" height="12" fill="${s.color}"/>`,
      `<text x="${lx + 18}" y="${ly + 1}">${escape(s.name)}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
