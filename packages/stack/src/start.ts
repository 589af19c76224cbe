/**
 * `vigil start`: the whole stack on this host, on its embedded defaults (the messaging daemon on
 * the local network, the relay, the inference server on a generated tiny model, the guardian
 * watching it; the health check every --health-interval seconds as cron would run it). Prints
 * what runs where and stops everything, in order, on Ctrl-C (SIGINT), SIGTERM, SIGHUP or
 * `vigil stop`.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { removeFile } from '@vigil/shared-types/light';
import type { StackOptions } from './config.js';
import { writeServiceConfigs } from './configs.js';
import { serveControl } from './control.js';
import { StartError } from './errors.js';
import { keepLogsBounded } from './log-bound.js';
import { LOG_NAMES, logFileOf } from './logs.js';
import { binOf, type HomePaths, homePaths, NODE, rel } from './paths.js';
import { checkListeners, type Listener, relayAddress } from './ports.js';
import { makeHome, PRIVATE_UMASK, prepareModelAndCerts, stopLeftovers } from './prepare.js';
import { waitReady } from './readiness.js';
import { SERVICE_NAMES, type ServiceName, type ServiceSpec, type StackPlan, serviceSpecs } from './services.js';
import { removeStackFile } from './stackfile.js';
import { Supervisor } from './supervisor.js';

const say = (line: string) => process.stdout.write(`${line}\n`);

function listenersOf(plan: StackPlan): Listener[] {
  return [
    { flag: '--daemon-http', what: 'the daemon (HTTP)', addr: plan.daemonHttp },
    { flag: '--daemon-tcp', what: 'the daemon (TCP)', addr: plan.daemonTcp },
    { flag: '--relay', what: 'the relay', addr: plan.relay },
    { flag: '--inference', what: 'the inference server', addr: plan.inference },
    ...(plan.mtls === 'off' ? [] : [{ flag: '--mtls', what: 'the inference server (mutual TLS)', addr: plan.mtls }]),
    ...(plan.daemonMetrics === 'off'
      ? []
      : [{ flag: '--daemon-metrics', what: "the daemon's metrics", addr: plan.daemonMetrics }]),
    { flag: '--status-page', what: 'the status page', addr: plan.statusPage },
  ];
}

function logTail(file: string, lines = 5): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** The table printed once the stack runs. */
export function startTable(
  specs: Readonly<Record<ServiceName, ServiceSpec>>,
  pidOf: (name: ServiceName) => number | null,
  plan: StackPlan,
  paths: HomePaths,
): string[] {
  const rows = [
    ['service', 'pid', 'serves', 'log'],
    ...SERVICE_NAMES.map((name) => [name, String(pidOf(name) ?? '-'), specs[name].serves, rel(paths.log(name))]),
    [
      'health-check',
      '-',
      plan.healthInterval > 0 ? `every ${plan.healthInterval} s, --fix` : 'not scheduled (--health-interval 0)',
      rel(paths.healthLog),
    ],
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const home = rel(paths.home);
  return [
    '',
    ...rows.map((r) => `  ${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')}`),
    '',
    `  state:    ${home}  (guardian state and fallback lock in state/, configs guardian.json and health.json)`,
    `  check:    node packages/health-check/bin/health-check.js --config ${rel(paths.healthConfig)}`,
    `  control:  node packages/stack/bin/vigil.js --home ${home} status|logs|stop|start|restart [SERVICE]`,
    '',
  ];
}

/** The health check, as cron would run it (`--fix --quiet`); says what it did when not all was well. */
function runHealthCheck(paths: HomePaths): void {
  const child = spawn(NODE, [binOf('health-check'), '--fix', '--quiet', '--config', paths.healthConfig], {
    stdio: 'ignore',
  });
  const log = rel(paths.healthLog);
  child.on('exit', (code) => {
    if (code === 1) say(`vigil: the health check repaired something (exit 1); see ${log}`);
    else if (code === 2) say(`vigil: the health check needs you (exit 2); see ${log}`);
    else if (code !== 0 && code !== null) say(`vigil: the health check could not run (exit ${code})`);
  });
}

/**
 * Starts the stack and returns once it runs (the process then lives on until it is stopped).
 * A failure before any service started is thrown (StartError: exit 1); a service that does not
 * come up stops what was started and exits 1.
 */
export async function startStack(home: string, opts: StackOptions): Promise<void> {
  // Everything made from here on, by this process or a service (logs, databases and their -wal and
  // -shm, state, keys, sockets), is private to this user whatever the shell's umask was.
  process.umask(PRIVATE_UMASK);
  const paths = homePaths(home);
  makeHome(paths);
  const stoppedLeftovers = await stopLeftovers(paths, say);

  const { relay, note } = relayAddress(opts);
  // A process stopped just above holds its port until it has finished exiting.
  const preliminary = { ...opts, relay, relayNote: note, modelFile: '' };
  await checkListeners(listenersOf(preliminary), stoppedLeftovers > 0 ? 5000 : 0);

  const modelFile = await prepareModelAndCerts(paths, opts, say);
  const plan: StackPlan = { ...preliminary, modelFile };
  const specs = serviceSpecs(plan, paths);
  writeServiceConfigs(plan, paths);

  const supervisor = new Supervisor(specs, paths, say, { stopTimeoutMs: plan.stopTimeout * 1000 });
  let healthTimer: NodeJS.Timeout | undefined;
  const logFiles = LOG_NAMES.map((n) => logFileOf(paths, n));
  const stopBounding = keepLogsBounded(() => logFiles, plan.logMaxMib * 2 ** 20, say);
  let stopped: Promise<void> | null = null;
  const stopAll = (code: number): Promise<void> => {
    stopped ??= (async () => {
      say('vigil: stopping');
      clearInterval(healthTimer);
      stopBounding();
      await supervisor.stopAll();
      control.close(); // no new requests (one being answered, `vigil stop`'s, ends by itself)
      removeFile(paths.socket);
      removeStackFile(paths.stackFile);
      say('vigil: stopped');
      process.exitCode = code;
    })();
    return stopped;
  };
  const exitAfterStop = (code: number) => void stopAll(code).then(() => process.exit(code));

  const control = await serveControl(paths.socket, async (request) => {
    if (request.action !== 'shutdown') return supervisor.handle(request);
    await stopAll(0);
    // Nothing is left to keep this process alive once the answer is written; at worst, a second.
    setTimeout(() => process.exit(0), 1000).unref();
    return { ok: true };
  }).catch((err: Error) => {
    throw new StartError(`cannot open the control socket ${paths.socket}: ${err.message}`);
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => exitAfterStop(0));

  for (const spec of Object.values(specs)) {
    if (!spec.autostart) continue;
    if (supervisor.stopping) return; // stopped while starting (Ctrl-C, `vigil stop`)
    supervisor.start(spec.name);
    if (!(await waitReady(() => supervisor.readyProbe(spec.name), spec.readyTimeoutMs))) {
      if (supervisor.stopping) return;
      const log = paths.log(spec.name);
      process.stderr.write(
        `vigil: ${spec.name} did not come up within ${spec.readyTimeoutMs / 1000} s; its log (${log}) ends:\n${logTail(log)}\n`,
      );
      exitAfterStop(1);
      return;
    }
  }
  if (plan.healthInterval > 0) healthTimer = setInterval(() => runHealthCheck(paths), plan.healthInterval * 1000);

  for (const line of startTable(specs, (n) => supervisor.pidOf(n), plan, paths)) say(line);
  say(`vigil is running (pid ${process.pid}). Press Ctrl-C to stop.`);
}
