/**
 * TLS for the native transports: whether the addon can do it here (it uses
 * the OpenSSL Node exports; Electron's BoringSSL exports none), and the
 * settings it takes, with Node's own defaults: the CAs of
 * `tls.rootCertificates` and NODE_EXTRA_CA_CERTS where no `tls.ca` is given,
 * the target's host as the name its certificate must carry.
 */
import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { addonExport } from '../addon-file.js';
import { TritonError } from '../errors.js';
import type { ClientTlsOptions } from './options.js';

export function nativeTlsAvailable(): boolean {
  return addonExport<boolean>('clientTls', 'the addon has no native TLS') === true;
}

let defaultCa: string | undefined;

/** Node's default trust: its bundled roots, and the file NODE_EXTRA_CA_CERTS names. */
function nodeCa(): string {
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

function text(pem: string | Uint8Array | undefined): string {
  if (pem === undefined) return '';
  return typeof pem === 'string' ? pem : Buffer.from(pem.buffer, pem.byteOffset, pem.byteLength).toString('utf8');
}

/** The channel's TLS settings, [ca, cert, key, name]; `name`: the name or address the server's certificate must carry. */
export function nativeTlsSettings(tls: ClientTlsOptions | undefined, name: string): [string, string, string, string] {
  return [tls?.ca === undefined ? nodeCa() : text(tls.ca), text(tls?.cert), text(tls?.key), tls?.servername ?? name];
}

/** A channel made with settings that do not load (a PEM that is not one): the caller's to fix. */
export function tlsSettingsError(error: unknown): TritonError {
  return new TritonError('INVALID_ARG', `tls: ${(error as Error).message}`, { cause: error });
}
