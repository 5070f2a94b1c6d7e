/**
 * TLS in the native engines (native/core/tls-session.cc, on the engine's
 * thread): the part of Node's TLS server options they serve (key, cert with
 * its chain, ca, passphrase, requestCert, rejectUnauthorized) as PEM text.
 * Options past those (pfx, ciphers, SNICallback, …) are served by the `node`
 * engine, which is then the default. Node's default trust lives here too,
 * shared with the client's native transports.
 */
import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { TritonError } from '../errors.js';
import type { NativeServerTls } from '../native.js';

let defaultCa: string | undefined;

/** Node's default trust: its bundled roots, and the file NODE_EXTRA_CA_CERTS names. */
export function nodeDefaultCa(): string {
  if (defaultCa === undefined) {
    let extra = '';
    const file = process.env.NODE_EXTRA_CA_CERTS;
    if (file) {
      try {
        extra = readFileSync(file, 'utf8');
      } catch {
        // Node itself only warns about an unreadable file.
      }
    }
    defaultCa = [...rootCertificates, extra].join('\n');
  }
  return defaultCa;
}

/** PEM given as a string or bytes, as text; undefined for anything else. */
export function pemText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8');
  return undefined;
}

const SERVED = ['key', 'cert', 'ca', 'passphrase', 'requestCert', 'rejectUnauthorized'];

/**
 * The native engines' settings for Node's TLS server options, or why they
 * cannot serve them (a sentence naming the option).
 */
export function nativeServerTls(options: Record<string, unknown>): NativeServerTls | string {
  const why = (what: string): string => `the native engine's TLS takes ${SERVED.join(', ')} as PEM text; ${what} (engine: 'node' serves every option of Node's)`;
  for (const [name, value] of Object.entries(options)) {
    if (value !== undefined && value !== null && !SERVED.includes(name)) return why(`'${name}' is Node's alone`);
  }
  // Node takes one of each, or a list: for the key and certificate, one per key type.
  const one = (name: 'key' | 'cert'): string | undefined => {
    const value = options[name];
    if (value === undefined || value === null) return '';
    return pemText(Array.isArray(value) && value.length === 1 ? value[0] : value);
  };
  const key = one('key');
  const cert = one('cert');
  if (key === undefined || cert === undefined) return why('one key and one certificate, each a string or bytes');
  let ca: string | undefined = '';
  if (options.ca !== undefined && options.ca !== null) {
    const list = (Array.isArray(options.ca) ? options.ca : [options.ca]).map(pemText);
    ca = list.includes(undefined) ? undefined : list.join('\n');
  }
  if (ca === undefined) return why('ca as a string, bytes or a list of them');
  const passphrase = options.passphrase ?? '';
  if (typeof passphrase !== 'string') return why('passphrase as a string');
  const requestCert = options.requestCert === true;
  return {
    key,
    cert,
    passphrase,
    // Node checks clients' certificates against its own CAs where no ca is given.
    ca: requestCert && ca === '' ? nodeDefaultCa() : ca,
    requestCert,
    rejectUnauthorized: options.rejectUnauthorized !== false,
  };
}

/**
 * The engine of a listener and, for the native one, its TLS settings: the
 * one asked for, else `native` where this runtime has it (`here.engine`;
 * gRPC needs the nghttp2 Node exports) unless the TLS options are Node's
 * alone or the addon has no OpenSSL here (`here.tls`).
 */
export function engineFor(
  asked: 'native' | 'node' | undefined,
  tls: Record<string, unknown> | undefined,
  here: { engine: boolean; tls: boolean },
): { engine: 'native' | 'node'; tls?: NativeServerTls } {
  if (asked === 'node' || (asked === undefined && !here.engine)) return { engine: 'node' };
  if (tls === undefined) return { engine: 'native' };
  const settings = nativeServerTls(tls);
  if (typeof settings === 'string') {
    if (asked === 'native') throw new TritonError('INVALID_ARG', settings);
    return { engine: 'node' };
  }
  // Asked for without OpenSSL here, the addon says so (UNSUPPORTED).
  if (asked === undefined && !here.tls) return { engine: 'node' };
  return { engine: 'native', tls: settings };
}
