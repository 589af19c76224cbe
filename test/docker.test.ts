import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { parseConfig } from '../packages/guardian/src/config.js';
import { resolveConfig } from '../packages/health-check/src/config.js';
import {
  DAEMON_HTTP,
  DAEMON_TCP,
  INFERENCE_HTTP,
  INFERENCE_LIVENESS,
  INFERENCE_MTLS,
  STATUS_PAGE,
} from '../packages/shared-types/src/index.js';
import { statusPageCommand } from '../packages/stack/src/status-page/command.js';
import { writeSampleHistory } from '../packages/stack/src/status-page/sample.js';
import { exited, freePort, until } from './support.js';

const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const dockerDir = join(root, 'docker');
const read = (p: string) => readFileSync(join(root, p), 'utf8');
const scratch = mkdtempSync(join(tmpdir(), 'vigil-docker-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Compose's interpolation of `${VAR:-default}` and `${VAR}`, with an empty environment. */
const interpolate = (s: string) =>
  s.replace(/\$\{(\w+)(?::?-([^}]*))?\}/g, (_, __, def: string | undefined) => def ?? '');

type Doc = any;
// Compose applies YAML merge keys (`<<: *service`), which YAML 1.2 leaves off by default.
const compose: Doc = parse(read('docker/compose.yaml'), { merge: true });
const services: Record<string, Doc> = compose.services;
const PACKAGES = ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'health-check'];
/** Where the images hold the deployed @vigil/stack, and its `vigil` binary there. */
const STACK_DIR = '/opt/vigil/stack';
const stackBin = (JSON.parse(read('packages/stack/package.json')) as { bin: Record<string, string> }).bin.vigil!;
const VIGIL_IN_IMAGE = `${STACK_DIR}/${stackBin.replace(/^\.\//, '')}`;

