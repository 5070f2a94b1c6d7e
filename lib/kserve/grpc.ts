/**
 * KServe v2 gRPC (`inference.GRPCInferenceService`) over the public
 * Server/Model API, with @grpc/grpc-js and this package's own .proto files.
 * Both are optional peer dependencies, imported only when gRPC is asked for.
 */
import { Buffer } from 'node:buffer';
import type * as GrpcJs from '@grpc/grpc-js';
import { TritonError, type TritonErrorCode } from '../errors.js';
import type { InferenceRequest } from '../inference.js';
import type { Server } from '../server.js';
import { encodeBytes, type DataType, type TensorInit } from '../tensor.js';
import {
  checkDatatype,
  checkShape,
  requestFromParts,
  tensorBytes,
  tensorFromBytes,
  tensorFromJson,
  type DecodedRequest,
  type OutputRequest,
  type ParameterValue,
  type ResponseData,
} from './codec.js';
import { loadOptions } from './http.js';
import type { ResolvedProtocolOptions } from './options.js';
import { classify } from '../classification.js';
import { loadGrpcService } from './proto.js';
import { bigintsAsStrings, Tracker, tritonErrorCode } from './shared.js';
import type { SharedMemoryInput } from '../shared-memory.js';
import {
  checkSharedMemoryOutput,
  grpcCudaSharedMemoryRegister,
  grpcCudaSharedMemoryStatus,
  grpcCudaSharedMemoryUnregister,
  grpcSystemSharedMemoryRegister,
  grpcSystemSharedMemoryStatus,
  grpcSystemSharedMemoryUnregister,
  SHARED_MEMORY_EXTENSION,
  sharedMemoryInput,
  sharedMemoryParameters,
} from './shared-memory.js';

/** The gRPC status code (numeric) Triton's gRPC front end uses for each error code. */
export function grpcStatus(code: TritonErrorCode): number {
  // Values of grpc.status: UNKNOWN 2, INVALID_ARGUMENT 3, NOT_FOUND 5, ALREADY_EXISTS 6,
  // UNIMPLEMENTED 12, INTERNAL 13, UNAVAILABLE 14, CANCELLED 1.
  const table: Record<TritonErrorCode, number> = {
    UNKNOWN: 2,
    INTERNAL: 13,
    NOT_FOUND: 5,
    INVALID_ARG: 3,
    UNAVAILABLE: 14,
    UNSUPPORTED: 12,
    ALREADY_EXISTS: 6,
    CANCELLED: 1,
  };
  return table[code];
}

const PERMISSION_DENIED = 7;

export interface GrpcFrontend {
  server: GrpcJs.Server;
  host: string;
  port: number;
  /** Requests being handled now. */
  readonly inFlight: number;
  close(): Promise<void>;
}

export interface GrpcListenOptions {
  port: number;
  host: string;
  credentials?: unknown;
  maxReceiveMessageBytes?: number | undefined;
}

/** `InferParameter` as proto-loader gives it (oneofs: true). */
interface WireParameter {
  parameter_choice?: string;
  bool_param?: boolean;
  int64_param?: string;
  string_param?: string;
  double_param?: number;
  uint64_param?: string;
}

function fromWireParameters(parameters: Record<string, WireParameter> | undefined): Record<string, ParameterValue> {
  const out: Record<string, ParameterValue> = {};
  for (const [key, value] of Object.entries(parameters ?? {})) {
    const choice = value.parameter_choice as keyof WireParameter | undefined;
    if (choice === undefined) continue;
    const v = value[choice];
    out[key] = choice === 'int64_param' || choice === 'uint64_param' ? Number(v) : (v as ParameterValue);
  }
  return out;
}

function toWireParameters(parameters: Record<string, ParameterValue>): Record<string, WireParameter> {
  const out: Record<string, WireParameter> = {};
  for (const [key, value] of Object.entries(parameters)) {
    if (typeof value === 'boolean') out[key] = { bool_param: value };
    else if (typeof value === 'string') out[key] = { string_param: value };
    else if (Number.isInteger(value)) out[key] = { int64_param: String(value) };
    else out[key] = { double_param: value };
  }
  return out;
}

interface WireInput {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Record<string, WireParameter>;
  contents?: Record<string, unknown[]> | null;
}

interface WireRequest {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: Record<string, WireParameter>;
  inputs: WireInput[];
  outputs: Array<{ name: string; parameters?: Record<string, WireParameter> }>;
  raw_input_contents: Buffer[];
}

