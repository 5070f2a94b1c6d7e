/**
 * Triton's shared memory extensions for the KServe front ends, as plain
 * functions both protocols call: the system shared memory routes (status,
 * register, unregister) over `server.sharedMemory`, the translation of the
 * `shared_memory_region` / `shared_memory_offset` / `shared_memory_byte_size`
 * tensor parameters into the in-process request, and the refusal of CUDA
 * shared memory (no GPU build). JSON shapes and error messages are Triton's
 * (docs/protocol/extension_shared_memory.md, its HTTP and gRPC front ends).
 */
import { TritonError } from '../errors.js';
import type { Server } from '../server.js';
import type { SharedMemoryInput, SharedMemoryRange, SharedMemoryRegion } from '../shared-memory.js';
import type { DataType } from '../data-types.js';

/** A tensor parameter value as the codecs carry it. */
type ParameterValue = string | number | boolean;

/** The extension names served, added to what the core reports. */
export const SHARED_MEMORY_EXTENSION = 'system_shared_memory';

/**
 * Why a CUDA shared memory region cannot be registered (HTTP 501, gRPC
 * UNIMPLEMENTED). As in a CPU build of Triton, CUDA status lists no regions
 * and unregister succeeds, so clients that clear both kinds first (NVIDIA's
 * shm examples) work.
 */
export function cudaSharedMemoryRefusal(name: string): TritonError {
  return new TritonError(
    'UNSUPPORTED',
    `failed to register CUDA shared memory region: '${name}', GPUs not supported: CUDA shared memory needs a GPU build of Triton and of this server; use system shared memory (/v2/systemsharedmemory)`,
  );
}

function cudaNotFound(name: string): TritonError {
  return new TritonError('NOT_FOUND', `Unable to find cuda shared memory region: '${name}'`);
}

function invalid(message: string): TritonError {
  return new TritonError('INVALID_ARG', message);
}

/** A shared memory route: `/v2/{system,cuda}sharedmemory[/region/{name}]/{status,register,unregister}`. */
export interface SharedMemoryRoute {
  kind: 'system' | 'cuda';
  /** The region name from the path; undefined for every region. */
  region: string | undefined;
  action: 'status' | 'register' | 'unregister';
}

const ROUTE = /^\/v2\/(system|cuda)sharedmemory(?:\/region\/([^/]+))?\/(status|register|unregister)$/;

/** The route `path` names, or undefined when it is not a shared memory route. */
export function sharedMemoryRoute(path: string): SharedMemoryRoute | undefined {
  const match = ROUTE.exec(path);
  if (match === null) return undefined;
  return {
    kind: match[1] as SharedMemoryRoute['kind'],
    region: match[2] === undefined ? undefined : decodeURIComponent(match[2]),
    action: match[3] as SharedMemoryRoute['action'],
  };
}

/** The HTTP method a route takes (Triton: GET for status, POST for the others). */
export function sharedMemoryMethod(route: SharedMemoryRoute): 'GET' | 'POST' {
  return route.action === 'status' ? 'GET' : 'POST';
}

/** One region in Triton's status JSON. */
export interface RegionStatusJson {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

function statusJson(region: SharedMemoryRegion): RegionStatusJson {
  return { name: region.name, key: region.key, offset: region.offset, byte_size: region.byteSize };
}

/** A non-negative integer field of a register request (JSON number or gRPC uint64 text). */
function unsigned(value: unknown, field: string): number {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0) {
    throw invalid(`Unable to parse '${field}' of the shared memory register request: expected a non-negative integer`);
  }
  return number;
}

/**
 * Runs a shared memory route: the HTTP response body (JSON text; empty for
 * register and unregister, as Triton). `body` is the register request's JSON
 * object. CUDA routes throw UNSUPPORTED (HTTP 501).
 */
export async function runSharedMemoryRoute(
  server: Server,
  route: SharedMemoryRoute,
  body: Record<string, unknown> | undefined,
): Promise<string> {
  if (route.kind === 'cuda') {
    // No CUDA region can exist: status lists none, unregister has nothing to do.
    if (route.action === 'register') throw cudaSharedMemoryRefusal(route.region ?? '');
    if (route.action === 'status' && route.region !== undefined) throw cudaNotFound(route.region);
    return route.action === 'status' ? '[]' : '';
  }
  switch (route.action) {
    case 'status':
      return JSON.stringify(await systemSharedMemoryStatus(server, route.region));
    case 'register': {
      if (route.region === undefined) {
        throw invalid("'region name' is necessary to register system shared memory region");
      }
      if (body === undefined || !('key' in body)) throw invalid("Shared memory register request has no 'key' field");
      if (!('byte_size' in body)) throw invalid("Shared memory register request has no 'byte_size' field");
      await systemSharedMemoryRegister(server, route.region, body.key, body.offset, body.byte_size);
      return '';
    }
    case 'unregister':
      await server.sharedMemory.unregister(route.region);
      return '';
  }
}

/** The status of every region (`name` undefined or empty) or of one. */
export async function systemSharedMemoryStatus(server: Server, name: string | undefined): Promise<RegionStatusJson[]> {
  const regions = await server.sharedMemory.status(name === '' ? undefined : name);
  return regions.map(statusJson);
}