/** A Dockerfile as instructions (continuations joined, comments dropped), split into stages. */
function dockerfile(path: string) {
  const lines = readFileSync(path, 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const instructions = lines.map((l) => {
    const m = /^([A-Z]+)\s+(.*)$/.exec(l);
    if (!m) throw new Error(`${path}: not an instruction: ${l}`);
    return { op: m[1]!, args: m[2]! };
  });
  const stages: { from: string; name?: string; body: typeof instructions }[] = [];
  const globalArgs: Record<string, string> = {};
  for (const ins of instructions) {
    if (ins.op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      if (!m) throw new Error(`${path}: bad FROM ${ins.args}`);
      stages.push({ from: m[1]!, ...(m[2] ? { name: m[2] } : {}), body: [] });
    } else if (stages.length === 0) {
      if (ins.op !== 'ARG') throw new Error(`${path}: ${ins.op} before the first FROM`);
      const [k, v] = ins.args.split('=');
      globalArgs[k!] = v ?? '';
    } else {
      stages.at(-1)!.body.push(ins);
    }
  }
  return { instructions, stages, globalArgs };
}

describe('docker/compose.yaml', () => {
  it('has the stack: daemon, relay, inference server and its model job, guardian, health check, status page', () => {
    expect(compose.name).toBe('vigil');
    expect(Object.keys(services).sort()).toEqual(
      [
        'signal-daemon',
        'tcp-relay',
        'model-init',
        'inference-server',
        'guardian',
        'health-check',
        'status-page',
      ].sort(),
    );
    for (const [name, s] of Object.entries(services)) {
      expect([name, s.restart]).toEqual([name, name === 'model-init' ? 'no' : 'unless-stopped']);
      expect([name, s.init]).toEqual([name, true]);
      expect([name, s.cap_drop]).toEqual([name, ['ALL']]);
      expect(s.privileged).toBeUndefined();
      for (const dep of Object.keys(s.depends_on ?? {})) expect(Object.keys(services)).toContain(dep);
    }
  });

  it('publishes exactly the ports of shared-types, each bound to 127.0.0.1', () => {
    const published: number[] = [];
    for (const s of Object.values(services)) {
      for (const p of s.ports ?? []) {
        const m = /^127\.0\.0\.1:(\d+):(\d+)$/.exec(String(p));
        expect([p, m !== null]).toEqual([p, true]);
        expect(m![1]).toBe(m![2]);
        published.push(Number(m![1]));
      }
    }
    expect(published.sort()).toEqual(
      [DAEMON_HTTP.port, DAEMON_TCP.port, INFERENCE_HTTP.port, INFERENCE_MTLS.port, STATUS_PAGE.port].sort(),
    );
    expect(services['signal-daemon'].ports).toEqual([
      `127.0.0.1:${DAEMON_HTTP.port}:8080`,
      `127.0.0.1:${DAEMON_TCP.port}:7583`,
    ]);
    expect(services['inference-server'].ports).toEqual([
      `127.0.0.1:${INFERENCE_HTTP.port}:1337`,
      `127.0.0.1:${INFERENCE_MTLS.port}:1338`,
    ]);
    expect(services['status-page'].ports).toEqual([`127.0.0.1:${STATUS_PAGE.port}:${STATUS_PAGE.port}`]);
    // The relay binds the host's link address itself, in the host's network namespace.
    expect(services['tcp-relay'].network_mode).toBe('host');
    expect(services['tcp-relay'].ports).toBeUndefined();
  });

  it('has the inference liveness probe of spec 8: request timeout 75 s, probe timeout 90 s, every 120 s', () => {
    const h = services['inference-server'].healthcheck;
    const test = (h.test as string[]).map(interpolate);
    expect(test.slice(0, 5)).toEqual(['CMD', 'node', VIGIL_IN_IMAGE, 'liveness', 'probe']);
    expect(test[test.indexOf('--kind') + 1]).toBe('chat');
    expect(test[test.indexOf('--request-timeout') + 1]).toBe(String(INFERENCE_LIVENESS.requestTimeoutS));
    expect(h.timeout).toBe(`${INFERENCE_LIVENESS.probeTimeoutS}s`);
    expect(h.interval).toBe(`${INFERENCE_LIVENESS.intervalS}s`);
    expect(test[test.indexOf('--url') + 1]).toBe(`http://127.0.0.1:${INFERENCE_HTTP.port}`);
    // The model the probe asks for is the one served.
    const command = (services['inference-server'].command as string[]).map(interpolate);
    expect(test[test.indexOf('--model') + 1]).toBe(command[command.indexOf('--model-id') + 1]);
    const daemon = services['signal-daemon'].healthcheck.test as string[];
    expect(daemon.slice(0, 7)).toEqual(['CMD', 'node', VIGIL_IN_IMAGE, 'liveness', 'probe', '--kind', 'rpc']);
  });

  it('keeps data, model, state, logs and restart requests in named volumes, and mounts no Docker socket', () => {
    const declared = Object.keys(compose.volumes);
    expect(declared.sort()).toEqual(['control', 'data', 'logs', 'model', 'state']);
    for (const [name, s] of Object.entries(services)) {
      for (const v of s.volumes ?? []) {
        const [source] = String(v).split(':');
        expect(String(v)).not.toMatch(/docker\.sock/);
        if (source!.startsWith('.') || source!.startsWith('/')) {
          expect([name, v, existsSync(resolve(dockerDir, source!))]).toEqual([name, v, true]);
        } else {
          expect([name, declared.includes(source!)]).toEqual([name, true]);
        }
      }
    }
    expect(services['signal-daemon'].volumes).toContain('data:/var/lib/vigil/data');
    expect(services['inference-server'].volumes).toContain('model:/var/lib/vigil/model:ro');
  });

  it('builds every service from the repository root with the one Dockerfile, picking its target', () => {
    const targets = dockerfile(join(dockerDir, 'Dockerfile')).stages.map((st) => st.name);
    for (const [name, s] of Object.entries(services)) {
      const context = resolve(dockerDir, s.build.context);
      expect([name, context]).toEqual([name, root]);
      expect([name, existsSync(join(context, s.build.dockerfile))]).toEqual([name, true]);
      expect([name, existsSync(join(context, '.dockerignore'))]).toEqual([name, true]);
      const pkg = name === 'model-init' ? 'inference-server' : name;
      expect(s.build.dockerfile).toBe('docker/Dockerfile');
      expect([name, s.build.target]).toEqual([name, pkg]);
      expect(targets).toContain(s.build.target);
      expect(s.image).toBe(`vigil/${pkg}:0.1.0`);
    }
  });

  it('gives the guardian a configuration that parseConfig accepts, pointing at the inference container', () => {
    const g = services.guardian;
    expect(g.command).toEqual(['run', '--config', '/etc/vigil/guardian.json']);
    expect(g.volumes).toContain('./guardian.json:/etc/vigil/guardian.json:ro');
    const config = parseConfig(JSON.parse(read('docker/guardian.json')), '/etc/vigil');
    expect(config.primary.http).toEqual({ host: 'inference-server', port: 1337 });
    expect(config.primary.model).toBe(interpolate(`\${VIGIL_MODEL_ID:-tiny}`));
    expect(config.fallback).toBeUndefined();
    // Its restart action is a restart request that the inference server's probe carries out.
    const service = config.primary.service;
    expect(service.kind).toBe('command');
    const restart = service.kind === 'command' ? (service.restart ?? []) : [];
    expect(restart.slice(0, 4)).toEqual(['node', VIGIL_IN_IMAGE, 'liveness', 'request-restart']);
    const probe = services['inference-server'].healthcheck.test as string[];
    expect(restart[4]).toBe(probe[probe.indexOf('--restart-request') + 1]);
    expect(restart[4]).toMatch(/^\/var\/lib\/vigil\/control\//);
    for (const s of ['guardian', 'inference-server'])
      expect(services[s].volumes).toContain('control:/var/lib/vigil/control');
    // It reads the logs the server writes, from the shared volume.
    const command = services['inference-server'].command as string[];
    expect(config.primary.log).toBe(command[command.indexOf('--log-file') + 1]);
    expect(config.primary.accessLog).toBe(command[command.indexOf('--access-log') + 1]);
    expect(g.volumes).toContain('logs:/var/log/vigil:ro');
    expect(services['inference-server'].volumes).toContain('logs:/var/log/vigil');
    expect(dirname(config.stateFile)).toBe('/var/lib/vigil/state');
    expect(g.volumes).toContain('state:/var/lib/vigil/state');
  });

  it('runs the health check beside the daemon, every 300 s, with a configuration resolveConfig accepts', () => {
    const h = services['health-check'];
    expect(h.network_mode).toBe('service:signal-daemon');
    expect(h.pid).toBe('service:signal-daemon');
    expect(h.command).toEqual(['--fix', '--quiet', '--config', '/etc/vigil/health.json']);
    expect(h.volumes).toContain('./health.json:/etc/vigil/health.json:ro');
    const config = resolveConfig(JSON.parse(read('docker/health.json')));
    expect(config.daemon.http).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(config.daemon.program).toBe('signal-daemon');
    expect(dirname(config.healthLog)).toBe('/var/lib/vigil/state');
    const target = dockerfile(join(dockerDir, 'Dockerfile')).stages.find((st) => st.name === 'health-check')!;
    const entrypoint = JSON.parse(target.body.find((i) => i.op === 'ENTRYPOINT')!.args);
    expect(entrypoint).toEqual(['node', VIGIL_IN_IMAGE, 'every', '300', '--', 'node', '/app/bin/health-check.js']);
  });

  it('serves the status page on loopback, reading the guardian, health and inference files, restarting nothing', () => {
    const p = services['status-page'];
    const command = (p.command as string[]).map(interpolate);
    // Every flag is one of `vigil status-page`, every value-taking flag has its value.
    const options = statusPageCommand().options;
    for (const [i, arg] of command.entries()) {
      if (!arg.startsWith('--')) continue;
      const option = options.find((o) => o.long === arg);
      expect([arg, option !== undefined]).toEqual([arg, true]);
      if (option!.required) expect([arg, command[i + 1]?.startsWith('--')]).toEqual([arg, false]);
    }
    const value = (flag: string) => command[command.indexOf(flag) + 1];
    // Inside the container on all addresses (published on the host's loopback only, above).
    expect(value('--listen')).toBe(`0.0.0.0:${STATUS_PAGE.port}`);
    expect(command).toContain('--allow-non-loopback');
    // The daemon by its service name, at the port it listens on in its container.
    const daemon = services['signal-daemon'].command as string[];
    expect(value('--daemon')).toBe(`signal-daemon:${daemon[daemon.indexOf('--http') + 1]!.split(':')[1]}`);
    // The configurations the guardian and the health check run with, mounted read-only.
    const mountOf = (service: string, target: string) =>
      (services[service].volumes as string[]).find((v) => v.split(':')[1] === target);
    expect(mountOf('status-page', value('--guardian-config')!)).toBe(mountOf('guardian', '/etc/vigil/guardian.json'));
    expect(mountOf('status-page', value('--health-config')!)).toBe(mountOf('health-check', '/etc/vigil/health.json'));
    // Every mount of the page is read-only but the guardian's state (its reset and restore buttons
    // write it through the guardian's own commands); each file it reads lies in one of them,
    // written by its service. No Docker socket: the page restarts no container.
    for (const v of p.volumes as string[]) expect([v, /:ro$/.test(v)]).toEqual([v, v !== 'state:/var/lib/vigil/state']);
    expect(JSON.stringify(p)).not.toMatch(/docker\.sock/);
    expect(value('--restart-with')).toBe('compose');
    const guardian = parseConfig(JSON.parse(read('docker/guardian.json')), '/etc/vigil');
    const health = resolveConfig(JSON.parse(read('docker/health.json')));
    const volumeOf = (service: string, file: string) =>
      (services[service].volumes as string[])
        .map((v) => v.split(':'))
        .find(([source, target]) => !source!.startsWith('.') && file.startsWith(`${target}/`))?.[0];
    const read_ = [
      ['guardian', guardian.logFile],
      ['guardian', guardian.stateFile],
      ['health-check', health.healthLog],
      ['inference-server', guardian.primary.log],
    ] as const;
    for (const [writer, file] of read_) {
      expect([file, volumeOf('status-page', file!)]).toEqual([file, volumeOf(writer, file!)]);
      expect([file, volumeOf(writer, file!)]).not.toEqual([file, undefined]);
    }
    // The guardian logs to a file (the page's history), in a volume it may write.
    expect(guardian.logFile).toBe('/var/lib/vigil/state/guardian.log');
    expect(services.guardian.volumes).toContain('state:/var/lib/vigil/state');
    // The page's own files (token, actions log) are in its container, outside every mount.
    const home = p.environment.VIGIL_HOME as string;
    for (const v of p.volumes as string[]) expect(home.startsWith(`${v.split(':')[1]}/`)).toBe(false);
    // A healthcheck like the other long-running services, on the page's own JSON.
    const test = (p.healthcheck.test as string[]).join(' ');
    expect(test).toContain(`http://127.0.0.1:${STATUS_PAGE.port}/api/status`);
    expect(p.healthcheck.interval).toBe(services['signal-daemon'].healthcheck.interval);
    // The image runs the same command by itself.
    const target = dockerfile(join(dockerDir, 'Dockerfile')).stages.find((st) => st.name === 'status-page')!;
    const body = (op: string) => JSON.parse(target.body.find((i) => i.op === op)!.args) as string[];
    expect(target.from).toBe('runtime');
    expect(body('ENTRYPOINT')).toEqual(['node', VIGIL_IN_IMAGE, 'status-page']);
    expect(body('CMD')).toEqual(command);
    expect(target.body.find((i) => i.op === 'ENV')!.args).toBe(`VIGIL_HOME=${home}`);
    // The guardian (for reset and restore) where the stack looks for a package's binary: ROOT
    // (packages/stack/dist/paths.js, three levels up) + packages/guardian/bin/guardian.js.
    const rootInImage = resolve(STACK_DIR, 'dist', '../../..');
    expect(target.body.filter((i) => i.op === 'COPY').map((i) => i.args)).toEqual([
      `--from=deploy-guardian /out ${rootInImage}/packages/guardian`,
    ]);
  });

  it('passes docker compose config where the compose plugin is installed', () => {
    const v = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' });
    if (v.error || v.status !== 0) {
      console.log('docker compose is not installed here: the file was validated by this test alone');
      return;
    }
    const r = spawnSync('docker', ['compose', '-f', join(dockerDir, 'compose.yaml'), 'config', '--quiet'], {
      encoding: 'utf8',
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});

describe('docker/Dockerfile', () => {
  const packageManager = (JSON.parse(read('package.json')) as { packageManager: string }).packageManager;
  const { stages, globalArgs } = dockerfile(join(dockerDir, 'Dockerfile'));
  const stage = (name: string) => stages.find((s) => s.name === name);
  /** The stages a target is made of, its base image's first. */
  const chain = (name: string) => {
    const out: typeof stages = [];
    for (let s = stage(name); s !== undefined; s = stage(s.from)) out.unshift(s);
    return out;
  };
  const runs = (name: string) =>
    stage(name)!
      .body.filter((i) => i.op === 'RUN')
      .map((i) => i.args);

  it('compiles the workspace once, in one build stage on node:20-bookworm-slim with the pnpm of packageManager', () => {
    expect(globalArgs.NODE_IMAGE).toBe('node:20-bookworm-slim');
    const names = stages.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    // Only the build stage and the runtime base start from an image; every other stage from one of them.
    expect(stages.filter((s) => s.from === `\${NODE_IMAGE}`).map((s) => s.name)).toEqual(['build', 'runtime']);
    for (const s of stages.filter((x) => x.from !== `\${NODE_IMAGE}`)) {
      expect([s.name, names.indexOf(s.from) >= 0 && names.indexOf(s.from) < names.indexOf(s.name)]).toEqual([
        s.name,
        true,
      ]);
    }
    expect(runs('build')).toContain('pnpm install --offline --frozen-lockfile');
    expect(runs('build')).toContain('pnpm exec tsc -b');
    expect(runs('build').filter((r) => /deploy/.test(r))).toEqual([]);
    const pnpmVersion = stage('build')!
      .body.find((i) => i.op === 'ARG' && i.args.startsWith('PNPM_VERSION='))!
      .args.split('=')[1];
    expect(`pnpm@${pnpmVersion}`).toBe(packageManager);
    // Each deploy stage is the build stage plus one `pnpm deploy`, and nothing else.
    for (const pkg of ['stack', ...PACKAGES]) {
      const d = stage(`deploy-${pkg}`)!;
      expect([pkg, d.from]).toEqual([pkg, 'build']);
      expect(d.body.map((i) => `${i.op} ${i.args}`)).toEqual([
        `RUN pnpm --filter @vigil/${pkg} --prod deploy --legacy /out`,
      ]);
    }
  });

  it('has a runtime base: a non-root vigil user (uid 10001), its directories, @vigil/stack, and nothing installed', () => {
    const runtime = stage('runtime')!;
    expect(runtime.body.find((i) => i.op === 'RUN')!.args).toMatch(/useradd --system --uid 10001/);
    expect(runtime.body.filter((i) => i.op === 'RUN').length).toBe(1);
    expect(runtime.body.filter((i) => i.op === 'USER').map((i) => i.args)).toEqual(['vigil']);
    expect(runtime.body.filter((i) => i.op === 'COPY').map((i) => i.args)).toEqual([
      `--from=deploy-stack /out ${STACK_DIR}`,
    ]);
    expect(existsSync(join(root, 'packages', 'stack', stackBin))).toBe(true);
  });

  it.each(PACKAGES)('%s: a target with its deployed package and @vigil/stack, non-root, its own binary', (pkg) => {
    const target = stage(pkg)!;
    expect(chain(pkg).map((s) => s.name)).toEqual(['runtime', pkg]);
    expect(chain(pkg)[0]!.from).toBe(`\${NODE_IMAGE}`);
    const body = chain(pkg).flatMap((s) => s.body);
    // The runtime gets the deployed packages only: no sources, no workspace, no dev tools.
    expect(body.filter((i) => i.op === 'COPY').map((i) => i.args)).toEqual([
      `--from=deploy-stack /out ${STACK_DIR}`,
      `--from=deploy-${pkg} /out /app`,
    ]);
    expect(body.some((i) => i.op === 'RUN' && /pnpm|npm install/.test(i.args))).toBe(false);
    expect(target.body.filter((i) => i.op === 'RUN' || i.op === 'USER')).toEqual([]);
    expect(body.filter((i) => i.op === 'USER').map((i) => i.args)).toEqual(['vigil']);
    const entrypoint = JSON.parse(target.body.find((i) => i.op === 'ENTRYPOINT')!.args) as string[];
    const bin = (JSON.parse(read(`packages/${pkg}/package.json`)) as { bin: Record<string, string> }).bin[pkg]!;
    expect(entrypoint).toContain(`/app/${bin.replace(/^\.\//, '')}`);
    expect(existsSync(join(root, 'packages', pkg, bin))).toBe(true);
    expect(target.body.filter((i) => i.op === 'CMD').length).toBe(1);
  });

  it('keeps what the image builds itself out of the root context (.dockerignore), and nothing it copies', () => {
    const ignore = read('.dockerignore');
    expect(ignore).toMatch(/^\*\*\/node_modules$/m);
    expect(ignore).toMatch(/^\*\*\/dist$/m);
    expect(ignore).toMatch(/^\.git$/m);
    for (const kept of ['packages', 'docker', 'pnpm-lock.yaml', 'pnpm-workspace.yaml', 'package.json']) {
      expect(ignore).not.toMatch(new RegExp(`^${kept.replace('.', '\\.')}$`, 'm'));
    }
    expect(existsSync(join(dockerDir, 'Dockerfile.dockerignore'))).toBe(false);
  });

  it('each image ships the vigil binary the compose healthchecks, restart requests and schedule run', () => {
    const uses = [
      services['signal-daemon'].healthcheck.test[2],
      services['inference-server'].healthcheck.test[2],
      (JSON.parse(read('docker/guardian.json')) as { primary: { service: { restart: string[] } } }).primary.service
        .restart[1],
      (JSON.parse(stage('health-check')!.body.find((i) => i.op === 'ENTRYPOINT')!.args) as string[])[1],
    ];
    expect(uses).toEqual(Array(4).fill(VIGIL_IN_IMAGE));
    for (const pkg of PACKAGES) {
      expect(chain(pkg).flatMap((s) => s.body.filter((i) => i.op === 'COPY').map((i) => i.args))).toContain(
        `--from=deploy-stack /out ${STACK_DIR}`,
      );
    }
  });
});

// ---- the helpers the images run, with real processes --------------------------------------------

const VIGIL = join(root, 'packages', 'stack', stackBin);
const LIVENESS = [VIGIL, 'liveness'];

function run(args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((done) => {
    execFile(process.execPath, args, { encoding: 'utf8' }, (err, stdout, stderr) => {
      done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
    });
  });
}

/** An HTTP server whose answer to every POST is chosen by `mode` (changeable). */
async function fakeServer(): Promise<{ url: string; server: Server; setMode: (m: string) => void }> {
  let mode = 'ok';
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (mode === 'hang') return;
      const send = (status: number, body: string) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(body);
      };
      if (mode === '500') return send(500, '{"error":{"message":"boom"}}');
      if (mode === '429') return send(429, '{"error":{"code":"rate_limit_exceeded"}}');
      if (mode === 'loading') return send(503, '{"error":{"code":"model_loading"}}');
      if (req.url === '/api/v1/rpc') return send(200, '{"jsonrpc":"2.0","result":{"version":"0.1.0"},"id":1}');
      return send(200, '{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, server, setMode: (m) => (mode = m) };
}

/** A process that stands for the container's PID 1. */
function victim() {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  return child;
}

describe("vigil liveness (the containers' probe)", () => {
  const servers: Server[] = [];
  afterAll(() => {
    for (const s of servers) s.close();
  });

  it('passes on a real answer, a full queue or a model loading; fails on errors and silence', async () => {
    const f = await fakeServer();
    servers.push(f.server);
    const state = join(scratch, 'probe-state.json');
    const probe = (...extra: string[]) =>
      run([...LIVENESS, 'probe', '--kind', 'chat', '--url', f.url, '--model', 'tiny', '--state', state, ...extra]);
    expect(await probe()).toEqual({ code: 0, out: expect.stringMatching(/^ok: completion in \d+ ms\n$/) });
    expect((await run([...LIVENESS, 'probe', '--kind', 'rpc', '--url', f.url, '--state', state])).out).toMatch(
      /^ok: version 0\.1\.0/,
    );
    f.setMode('429');
    expect((await probe()).code).toBe(0);
    f.setMode('loading');
    expect((await probe()).code).toBe(0);
    f.setMode('500');
    expect(await probe()).toEqual({ code: 1, out: expect.stringMatching(/^failed \(1\): .*HTTP 500/) });
    f.setMode('hang');
    expect(await probe('--request-timeout', '0.3')).toEqual({
      code: 1,
      out: expect.stringMatching(/^failed \(2\): .*no answer within 0\.3 s/),
    });
    f.setMode('ok');
    expect((await probe()).code).toBe(0);
    expect(JSON.parse(readFileSync(state, 'utf8'))).toEqual({ failures: 0 });
  });

  it('ends the service after --kill-after failures in a row, so that the restart policy restarts it', async () => {
    const f = await fakeServer();
    servers.push(f.server);
    f.setMode('500');
    const pid1 = victim();
    const state = join(scratch, 'kill-state.json');
    const probe = () =>
      run([
        ...LIVENESS,
        'probe',
        '--kind',
        'chat',
        '--url',
        f.url,
        '--model',
        'tiny',
        '--state',
        state,
        '--kill-after',
        '2',
        '--pid',
        String(pid1.pid),
      ]);
    expect((await probe()).out).toMatch(/^failed \(1 of 2\)/);
    expect(pid1.exitCode === null && pid1.signalCode === null).toBe(true);
    const second = await probe();
    expect(second).toEqual({ code: 1, out: expect.stringMatching(/failed 2 times in a row.*sent SIGTERM to pid \d+/) });
    expect(await exited(pid1)).toEqual({ code: null, signal: 'SIGTERM' });
    expect(JSON.parse(readFileSync(state, 'utf8'))).toEqual({ failures: 0 });
  });

  it('carries out a restart request at the next probe and removes it', async () => {
    const f = await fakeServer();
    servers.push(f.server);
    const request = join(scratch, 'inference-server.restart');
    expect(await run([...LIVENESS, 'request-restart', request])).toEqual({
      code: 0,
      out: `restart requested: ${request}\n`,
    });
    expect(JSON.parse(readFileSync(request, 'utf8')).by).toBe('guardian');
    const pid1 = victim();
    const args = [
      ...LIVENESS,
      'probe',
      '--kind',
      'chat',
      '--url',
      f.url,
      '--model',
      'tiny',
      '--state',
      join(scratch, 'req-state.json'),
    ];
    const r = await run([...args, '--restart-request', request, '--pid', String(pid1.pid)]);
    expect(r).toEqual({ code: 1, out: expect.stringMatching(/^restart requested .*sent SIGTERM/) });
    expect(await exited(pid1)).toEqual({ code: null, signal: 'SIGTERM' });
    expect(existsSync(request)).toBe(false);
    expect((await run([...args, '--restart-request', request])).code).toBe(0);
    expect((await run([...LIVENESS, 'request-restart', join(scratch, 'no', 'such', 'dir')])).code).toBe(1);
  });

  it('refuses bad usage with exit 78', async () => {
    expect((await run(LIVENESS)).code).toBe(78);
    expect((await run([...LIVENESS, 'probe', '--kind', 'chat', '--url', 'http://127.0.0.1:1'])).code).toBe(78);
    expect((await run([...LIVENESS, 'probe', '--kind', 'smtp', '--url', 'x'])).code).toBe(78);
  });
});

describe("vigil every (the health check's schedule)", () => {
  it('runs the command at once and then every interval, and stops cleanly on SIGTERM', async () => {
    const out = join(scratch, 'every.out');
    writeFileSync(out, '');
    const t0 = Date.now();
    const child = spawn(
      process.execPath,
      [
        VIGIL,
        'every',
        '0.2',
        '--',
        process.execPath,
        '-e',
        `require('fs').appendFileSync(${JSON.stringify(out)}, Date.now() + '\\n')`,
      ],
      { stdio: 'ignore' },
    );
    // Wait for three runs (however slow the machine), then stop it.
    const starts = () => readFileSync(out, 'utf8').split('\n').filter(Boolean).map(Number);
    for (const end = Date.now() + 20_000; starts().length < 3 && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(starts().length).toBeGreaterThanOrEqual(3);
    const elapsed = Date.now() - t0;
    child.kill('SIGTERM');
    expect(await exited(child)).toEqual({ code: 0, signal: null });
    // Never more often than the interval (start to start): at most one run per 0.2 s, plus the first.
    expect(starts().length).toBeLessThanOrEqual(Math.floor(elapsed / 200) + 1);
    const bad = spawnSync(process.execPath, [VIGIL, 'every', 'soon'], { encoding: 'utf8' });
    expect(bad.status).toBe(78);
    const notANumber = spawnSync(process.execPath, [VIGIL, 'every', 'soon', '--', 'true'], { encoding: 'utf8' });
    expect(notANumber.status).toBe(78);
  });
});

describe("the status page's container, run here", () => {
  it('answers its healthcheck while it serves (exit 0) and fails it once it does not (exit 1)', async () => {
    const h = services['status-page'].healthcheck;
    // The healthcheck's own limit (the fetch's abort) is within Docker's timeout, which is within the interval.
    const seconds = (v: string) => Number(/^(\d+)s$/.exec(v)![1]);
    const [cmd, node, flag, script] = h.test as string[];
    expect([cmd, node, flag]).toEqual(['CMD', 'node', '-e']);
    const abortMs = Number(/AbortSignal\.timeout\((\d+)\)/.exec(script!)![1]);
    expect(abortMs).toBeLessThan(seconds(h.timeout) * 1000);
    expect(seconds(h.timeout)).toBeLessThan(seconds(h.interval));
    expect(h.retries).toBeGreaterThanOrEqual(2);
    expect(seconds(h.start_period)).toBeGreaterThan(0);
    // The page itself, as the image runs it, on a free port of loopback (the script's address rewritten).
    const home = join(scratch, 'status-page');
    writeSampleHistory(home, { days: 0.01, tickS: 10, healthRuns: 2, closedPort: await freePort() });
    const port = await freePort();
    const check = (): Promise<number | null> =>
      new Promise((done) => {
        const child = spawn(process.execPath, ['-e', script!.replace(`:${STATUS_PAGE.port}/`, `:${port}/`)], {
          stdio: 'ignore',
        });
        child.on('exit', (code) => done(code));
      });
    const page = spawn(
      process.execPath,
      [
        join(root, 'packages/stack/bin/vigil.js'),
        '--home',
        home,
        'status-page',
        '--listen',
        `127.0.0.1:${port}`,
        '--restart-with',
        'compose',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    page.stdout!.on('data', (d) => (out += d));
    try {
      await until('the page to listen', () => out.includes('status page on'), 30_000);
      expect(await check()).toBe(0);
    } finally {
      page.kill('SIGTERM');
      await exited(page);
    }
    expect(await check()).toBe(1);
  }, 60_000);
});

describe('docker/README.md', () => {
  it('says what was run here and what was not', () => {
    const readme = read('docker/README.md');
    expect(readme).toMatch(/^# docker\//);
    expect(readme).toMatch(/no image was built/i);
    expect(readme).toMatch(/docker compose -f docker\/compose\.yaml up/);
  });
});