const CONTENTS_FIELD: Readonly<Record<DataType, string | undefined>> = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  FP16: undefined,
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
  BF16: undefined,
};

function parseVersion(text: string): number {
  if (text === '' || text === undefined) return -1;
  if (!/^\d+$/.test(text)) throw new TritonError('INVALID_ARG', `failed to parse model version '${text}'`);
  return Number(text);
}

/** Decodes a `ModelInferRequest`: raw contents as views over the received message. */
export function decodeGrpcInferRequest(message: WireRequest): DecodedRequest & { emptyFinal: boolean } {
  const raw = message.raw_input_contents ?? [];
  // Inputs in shared memory have no raw contents: the others take them in order (as Triton).
  const inShm = message.inputs.filter((input) => input.parameters?.shared_memory_region !== undefined).length;
  let rawIndex = 0;
  if (raw.length > 0 && raw.length !== message.inputs.length - inShm) {
    throw new TritonError(
      'INVALID_ARG',
      `expected ${message.inputs.length} raw_input_contents, one per input, got ${raw.length}`,
    );
  }
  const inputs: Record<string, TensorInit | SharedMemoryInput> = {};
  message.inputs.forEach((input) => {
    const what = `input '${input.name}'`;
    const datatype = checkDatatype(input.datatype, what);
    const shape = checkShape(input.shape.map(Number), what);
    const parameters = fromWireParameters(input.parameters);
    const range = sharedMemoryParameters(parameters, input.name);
    if (range !== undefined) {
      if (input.contents !== undefined && input.contents !== null && Object.values(input.contents).some((v) => v.length > 0)) {
        throw new TritonError(
          'INVALID_ARG',
          `unexpected 'content' provided when using shared memory for input tensor '${input.name}' for model '${message.model_name}'`,
        );
      }
      inputs[input.name] = sharedMemoryInput(datatype, shape, range);
      return;
    }
    const bytes = raw[rawIndex++];
    if (bytes !== undefined) {
      inputs[input.name] = tensorFromBytes(input.name, datatype, shape, bytes);
      return;
    }
    const field = CONTENTS_FIELD[datatype];
    const values = field === undefined ? undefined : input.contents?.[field];
    if (values === undefined || (values.length === 0 && shape.reduce((a, b) => a * b, 1) !== 0)) {
      throw new TritonError('INVALID_ARG', `${what} has no data: give raw_input_contents or contents.${field ?? '(raw only for ' + datatype + ')'}`);
    }
    if (datatype === 'BYTES') {
      inputs[input.name] = { datatype, shape, data: values as Buffer[] };
    } else if (datatype === 'INT64' || datatype === 'UINT64') {
      const count = shape.reduce((a, b) => a * b, 1);
      if (values.length !== count) {
        throw new TritonError('INVALID_ARG', `${what}: expected ${count} elements for shape [${shape.join(',')}], got ${values.length}`);
      }
      const big = (values as string[]).map((v) => BigInt(v));
      inputs[input.name] = { datatype, shape, data: datatype === 'INT64' ? BigInt64Array.from(big) : BigUint64Array.from(big) };
    } else {
      inputs[input.name] = tensorFromJson(input.name, datatype, shape, values);
    }
  });
  const parameters = fromWireParameters(message.parameters);
  const emptyFinal = parameters.triton_enable_empty_final_response;
  if (emptyFinal !== undefined && typeof emptyFinal !== 'boolean') {
    throw new TritonError('INVALID_ARG', "invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.");
  }
  delete parameters.triton_enable_empty_final_response;
  const outputs: OutputRequest[] | undefined =
    message.outputs.length === 0
      ? undefined
      : message.outputs.map((output) => {
          const p = fromWireParameters(output.parameters);
          const k = p.classification;
          if (k !== undefined && !(Number.isInteger(k) && (k as number) > 0)) {
            throw new TritonError('INVALID_ARG', `'classification' of output '${output.name}' must be a positive integer`);
          }
          checkSharedMemoryOutput(p);
          const sharedMemory = sharedMemoryParameters(p, output.name);
          return { name: output.name, binary: true, classification: k as number | undefined, sharedMemory };
        });
  return { ...requestFromParts(message.id, parameters, inputs, outputs), emptyFinal: emptyFinal === true };
}

