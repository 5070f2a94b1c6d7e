// The deployment files, checked without a container engine: every YAML file
// parses, the Dockerfile, compose file and manifests carry what the example
// service's contract needs (entry point, port, probes, graceful stop), and
// the dashboard asks only for metric families real Triton has.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from './helpers.js';

/** The example service's contract (examples/service, another room). */
const SERVICE = {
  entry: 'examples/service/server.ts',
  command: ['node', '--import', 'tsx', 'examples/service/server.ts'],
  port: 3000,
  ready: '/healthz/ready',
  live: '/healthz/live',
  metrics: '/metrics',
};

/**
 * Metric families real Triton serves (TRITON_FACTS.md "Metrics text", plus
 * the GPU families of a GPU build: utilisation, memory, power, energy).
 */
const TRITON_FAMILIES = new Set([
  'nv_inference_request_success',
  'nv_inference_request_failure',
  'nv_inference_count',
  'nv_inference_exec_count',
  'nv_inference_request_duration_us',
  'nv_inference_queue_duration_us',
  'nv_inference_compute_input_duration_us',
  'nv_inference_compute_infer_duration_us',
  'nv_inference_compute_output_duration_us',
  'nv_inference_pending_request_count',
  'nv_model_load_duration_secs',
  'nv_pinned_memory_pool_total_bytes',
  'nv_pinned_memory_pool_used_bytes',
  'nv_cpu_utilization',
  'nv_cpu_memory_total_bytes',
  'nv_cpu_memory_used_bytes',
  'nv_gpu_utilization',
  'nv_gpu_memory_total_bytes',
  'nv_gpu_memory_used_bytes',
  'nv_gpu_power_usage',
  'nv_gpu_power_limit',
  'nv_energy_consumption',
]);

/** Triton's own ports and health routes (KServe v2). */
const TRITON = {
  http: 8000,
  grpc: 8001,
  metrics: 8002,
  ready: '/v2/health/ready',
  live: '/v2/health/live',
};

// Parsed YAML/JSON, checked field by field by the assertions.
type Doc = Record<string, any>;

/** The value of `--name=value` in a command line (the last one wins, as in Triton). */
function flag(argv: string[], name: string): string | undefined {
  return argv
    .filter((a) => a.startsWith(`--${name}=`))
    .map((a) => a.slice(name.length + 3))
    .at(-1);
}

function read(path: string): string {
  return readFileSync(join(REPO_ROOT, path), 'utf8');
}

function yamlFiles(dir: string): string[] {
  return readdirSync(join(REPO_ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(REPO_ROOT, path)).isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(name) ? [path] : [];
  });
}

/** Every document of a YAML file; fails on any syntax error or warning. */
function parseYaml(path: string): Doc[] {
  const docs = parseAllDocuments(read(path), { merge: true, prettyErrors: true });
  if (!Array.isArray(docs)) throw new Error(`${path}: not a YAML stream`);
  for (const doc of docs) {
    const issues = [...doc.errors, ...doc.warnings].map((e) => e.message);
    expect(issues, path).toEqual([]);
  }
  return docs.map((d) => d.toJS() as Doc);
}

function one(path: string): Doc {
  const docs = parseYaml(path);
  expect(docs, path).toHaveLength(1);
  return docs[0]!;
}

/** Dockerfile instructions, continuation lines joined, comments dropped. */
function dockerfile(): Array<{ op: string; args: string }> {
  const text = read('Dockerfile').replace(/\\\n/g, ' ');
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(' ') };
    });
}

describe('YAML', () => {
  it('every YAML file of the repository parses', () => {
    const files = ['docker-compose.yml', ...yamlFiles('deploy')];
    expect(files).toEqual(
      expect.arrayContaining([
        'deploy/kubernetes/deployment.yaml',
        'deploy/kubernetes/gpu/gpu-patch.yaml',
        'deploy/kubernetes/fleet/kustomization.yaml',
        'deploy/kubernetes/fleet/prometheus-adapter-rules.yaml',
        'deploy/prometheus/prometheus.yml',
        'deploy/grafana/provisioning/datasources/prometheus.yml',
      ]),
    );
    for (const file of files) expect(parseYaml(file).length, file).toBeGreaterThan(0);
  });

  it('a YAML syntax error is caught', () => {
    const docs = parseAllDocuments('a: [1, 2\nb: c\n');
    expect(Array.isArray(docs) && docs.some((d) => d.errors.length > 0)).toBe(true);
  });
});

