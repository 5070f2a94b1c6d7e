/**
 * The KServe v2 gRPC messages from this package's .proto files, loaded with
 * @grpc/proto-loader (an optional peer dependency, imported only when gRPC
 * is used). Shared by the gRPC front end and the remote client; both speak
 * HTTP/2 themselves (node:http2).
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TritonError } from '../errors.js';

/** Where the .proto files are: beside this module (lib/kserve/proto in the source, dist/proto when bundled). */
function protoDirectory(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [join(here, 'proto'), join(here, 'kserve', 'proto'), join(here, '..', 'kserve', 'proto'), join(here, '..', 'lib', 'kserve', 'proto')]) {
    if (existsSync(join(candidate, 'inference.proto'))) return candidate;
  }
  throw new TritonError('INTERNAL', `the KServe .proto files were not found beside ${here}`);
}

/** One method's message codecs, as proto-loader makes them (protobufjs underneath). */
export interface MessageCodec {
  requestSerialize(value: object): Buffer;
  requestDeserialize(bytes: Buffer): unknown;
  responseSerialize(value: object): Buffer;
  responseDeserialize(bytes: Buffer): unknown;
}

/** The package's .proto files, fields as written (snake_case). */
function loadDefinition(protoLoader: typeof import('@grpc/proto-loader')): import('@grpc/proto-loader').PackageDefinition {
  return protoLoader.loadSync('inference.proto', {
    includeDirs: [protoDirectory()],
    keepCase: true,
    // 64-bit integers arrive as decimal strings: int64_contents stay exact.
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
}

let messages: Promise<Record<string, MessageCodec>> | undefined;

/**
 * The codecs of `inference.GRPCInferenceService`'s messages, by method name,
 * from @grpc/proto-loader alone (the remote client speaks HTTP/2 itself).
 */
export function loadInferenceMessages(what: string): Promise<Record<string, MessageCodec>> {
  messages ??= (async () => {
    let protoLoader: typeof import('@grpc/proto-loader');
    try {
      protoLoader = await import('@grpc/proto-loader');
    } catch (error) {
      messages = undefined;
      throw new TritonError('UNAVAILABLE', `${what} needs the optional peer dependency @grpc/proto-loader: npm install @grpc/proto-loader`, { cause: error });
    }
    return loadDefinition(protoLoader)['inference.GRPCInferenceService'] as unknown as Record<string, MessageCodec>;
  })();
  return messages;
}
