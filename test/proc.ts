/** What /proc says about processes and threads, for the lifetime tests (no vitest here: fixtures use it too). */
import { readFileSync, readdirSync } from 'node:fs';

export interface ProcessInfo {
  pid: number;
  cmdline: string;
}

/** Child processes of `parent` whose command line contains `match`. */
export function childProcesses(parent: number, match: string): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
      if (ppid === parent && cmdline.includes(match)) found.push({ pid: Number(entry), cmdline });
    } catch {
      // the process ended meanwhile
    }
  }
  return found;
}

/** Whether a process exists (and is not a zombie). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

export function threadCount(): number {
  return readdirSync('/proc/self/task').length;
}

export function openFileCount(): number {
  return readdirSync('/proc/self/fd').length;
}

/** The shared-memory regions a Python stub's command line names (real Triton's and the test core's). */
export function stubRegions(cmdline: string): string[] {
  return [...cmdline.matchAll(/triton_python_backend_shm_region_[^\s/]+/g)].map((m) => `/dev/shm/${m[0]}`);
}