describe('Dockerfile', () => {
  const steps = dockerfile();
  const ops = (op: string): string[] => steps.filter((s) => s.op === op).map((s) => s.args);

  it("builds on NVIDIA's Triton image with the version as a build argument (default 25.07)", () => {
    expect(ops('ARG')).toContain('TRITON_VERSION=25.07');
    const froms = ops('FROM');
    expect(froms.filter((f) => f.startsWith('nvcr.io/nvidia/tritonserver:${TRITON_VERSION}-py3'))).toHaveLength(2);
    // The final stage (what runs) is the Triton image itself.
    expect(froms.at(-1)).toBe('nvcr.io/nvidia/tritonserver:${TRITON_VERSION}-py3');
  });

  it('takes Node.js 20 from the official Node image and installs with npm ci', () => {
    expect(ops('ARG')).toContain('NODE_IMAGE=node:20-bookworm-slim');
    expect(ops('FROM')).toContain('${NODE_IMAGE} AS node');
    expect(ops('COPY')).toContain('--from=node /usr/local/bin/node /usr/local/bin/node');
    expect(ops('RUN').some((r) => /\bnpm ci\b/.test(r))).toBe(true);
    expect(ops('COPY')).toContain('examples/ examples/');
  });

  it('runs the example service as a non-root user, on 0.0.0.0:3000, with a readiness HEALTHCHECK', () => {
    const user = ops('USER').at(-1);
    expect(user).toBeDefined();
    expect(user!.split(':')[0]).not.toMatch(/^(root|0)$/);
    expect(ops('EXPOSE')).toEqual([String(SERVICE.port)]);
    const env = ops('ENV').join(' ');
    expect(env).toContain('HOST=0.0.0.0');
    expect(env).toContain(`PORT=${SERVICE.port}`);
    const health = ops('HEALTHCHECK');
    expect(health).toHaveLength(1);
    expect(health[0]).toContain(SERVICE.ready);
    expect(JSON.parse(ops('CMD').at(-1)!)).toEqual(SERVICE.command);
  });

  it('keeps the build context to what the image uses', () => {
    const ignored = read('.dockerignore').split('\n').map((l) => l.trim());
    for (const entry of ['**/node_modules', 'build/', 'dist/', 'test/', '.git']) expect(ignored).toContain(entry);
    // Everything the Dockerfile copies from the context exists in the repository.
    for (const copy of ops('COPY').filter((c) => !c.startsWith('--from'))) {
      const sources = copy.split(/\s+/).slice(0, -1);
      for (const source of sources) expect(existsSync(join(REPO_ROOT, source)), source).toBe(true);
      for (const source of sources) expect(ignored).not.toContain(source);
    }
  });
});

