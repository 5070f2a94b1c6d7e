/**
 * TLS for the native transports: whether the addon can do it here (it uses
 * the OpenSSL Node exports; Electron's BoringSSL exports none), and the
 * settings it takes, with Node's own defaults: the CAs of
 * `tls.rootCertificates` and NODE_EXTRA_CA_CERTS where no `tls.ca` is given,
 * the target's host as the name its certificate must carry.
 */
import { addonExport } from '../addon-file.js';
import { TritonError } from '../errors.js';
import { nodeDefaultCa, pemText } from '../kserve/native-tls.js';
import type { ClientTlsOptions } from './options.js';

export function nativeTlsAvailable(): boolean {
  return addonExport<boolean>('nativeTls', 'the addon has no native TLS') === true;
}

/** Whether the native transports can compress here (Node exports its zlib to addons). */
export function nativeCompressionAvailable(): boolean {
  return addonExport<boolean>('nativeCompression', 'the addon has no native compression') === true;
}

function text(pem: string | Uint8Array | undefined): string {
  return pemText(pem) ?? '';
}

/** The channel's TLS settings, [ca, cert, key, name]; `name`: the name or address the server's certificate must carry. */
export function nativeTlsSettings(tls: ClientTlsOptions | undefined, name: string): [string, string, string, string] {
  return [tls?.ca === undefined ? nodeDefaultCa() : text(tls.ca), text(tls?.cert), text(tls?.key), tls?.servername ?? name];
}

/** A channel made with settings that do not load (a PEM that is not one): the caller's to fix. */
export function tlsSettingsError(error: unknown): TritonError {
  return new TritonError('INVALID_ARG', `tls: ${(error as Error).message}`, { cause: error });
}