/** Encodes a response as a `ModelInferResponse` with raw_output_contents. */
export function encodeGrpcInferResponse(
  response: ResponseData,
  decoded: DecodedRequest,
  batched: boolean,
  extra: Record<string, ParameterValue> = {},
): Record<string, unknown> {
  const requested = new Map((decoded.outputs ?? []).map((output) => [output.name, output]));
  const outputs: Array<Record<string, unknown>> = [];
  const raw: Uint8Array[] = [];
  for (const tensor of Object.values(response.outputs)) {
    const k = requested.get(tensor.name)?.classification;
    if (k !== undefined) {
      const classes = classify(tensor, k, batched);
      outputs.push({ name: tensor.name, datatype: 'BYTES', shape: classes.shape });
      raw.push(encodeBytes(classes.strings));
    } else {
      outputs.push({ name: tensor.name, datatype: tensor.datatype, shape: tensor.shape });
      raw.push(tensorBytes(tensor));
    }
  }
  // Written into shared memory: name, datatype, shape and empty contents (as Triton).
  for (const output of Object.values(response.sharedMemoryOutputs ?? {})) {
    outputs.push({ name: output.name, datatype: output.datatype, shape: output.shape });
    raw.push(new Uint8Array(0));
  }
  return {
    model_name: response.model.name,
    model_version: String(response.model.version),
    id: response.id,
    parameters: toWireParameters({ ...response.parameters, ...extra }),
    outputs,
    raw_output_contents: raw,
  };
}

type Callback = (error: GrpcJs.ServiceError | null, value?: unknown) => void;

function serviceError(grpc: typeof GrpcJs, error: unknown): GrpcJs.ServiceError {
  const metadata = new grpc.Metadata();
  const code = tritonErrorCode(error);
  if (code !== undefined) {
    const message = (error as Error).message;
    return Object.assign(new Error(message), { code: grpcStatus(code), details: message, metadata });
  }
  const message = error instanceof Error ? error.message : String(error);
  return Object.assign(new Error(message), { code: grpc.status.INTERNAL, details: message, metadata });
}