describe('docker compose', () => {
  const compose = one('docker-compose.yml');

  it('runs the service on 3000 (cpu by default, gpu as a profile with a device reservation)', () => {
    const cpu = compose.services['service-cpu'];
    const gpu = compose.services['service-gpu'];
    expect(cpu.profiles).toEqual(['cpu']);
    expect(gpu.profiles).toEqual(['gpu']);
    for (const service of [cpu, gpu]) {
      expect(service.ports).toEqual([`${SERVICE.port}:${SERVICE.port}`]);
      expect(service.environment).toMatchObject({ HOST: '0.0.0.0', PORT: String(SERVICE.port) });
      expect(service.build.context).toBe('.');
      expect(service.networks.default.aliases).toEqual(['service']);
    }
    expect(cpu.deploy).toBeUndefined();
    expect(gpu.deploy.resources.reservations.devices).toEqual([{ driver: 'nvidia', count: 'all', capabilities: ['gpu'] }]);
    // `docker compose up` without flags picks the cpu profile.
    expect(read('.env')).toMatch(/^COMPOSE_PROFILES=cpu$/m);
  });

  it('runs a Triton server and the service calling it over gRPC as the remote profile', () => {
    const triton = compose.services.triton;
    const remote = compose.services['service-remote'];
    expect(triton.profiles).toEqual(['remote']);
    expect(remote.profiles).toEqual(['remote']);
    expect(read('docker-compose.yml')).toMatch(/^#\s+COMPOSE_PROFILES=remote docker compose up$/m);

    expect(triton.image).toBe('nvcr.io/nvidia/tritonserver:${TRITON_VERSION:-25.07}-py3');
    const argv = triton.command as string[];
    expect(argv[0]).toBe('tritonserver');
    const repository = flag(argv, 'model-repository');
    expect(triton.volumes).toContain(`./examples/model_repository:${repository}:ro`);
    expect(triton.ports).toContain(`${TRITON.grpc}:${TRITON.grpc}`);
    expect(triton.shm_size).toBeDefined();
    const check = (triton.healthcheck.test as string[]).join(' ');
    expect(check).toMatch(/\bcurl -f\b/);
    expect(check).toContain(`localhost:${TRITON.http}${TRITON.ready}`);

    // The service as in the other profiles, pointed at the triton container.
    const cpu = compose.services['service-cpu'];
    expect(remote.image).toBe(cpu.image);
    expect(remote.build).toEqual(cpu.build);
    expect(remote.ports).toEqual([`${SERVICE.port}:${SERVICE.port}`]);
    expect(remote.networks.default.aliases).toEqual(['service']);
    expect(remote.environment).toMatchObject({ HOST: '0.0.0.0', PORT: String(SERVICE.port) });
    const target = new URL(remote.environment.TRITON_URL);
    expect(target.protocol).toBe('grpc:');
    expect(target.hostname).toBe('triton');
    expect(Number(target.port)).toBe(TRITON.grpc);
    const metrics = new URL(remote.environment.TRITON_METRICS_URL);
    expect([metrics.hostname, Number(metrics.port), metrics.pathname]).toEqual(['triton', TRITON.metrics, '/metrics']);
    expect(remote.depends_on).toEqual({ triton: { condition: 'service_healthy' } });
    // The other profiles stay in-process.
    for (const name of ['service-cpu', 'service-gpu']) expect(compose.services[name].environment.TRITON_URL).toBeUndefined();
  });

  it('runs Prometheus scraping the service and Grafana with the dashboard provisioned', () => {
    const prometheus = one('deploy/prometheus/prometheus.yml');
    const job = prometheus.scrape_configs[0];
    expect(job.metrics_path).toBe(SERVICE.metrics);
    expect(job.static_configs[0].targets).toEqual([`service:${SERVICE.port}`]);
    expect(compose.services.prometheus.volumes).toContain('./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro');

    const grafana = compose.services.grafana;
    const mounts = new Map<string, string>(
      grafana.volumes.map((v: string) => {
        const [from, to] = v.split(':');
        return [from!, to!];
      }),
    );
    expect(mounts.get('./deploy/grafana/provisioning')).toBe('/etc/grafana/provisioning');
    const dashboardsAt = mounts.get('./deploy/grafana/dashboard.json')!;
    const provider = one('deploy/grafana/provisioning/dashboards/tritonserver-node.yml').providers[0];
    expect(dashboardsAt.startsWith(`${provider.options.path}/`)).toBe(true);
    const datasource = one('deploy/grafana/provisioning/datasources/prometheus.yml').datasources[0];
    expect(datasource).toMatchObject({ type: 'prometheus', url: 'http://prometheus:9090' });
    // The dashboard's panels use the provisioned data source.
    const dashboard = JSON.parse(read('deploy/grafana/dashboard.json'));
    for (const panel of dashboard.panels) expect(panel.datasource.uid, panel.title).toBe(datasource.uid);
  });
});

describe('Kubernetes', () => {
  const dir = 'deploy/kubernetes';
  const kustomization = one(`${dir}/kustomization.yaml`);
  const deployment = one(`${dir}/deployment.yaml`);
  const container = deployment.spec.template.spec.containers[0];

  it('lists its resources in the kustomization', () => {
    expect(kustomization.resources).toEqual(['deployment.yaml', 'service.yaml', 'hpa.yaml']);
    for (const file of kustomization.resources) expect(existsSync(join(REPO_ROOT, dir, file))).toBe(true);
    expect(kustomization.images[0].name).toBe(container.image);
  });

  it('probes the service endpoints on its port and stops gracefully', () => {
    const port = container.ports.find((p: Doc) => p.name === 'http');
    expect(port.containerPort).toBe(SERVICE.port);
    const env = Object.fromEntries(container.env.map((e: Doc) => [e.name, e.value]));
    expect(env).toMatchObject({ HOST: '0.0.0.0', PORT: String(SERVICE.port) });
    expect(container.readinessProbe.httpGet).toEqual({ path: SERVICE.ready, port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: SERVICE.live, port: 'http' });
    expect(container.startupProbe.httpGet).toEqual({ path: SERVICE.ready, port: 'http' });
    const preStop = container.lifecycle.preStop.exec.command as string[];
    expect(preStop[0]).toBe('sleep');
    // The grace period covers the preStop pause plus Triton's 30 s exit timeout.
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(Number(preStop[1]) + 30);
    expect(deployment.spec.template.spec.securityContext.runAsNonRoot).toBe(true);
    expect(container.resources.requests.cpu).toBeDefined();
  });

  it('exposes the pods through a Service and a Prometheus scrape config', () => {
    const service = one(`${dir}/service.yaml`);
    expect(service.spec.selector).toEqual(deployment.spec.template.metadata.labels);
    expect(service.spec.ports[0].targetPort).toBe('http');
    expect(deployment.spec.template.metadata.annotations).toMatchObject({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': String(SERVICE.port),
      'prometheus.io/path': SERVICE.metrics,
    });
    const monitor = one(`${dir}/servicemonitor.yaml`);
    expect(monitor.kind).toBe('ServiceMonitor');
    expect(monitor.spec.selector.matchLabels).toEqual(service.metadata.labels);
    expect(monitor.spec.endpoints[0]).toMatchObject({ port: service.spec.ports[0].name, path: SERVICE.metrics });
  });

  it('autoscales on CPU, or on pending requests through a custom metric', () => {
    const cpu = one(`${dir}/hpa.yaml`);
    const pending = one(`${dir}/hpa-pending-requests.yaml`);
    for (const hpa of [cpu, pending]) {
      expect(hpa.apiVersion).toBe('autoscaling/v2');
      expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name });
    }
    expect(cpu.spec.metrics[0].resource).toMatchObject({ name: 'cpu', target: { type: 'Utilization' } });
    expect(pending.spec.metrics[0].pods.metric.name).toBe('nv_inference_pending_request_count');
    const adapter = one(`${dir}/prometheus-adapter-rules.yaml`);
    expect(adapter.rules[0].name.as).toBe('nv_inference_pending_request_count');
  });

  it('asks for a GPU in the gpu overlay', () => {
    const overlay = one(`${dir}/gpu/kustomization.yaml`);
    expect(overlay.resources).toEqual(['../']);
    const patch = one(`${dir}/gpu/${overlay.patches[0].path}`);
    expect(patch.metadata.name).toBe(deployment.metadata.name);
    const patched = patch.spec.template.spec.containers[0];
    expect(patched.name).toBe(container.name);
    expect(patched.resources.limits['nvidia.com/gpu']).toBe(1);
    expect(container.resources.limits?.['nvidia.com/gpu']).toBeUndefined();
  });
});

