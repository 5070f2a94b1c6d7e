/** Parses `Client.connect` targets: `grpc://`, `grpcs://`, `http://`, `https://`, `dns:///`. */
import { TritonError } from '../errors.js';

export type Protocol = 'grpc' | 'http';

/** One address to connect to. */
export interface HostPort {
  host: string;
  port: number;
}

/** What the targets name: a protocol, TLS or not, and fixed addresses or a DNS name to resolve. */
export interface ParsedTargets {
  protocol: Protocol;
  tls: boolean;
  /** Fixed addresses (one per target given). */
  addresses: HostPort[];
  /** A `dns:///name:port` target: every address the name resolves to. */
  dns: HostPort | undefined;
}

const DEFAULT_PORTS: Record<string, number> = { 'grpc:': 8001, 'grpcs:': 8001, 'http:': 80, 'https:': 443 };

function invalid(message: string): TritonError {
  return new TritonError('INVALID_ARG', message);
}

function parseOne(target: string, dnsProtocol: Protocol | undefined): { protocol: Protocol; tls: boolean; address: HostPort; dns: boolean } {
  if (typeof target !== 'string' || target === '') throw invalid(`a target must be a URL such as 'grpc://host:8001', got ${JSON.stringify(target)}`);
  if (target.startsWith('dns:')) {
    // dns:///name:port (the authority, a DNS server, is not supported).
    const match = /^dns:(?:\/\/\/)?([^/:]+|\[[^\]]+\])(?::(\d+))?$/.exec(target);
    if (match === null) throw invalid(`invalid target '${target}': expected dns:///name:port`);
    const protocol = dnsProtocol ?? 'grpc';
    const port = match[2] === undefined ? (protocol === 'grpc' ? 8001 : 8000) : Number(match[2]);
    return { protocol, tls: false, address: { host: match[1]!, port }, dns: true };
  }
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw invalid(`invalid target '${target}': expected grpc://host:port, http://host:port, https://host:port or dns:///name:port`);
  }
  const defaultPort = DEFAULT_PORTS[url.protocol];
  if (defaultPort === undefined) {
    throw invalid(`unsupported scheme '${url.protocol}' in target '${target}': use grpc://, grpcs://, http://, https:// or dns:///`);
  }
  if (url.hostname === '') throw invalid(`invalid target '${target}': no host`);
  if (url.pathname !== '/' && url.pathname !== '' || url.search !== '' || url.hash !== '') {
    throw invalid(`invalid target '${target}': a path, query or fragment is not supported`);
  }
  if (url.username !== '' || url.password !== '') {
    throw invalid(`invalid target '${target}': put credentials in the 'headers' option, not in the URL`);
  }
  const protocol: Protocol = url.protocol.startsWith('grpc') ? 'grpc' : 'http';
  const tls = url.protocol === 'https:' || url.protocol === 'grpcs:';
  // new URL leaves IPv6 hosts in brackets.
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port === '' ? defaultPort : Number(url.port);
  return { protocol, tls, address: { host, port }, dns: false };
}

/** Parses one target or a list; every target of a list must use the same protocol and TLS. */
export function parseTargets(target: string | readonly string[], dnsProtocol: Protocol | undefined): ParsedTargets {
  const list = typeof target === 'string' ? [target] : target;
  if (!Array.isArray(list) || list.length === 0) throw invalid('Client.connect needs a target URL or a non-empty list of them');
  const parsed = list.map((one) => parseOne(one, dnsProtocol));
  const first = parsed[0]!;
  for (const one of parsed) {
    if (one.protocol !== first.protocol || one.tls !== first.tls) {
      throw invalid(`the targets mix protocols (${list.join(', ')}): give one client per protocol`);
    }
  }
  const dns = parsed.filter((one) => one.dns);
  if (dns.length > 0 && parsed.length > 1) throw invalid('a dns:/// target stands alone, not in a list');
  return {
    protocol: first.protocol,
    tls: first.tls,
    addresses: dns.length > 0 ? [] : parsed.map((one) => one.address),
    dns: dns[0]?.address,
  };
}

/** `host:port` with IPv6 hosts in brackets. */
export function authority({ host, port }: HostPort): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