/** Starts the gRPC listener. */
export async function startGrpc(
  server: Server,
  options: ResolvedProtocolOptions,
  listen: GrpcListenOptions,
): Promise<GrpcFrontend> {
  const { grpc, service } = await loadGrpcService('serving KServe gRPC');
  const limit = listen.maxReceiveMessageBytes ?? options.maxBodyBytes;
  const grpcServer = new grpc.Server({
    'grpc.max_receive_message_length': limit,
    'grpc.max_send_message_length': -1,
  });
  const tracker = new Tracker();
  /** Ends each open ModelStreamInfer stream (once its requests are done). */
  const streams = new Set<() => void>();

  const guard = async (call: GrpcJs.ServerUnaryCall<unknown, unknown> | GrpcJs.ServerDuplexStream<unknown, unknown>, method: string): Promise<void> => {
    if (tracker.closing) throw new TritonError('UNAVAILABLE', 'the server is shutting down');
    const authorize = options.authorize;
    if (authorize === undefined) return;
    let allowed = false;
    try {
      allowed = await authorize({
        protocol: 'grpc',
        method,
        path: `/inference.GRPCInferenceService/${method}`,
        headers: call.metadata.getMap() as Record<string, string>,
      });
    } catch {
      allowed = false;
    }
    if (!allowed) {
      throw Object.assign(new Error('the request was not authorized'), { grpcCode: PERMISSION_DENIED });
    }
  };

  const unary = <Req>(method: string, run: (request: Req, call: GrpcJs.ServerUnaryCall<Req, unknown>) => Promise<unknown>) =>
    (call: GrpcJs.ServerUnaryCall<Req, unknown>, callback: Callback): void => {
      const done = tracker.begin();
      guard(call as GrpcJs.ServerUnaryCall<unknown, unknown>, method)
        .then(() => run(call.request, call))
        .then(
          (value) => callback(null, value),
          (error: unknown) => {
            const code = (error as { grpcCode?: number }).grpcCode;
            if (code !== undefined) {
              const message = (error as Error).message;
              callback(Object.assign(new Error(message), { code, details: message, metadata: new grpc.Metadata() }));
            } else {
              callback(serviceError(grpc, error));
            }
          },
        )
        .finally(done);
    };

  const callSignal = (call: GrpcJs.ServerUnaryCall<unknown, unknown> | GrpcJs.ServerDuplexStream<unknown, unknown>): AbortSignal => {
    const controller = new AbortController();
    call.once('cancelled', () => controller.abort(new Error('the client cancelled the call')));
    return controller.signal;
  };

  const withTimeout = (request: InferenceRequest): InferenceRequest => {
    const cap = options.inferTimeoutMs;
    if (cap !== undefined && (request.timeoutMs === undefined || request.timeoutMs > cap)) request.timeoutMs = cap;
    return request;
  };

  const isBatched = async (name: string, version: number, decoded: DecodedRequest): Promise<boolean> => {
    if (!(decoded.outputs ?? []).some((output) => output.classification !== undefined)) return false;
    return ((await server.model(name, version).config()).max_batch_size ?? 0) > 0;
  };

  const requireRepositoryControl = (): void => {
    if (!options.repositoryControl) {
      throw Object.assign(new Error('This API is restricted: repository control is disabled on this server (repositoryControl: false)'), {
        grpcCode: PERMISSION_DENIED,
      });
    }
  };

  const handlers: GrpcJs.UntypedServiceImplementation = {
    ServerLive: unary('ServerLive', async () => ({ live: await server.live() })),
    ServerReady: unary('ServerReady', async () => ({ ready: await server.ready() })),
    ModelReady: unary<{ name: string; version: string }>('ModelReady', async (request) => ({
      ready: await server.model(request.name, parseVersion(request.version)).ready(),
    })),
    ServerMetadata: unary('ServerMetadata', async () => {
      const metadata = await server.metadata();
      return {
        ...metadata,
        extensions: [
          ...metadata.extensions.filter((name) => !['system_shared_memory', 'cuda_shared_memory', 'logging'].includes(name)),
          SHARED_MEMORY_EXTENSION,
        ],
      };
    }),
    ModelMetadata: unary<{ name: string; version: string }>('ModelMetadata', (request) =>
      server.model(request.name, parseVersion(request.version)).metadata(),
    ),
    ModelConfig: unary<{ name: string; version: string }>('ModelConfig', async (request) => ({
      config: await server.model(request.name, parseVersion(request.version)).config(),
    })),
    ModelStatistics: unary<{ name: string; version: string }>('ModelStatistics', async (request) => {
      if (request.name === '') {
        const ready = await server.modelIndex({ readyOnly: true });
        const names = [...new Set(ready.map((entry) => entry.name))];
        const stats = await Promise.all(names.map((name) => server.model(name).statistics()));
        return { model_stats: bigintsAsStrings(stats.flat()) };
      }
      return { model_stats: bigintsAsStrings(await server.model(request.name, parseVersion(request.version)).statistics()) };
    }),
    RepositoryIndex: unary<{ repository_name: string; ready: boolean }>('RepositoryIndex', async (request) => {
      requireRepositoryControl();
      if (request.repository_name !== '') throw new TritonError('UNSUPPORTED', "'repository_name' specification is not supported");
      return { models: await server.modelIndex({ readyOnly: request.ready }) };
    }),
    RepositoryModelLoad: unary<{ repository_name: string; model_name: string; parameters: Record<string, WireParameter & { bytes_param?: Buffer }> }>(
      'RepositoryModelLoad',
      async (request) => {
        requireRepositoryControl();
        if (request.repository_name !== '') throw new TritonError('UNSUPPORTED', "'repository_name' specification is not supported");
        const entries = Object.entries(request.parameters ?? {}).map(([key, value]): [string, unknown] => {
          const choice = value.parameter_choice as keyof typeof value | undefined;
          const v = choice === undefined ? undefined : value[choice];
          // gRPC carries file contents as bytes_param; HTTP as base64 text.
          return [key, key.startsWith('file:') && typeof v === 'string' ? Buffer.from(v) : v];
        });
        await server.loadModel(request.model_name, loadOptions(request.model_name, entries));
        return {};
      },
    ),
    SystemSharedMemoryStatus: unary<{ name?: string }>('SystemSharedMemoryStatus', (request) => grpcSystemSharedMemoryStatus(server, request)),
    SystemSharedMemoryRegister: unary<{ name?: string; key?: string; offset?: string; byte_size?: string }>('SystemSharedMemoryRegister', (request) =>
      grpcSystemSharedMemoryRegister(server, request),
    ),
    SystemSharedMemoryUnregister: unary<{ name?: string }>('SystemSharedMemoryUnregister', (request) => grpcSystemSharedMemoryUnregister(server, request)),
    CudaSharedMemoryStatus: unary<{ name?: string }>('CudaSharedMemoryStatus', grpcCudaSharedMemoryStatus),
    CudaSharedMemoryRegister: unary<{ name?: string }>('CudaSharedMemoryRegister', grpcCudaSharedMemoryRegister),
    CudaSharedMemoryUnregister: unary('CudaSharedMemoryUnregister', grpcCudaSharedMemoryUnregister),
    RepositoryModelUnload: unary<{ repository_name: string; model_name: string; parameters: Record<string, WireParameter> }>(
      'RepositoryModelUnload',
      async (request) => {
        requireRepositoryControl();
        if (request.repository_name !== '') throw new TritonError('UNSUPPORTED', "'repository_name' specification is not supported");
        const dependents = fromWireParameters(request.parameters).unload_dependents;
        await server.unloadModel(request.model_name, { unloadDependents: dependents === true, wait: false });
        return {};
      },
    ),
    ModelInfer: unary<WireRequest>('ModelInfer', async (message, call) => {
      const decoded = decodeGrpcInferRequest(message);
      const version = parseVersion(message.model_version);
      const model = server.model(message.model_name, version);
      const signal = callSignal(call as GrpcJs.ServerUnaryCall<unknown, unknown>);
      const [response, batched] = await Promise.all([
        model.infer(withTimeout({ ...decoded.request, signal })),
        isBatched(message.model_name, version, decoded),
      ]);
      return encodeGrpcInferResponse(response, decoded, batched);
    }),
    ModelStreamInfer: (call: GrpcJs.ServerDuplexStream<WireRequest, unknown>): void => {
      // Each message counts as a request in flight; the stream itself is
      // ended by close() once its requests are done.
      const signal = callSignal(call as GrpcJs.ServerDuplexStream<unknown, unknown>);
      // A count, not a Set of the tasks: a Set churned once per message
      // keeps finished ones alive through minor GCs (lib/token-table.ts).
      let inFlight = 0;
      let ended = false;
      const finish = (): void => {
        if (ended && inFlight === 0) {
          streams.delete(endStream);
          call.end();
        }
      };
      const endStream = (): void => {
        ended = true;
        finish();
      };
      streams.add(endStream);
      call.once('cancelled', () => streams.delete(endStream));
      const writeError = (message: WireRequest | undefined, error: unknown): void => {
        const text = error instanceof Error ? error.message : String(error);
        call.write({
          error_message: text,
          infer_response: { id: message?.id ?? '', model_name: message?.model_name ?? '', model_version: message?.model_version ?? '' },
        });
      };
      const run = async (message: WireRequest): Promise<void> => {
        try {
          await guard(call as GrpcJs.ServerDuplexStream<unknown, unknown>, 'ModelStreamInfer');
          const decoded = decodeGrpcInferRequest(message);
          const version = parseVersion(message.model_version);
          const batched = await isBatched(message.model_name, version, decoded);
          const model = server.model(message.model_name, version);
          let lastFinal = false;
          for await (const response of model.stream(withTimeout({ ...decoded.request, signal }))) {
            lastFinal = response.final;
            call.write({ infer_response: encodeGrpcInferResponse(response, decoded, batched, { triton_final_response: response.final }) });
          }
          if (!lastFinal && decoded.emptyFinal) {
            call.write({
              infer_response: {
                id: message.id,
                model_name: message.model_name,
                model_version: message.model_version,
                parameters: toWireParameters({ triton_final_response: true }),
                outputs: [],
                raw_output_contents: [],
              },
            });
          }
        } catch (error) {
          if (!signal.aborted) writeError(message, error);
        }
      };
      call.on('data', (message: WireRequest) => {
        const done = tracker.begin();
        inFlight++;
        void run(message).finally(() => {
          done();
          inFlight--;
          finish();
        });
      });
      call.once('end', endStream);
    },
  };
  grpcServer.addService(service, handlers);
  const credentials = (listen.credentials as GrpcJs.ServerCredentials | undefined) ?? grpc.ServerCredentials.createInsecure();
  const address = listen.host.includes(':') ? `[${listen.host}]:${listen.port}` : `${listen.host}:${listen.port}`;
  const port = await new Promise<number>((resolve, reject) => {
    grpcServer.bindAsync(address, credentials, (error, bound) => (error ? reject(error) : resolve(bound)));
  });
  return {
    server: grpcServer,
    host: listen.host,
    port,
    get inFlight() {
      return tracker.count;
    },
    close: async () => {
      await tracker.drain();
      for (const endStream of [...streams]) endStream();
      await new Promise<void>((resolve) => {
        grpcServer.tryShutdown(() => resolve());
      });
    },
  };
}