describe('fleet (remote mode)', () => {
  const dir = 'deploy/kubernetes/fleet';
  const kustomization = one(`${dir}/kustomization.yaml`);
  const triton = one(`${dir}/triton-deployment.yaml`);
  const tritonPod = triton.spec.template.spec;
  const tritonContainer = tritonPod.containers[0];
  const tritonService = one(`${dir}/triton-service.yaml`);
  const deployment = one(`${dir}/service-deployment.yaml`);
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const argv: string[] = [...(tritonContainer.command ?? []), ...(tritonContainer.args ?? [])];

  /** A probe's or Service's port as a number, a named port looked up in the container. */
  const portNumber = (c: Doc, port: number | string): number | undefined =>
    typeof port === 'number' ? port : c.ports.find((p: Doc) => p.name === port)?.containerPort;
  const portsByName = (ports: Doc[], key: string): Record<string, number> =>
    Object.fromEntries(ports.map((p) => [p.name, p[key]]));
  const env = (c: Doc): Record<string, Doc> => Object.fromEntries(c.env.map((e: Doc) => [e.name, e]));

  it('lists files that exist in its kustomization', () => {
    expect(kustomization.resources).toEqual(
      expect.arrayContaining([
        'triton-deployment.yaml',
        'triton-service.yaml',
        'triton-hpa.yaml',
        'service-deployment.yaml',
        'service-service.yaml',
      ]),
    );
    for (const file of kustomization.resources) expect(existsSync(join(REPO_ROOT, dir, file)), file).toBe(true);
    expect(kustomization.images[0].name).toBe(container.image);
    expect(read(`${dir}/kustomization.yaml`)).toContain('kubectl apply -k deploy/kubernetes/fleet');
  });

  it("runs NVIDIA's tritonserver on the read-only model volume, on 8000/8001/8002", () => {
    expect(triton.spec.replicas).toBe(2);
    expect(tritonContainer.image).toBe('nvcr.io/nvidia/tritonserver:25.07-py3');
    expect(argv[0]).toBe('tritonserver');
    // Every pod loads the whole repository at start.
    const mode = flag(argv, 'model-control-mode');
    if (mode === 'explicit') expect(flag(argv, 'load-model')).toBe('*');
    else expect(mode).toBe('none');

    const repository = flag(argv, 'model-repository');
    const mount = tritonContainer.volumeMounts.find((m: Doc) => m.mountPath === repository);
    expect(mount, `a volume at ${repository}`).toBeDefined();
    expect(mount.readOnly).toBe(true);
    const volume = tritonPod.volumes.find((v: Doc) => v.name === mount.name);
    expect(volume.persistentVolumeClaim.claimName).toBe('triton-models');
    // The claim comes with the kustomization (or is the user's own, by that name).
    const claims = kustomization.resources
      .flatMap((file: string) => parseYaml(`${dir}/${file}`))
      .filter((d: Doc) => d.kind === 'PersistentVolumeClaim')
      .map((d: Doc) => d.metadata.name);
    expect(claims).toEqual(['triton-models']);

    expect(portsByName(tritonContainer.ports, 'containerPort')).toEqual({ http: TRITON.http, grpc: TRITON.grpc, metrics: TRITON.metrics });
  });

  it("probes Triton's health routes on 8000, gives it a memory /dev/shm and its exit timeout to stop", () => {
    for (const probe of [tritonContainer.startupProbe, tritonContainer.readinessProbe]) {
      expect(probe.httpGet.path).toBe(TRITON.ready);
      expect(portNumber(tritonContainer, probe.httpGet.port)).toBe(TRITON.http);
    }
    expect(tritonContainer.livenessProbe.httpGet.path).toBe(TRITON.live);
    expect(portNumber(tritonContainer, tritonContainer.livenessProbe.httpGet.port)).toBe(TRITON.http);

    const shm = tritonContainer.volumeMounts.find((m: Doc) => m.mountPath === '/dev/shm');
    expect(shm).toBeDefined();
    expect(tritonPod.volumes.find((v: Doc) => v.name === shm.name).emptyDir.medium).toBe('Memory');

    const exitTimeout = Number(flag(argv, 'exit-timeout-secs') ?? 30);
    const preStop = Number(tritonContainer.lifecycle?.preStop?.exec?.command?.[1] ?? 0);
    expect(tritonPod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(preStop + exitTimeout);
    expect(tritonContainer.resources.requests.cpu).toBeDefined();
    expect(tritonContainer.resources.requests.memory).toBeDefined();
    expect(triton.spec.template.metadata.annotations).toMatchObject({
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': String(TRITON.metrics),
      'prometheus.io/path': '/metrics',
    });
  });

  it('reaches every Triton pod through a headless Service', () => {
    expect(tritonService.spec.clusterIP).toBe('None');
    expect(tritonService.spec.selector).toEqual(triton.spec.template.metadata.labels);
    expect(portsByName(tritonService.spec.ports, 'port')).toEqual({ http: TRITON.http, grpc: TRITON.grpc, metrics: TRITON.metrics });
    for (const port of tritonService.spec.ports) expect(portNumber(tritonContainer, port.targetPort), port.name).toBe(port.port);
  });

  it('runs the example service against the Triton Service by dns:///, keeping its contract', () => {
    const vars = env(container);
    const grpcPort = tritonService.spec.ports.find((p: Doc) => p.name === 'grpc').port;
    /** The Service's short name, or its full name with the namespace from the downward API. */
    const tritonHost = (host: string): void => {
      const [name, ...rest] = host.split('.');
      expect(name).toBe(tritonService.metadata.name);
      if (rest.length === 0) return;
      const namespace = /^\$\((\w+)\)$/.exec(rest[0]!)?.[1];
      expect(rest.slice(1).join('.')).toBe('svc.cluster.local');
      expect(vars[namespace!]?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
      // Kubernetes expands $(VAR) only from variables defined before it.
      const order = container.env.map((e: Doc) => e.name);
      expect(order.indexOf(namespace)).toBeLessThan(order.indexOf('TRITON_URL'));
    };
    const target = /^dns:\/\/\/([^/:]+):(\d+)$/.exec(vars.TRITON_URL?.value ?? '');
    expect(target, vars.TRITON_URL?.value).not.toBeNull();
    tritonHost(target![1]!);
    expect(Number(target![2])).toBe(grpcPort);
    // Not new URL(): it would lower-case the $(VAR) in the host name.
    const metrics = /^http:\/\/([^/:]+):(\d+)(\/.*)$/.exec(vars.TRITON_METRICS_URL?.value ?? '');
    expect(metrics, vars.TRITON_METRICS_URL?.value).not.toBeNull();
    tritonHost(metrics![1]!);
    expect(Number(metrics![2])).toBe(tritonService.spec.ports.find((p: Doc) => p.name === 'metrics').port);
    expect(metrics![3]).toBe('/metrics');

    // The contract of ../deployment.yaml: port, probes, graceful stop.
    expect(portNumber(container, 'http')).toBe(SERVICE.port);
    expect(vars.HOST?.value).toBe('0.0.0.0');
    expect(vars.PORT?.value).toBe(String(SERVICE.port));
    expect(container.readinessProbe.httpGet).toEqual({ path: SERVICE.ready, port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: SERVICE.live, port: 'http' });
    expect(container.startupProbe.httpGet).toEqual({ path: SERVICE.ready, port: 'http' });
    const preStop = container.lifecycle.preStop.exec.command as string[];
    expect(preStop[0]).toBe('sleep');
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(Number(preStop[1]) + 30);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(container.resources.requests.cpu).toBeDefined();
    // Inference runs in the fleet: no GPU, no /dev/shm, and no second scrape of Triton's metrics.
    expect(container.resources.limits?.['nvidia.com/gpu']).toBeUndefined();
    expect(container.volumeMounts ?? []).toEqual([]);
    expect(deployment.spec.template.metadata.annotations?.['prometheus.io/scrape']).not.toBe('true');

    const front = one(`${dir}/service-service.yaml`);
    expect(front.spec.selector).toEqual(deployment.spec.template.metadata.labels);
    expect(front.spec.type ?? 'ClusterIP').toBe('ClusterIP');
    expect(front.spec.ports[0]).toMatchObject({ port: 80, targetPort: 'http' });
  });

  it("autoscales the Triton Deployment on Triton's queue metrics, served by prometheus-adapter", () => {
    const hpa = one(`${dir}/triton-hpa.yaml`);
    expect(hpa.apiVersion).toBe('autoscaling/v2');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: triton.metadata.name });
    expect(hpa.spec.minReplicas).toBeLessThanOrEqual(triton.spec.replicas);
    const names: string[] = hpa.spec.metrics.map((m: Doc) => {
      expect(m.type).toBe('Pods');
      return m.pods.metric.name;
    });
    expect(names).toContain('nv_inference_pending_request_count');
    expect(names.filter((n) => !TRITON_FAMILIES.has(n))).toEqual([]);

    const rules: Doc[] = one(`${dir}/prometheus-adapter-rules.yaml`).rules;
    expect(names.filter((n) => !rules.some((r) => r.name.as === n))).toEqual([]);
    for (const rule of rules) {
      // Each rule reads Triton families only, per pod.
      const series = /^(\w+)\{/.exec(rule.seriesQuery)?.[1];
      expect(TRITON_FAMILIES.has(series!), rule.seriesQuery).toBe(true);
      expect(rule.resources.overrides.pod).toEqual({ resource: 'pod' });
      const used = rule.metricsQuery.match(/\bnv_[a-z0-9_]+/g) ?? [];
      expect(used.filter((m: string) => !TRITON_FAMILIES.has(m)), rule.metricsQuery).toEqual([]);
    }
  });
});

describe('Grafana dashboard', () => {
  const dashboard = JSON.parse(read('deploy/grafana/dashboard.json'));
  const exprs: string[] = dashboard.panels.flatMap((p: Doc) => p.targets.map((t: Doc) => t.expr));
  /** A query with its label selectors removed, whitespace squeezed. */
  const bare = (expr: string): string => expr.replace(/\{[^}]*\}/g, '').replace(/\s+/g, ' ').trim();

  it('queries only metric families real Triton serves', () => {
    const named = new Set(exprs.flatMap((e) => e.match(/\bnv_[a-z0-9_]+/g) ?? []));
    expect(named.size).toBeGreaterThan(5);
    expect([...named].filter((m) => !TRITON_FAMILIES.has(m))).toEqual([]);
    expect(dashboard.templating.list[0].definition).toContain('nv_inference_request_success');
  });

  it('shows request rate by model, queue and compute time per request, pending requests and GPU utilisation', () => {
    const queries = exprs.map(bare);
    expect(queries).toContain('sum(rate(nv_inference_request_success[1m])) by (model)');
    expect(queries).toContain(
      'sum by (model) (rate(nv_inference_queue_duration_us[1m])) / sum by (model) (rate(nv_inference_request_success[1m]))',
    );
    expect(queries).toContain(
      'sum by (model) (rate(nv_inference_compute_infer_duration_us[1m])) / sum by (model) (rate(nv_inference_request_success[1m]))',
    );
    expect(queries).toContain('sum(nv_inference_pending_request_count) by (model)');
    expect(queries).toContain('avg(nv_gpu_utilization) by (gpu_uuid)');
    // Panel ids are unique (Grafana keys panels by id).
    const ids = dashboard.panels.map((p: Doc) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

/** A free TCP port on 127.0.0.1. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

// Runs only once the example service (another helper's room) is in the tree:
// the Dockerfile's command, started as the container would, answers its probes
// and stops on SIGTERM.
describe.runIf(existsSync(join(REPO_ROOT, SERVICE.entry)))('the Dockerfile command', () => {
  it('starts the service, which answers its probes and stops on SIGTERM', async () => {
    const port = await freePort();
    const [command, ...args] = SERVICE.command;
    expect(command).toBe('node');
    const child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env: { ...process.env, HOST: '127.0.0.1', PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const url = (path: string): string => `http://127.0.0.1:${port}${path}`;
    try {
      let ready = false;
      for (let attempt = 0; attempt < 200 && !ready && child.exitCode === null; attempt++) {
        ready = await fetch(url(SERVICE.ready)).then((r) => r.ok, () => false);
        if (!ready) await new Promise((r) => setTimeout(r, 100));
      }
      expect(ready, stderr).toBe(true);
      expect((await fetch(url(SERVICE.live))).status).toBe(200);
      const metrics = await fetch(url(SERVICE.metrics));
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('nv_inference_request_success');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited, stderr).toBe(0);
  });
});