/** Registers a region from a request's `key`, `offset` (default 0) and `byte_size`. */
export async function systemSharedMemoryRegister(
  server: Server,
  name: string,
  key: unknown,
  offset: unknown,
  byteSize: unknown,
): Promise<void> {
  if (typeof key !== 'string') throw invalid("Unable to parse 'key' of the shared memory register request: expected a string");
  await server.sharedMemory.register(name, {
    key,
    offset: offset === undefined || offset === null ? 0 : unsigned(offset, 'offset'),
    byteSize: unsigned(byteSize, 'byte_size'),
  });
}

/** gRPC `SystemSharedMemoryStatus`: regions keyed by name. */
export async function grpcSystemSharedMemoryStatus(
  server: Server,
  request: { name?: string },
): Promise<{ regions: Record<string, RegionStatusJson> }> {
  const regions: Record<string, RegionStatusJson> = {};
  for (const region of await systemSharedMemoryStatus(server, request.name)) regions[region.name] = region;
  return { regions };
}

/** gRPC `SystemSharedMemoryRegister`. */
export async function grpcSystemSharedMemoryRegister(
  server: Server,
  request: { name?: string; key?: string; offset?: string | number; byte_size?: string | number },
): Promise<Record<string, never>> {
  if (request.name === undefined || request.name === '') {
    throw invalid("'region name' is necessary to register system shared memory region");
  }
  await systemSharedMemoryRegister(server, request.name, request.key ?? '', request.offset ?? 0, request.byte_size ?? 0);
  return {};
}

/** gRPC `SystemSharedMemoryUnregister` (an empty name: every region). */
export async function grpcSystemSharedMemoryUnregister(server: Server, request: { name?: string }): Promise<Record<string, never>> {
  await server.sharedMemory.unregister(request.name === '' ? undefined : request.name);
  return {};
}

/** gRPC `CudaSharedMemoryStatus`: no regions (NOT_FOUND for a named one). */
export async function grpcCudaSharedMemoryStatus(request: { name?: string }): Promise<{ regions: Record<string, never> }> {
  if (request.name !== undefined && request.name !== '') throw cudaNotFound(request.name);
  return { regions: {} };
}

/** gRPC `CudaSharedMemoryRegister`: UNSUPPORTED (UNIMPLEMENTED on the wire). */
export async function grpcCudaSharedMemoryRegister(request: { name?: string }): Promise<never> {
  throw cudaSharedMemoryRefusal(request.name ?? '');
}

/** gRPC `CudaSharedMemoryUnregister`: nothing to unregister. */
export async function grpcCudaSharedMemoryUnregister(): Promise<Record<string, never>> {
  return {};
}

/**
 * The shared memory range a tensor's parameters name, or undefined when
 * they name none. `what` is e.g. `tensor 'INPUT0'` (Triton's wording).
 */
export function sharedMemoryParameters(parameters: Record<string, ParameterValue>, name: string): SharedMemoryRange | undefined {
  const { shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: byteSize } = parameters;
  if (region === undefined) {
    for (const [key, value] of [
      ['shared_memory_offset', offset],
      ['shared_memory_byte_size', byteSize],
    ] as const) {
      if (value !== undefined) {
        throw invalid(`'${key}' can not be specified without 'shared_memory_region' parameter for tensor '${name}'`);
      }
    }
    return undefined;
  }
  if (typeof region !== 'string') {
    throw invalid(`invalid value type for 'shared_memory_region' parameter for tensor '${name}', expected string_param.`);
  }
  const integer = (value: ParameterValue | undefined, key: string): number => {
    if (value === undefined) return 0;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
      throw invalid(`invalid value type for '${key}' parameter for tensor '${name}', expected int64_param.`);
    }
    return value;
  };
  return { region, offset: integer(offset, 'shared_memory_offset'), byteSize: integer(byteSize, 'shared_memory_byte_size') };
}

/** An input read from shared memory (`model.infer` takes it in place of data). */
export function sharedMemoryInput(datatype: DataType, shape: number[], range: SharedMemoryRange): SharedMemoryInput {
  return { datatype, shape, sharedMemory: range };
}

/**
 * Checks an HTTP input names exactly one source of data, as Triton's
 * ValidateInputContentType does.
 */
export function checkHttpInputSource(hasData: boolean, hasBinary: boolean, hasSharedMemory: boolean): void {
  const set = Number(hasData) + Number(hasBinary) + Number(hasSharedMemory);
  if (set === 1) return;
  let message =
    "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But";
  if (set === 0) {
    message += ' no field is set';
  } else {
    message += ' set';
    if (hasData) message += " 'data'";
    if (hasBinary) message += " 'binary_data_size'";
    if (hasSharedMemory) message += " 'shared_memory_region'";
  }
  throw invalid(message);
}

/** Checks an output in shared memory asks for neither classification nor binary data (Triton's wording). */
export function checkSharedMemoryOutput(parameters: Record<string, ParameterValue>): void {
  if (parameters.shared_memory_region === undefined) return;
  if (parameters.classification !== undefined) {
    throw invalid("Output can't set both 'shared_memory_region' and 'classification'");
  }
  if (parameters.binary_data === true) throw invalid("Output can't set both 'shared_memory_region' and 'binary_data'");
}
