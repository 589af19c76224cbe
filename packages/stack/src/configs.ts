/**
 * The guardian's and the health check's configurations for this stack (guardian.json and
 * health.json under the home, rewritten on each start). Their service manager is `vigil` itself:
 * `vigil --home HOME restart|stop|start SERVICE` through the supervisor's control socket.
 */
import type { GuardianConfigFile, HealthConfigFile, ServiceManagerFile } from '@vigil/shared-types';
import { writeFileAtomic } from '@vigil/shared-types/node';
import { hp } from './config.js';
import { binOf, type HomePaths, NODE, VIGIL_BIN } from './paths.js';
import type { ServiceName, StackPlan } from './services.js';

/** The `command` service manager of one of the stack's services. */
export function managerOf(paths: HomePaths, service: ServiceName): ServiceManagerFile {
  const vigil = (action: string) => [NODE, VIGIL_BIN, '--home', paths.home, action, service];
  return { kind: 'command', restart: vigil('restart'), stop: vigil('stop'), start: vigil('start') };
}

/**
 * How long a `vigil restart|stop SERVICE` may take: the supervisor's stop timeout (SIGKILL after
 * it), then a new process started; with room for a loaded host.
 */
export const serviceCommandTimeoutS = (plan: StackPlan): number => Math.max(30, plan.stopTimeout + 20);

export function guardianConfigOf(plan: StackPlan, paths: HomePaths): GuardianConfigFile {
  return {
    intervalS: plan.guardianInterval,
    commandTimeoutS: serviceCommandTimeoutS(plan),
    stateFile: paths.guardianState,
    lockFile: paths.fallbackLock,
    logFile: paths.log('guardian'),
    primary: {
      agent: 'inference-server',
      http: hp(plan.inference),
      model: plan.modelId,
      service: managerOf(paths, 'inference-server'),
      accessLog: paths.accessLog('inference-server'),
      log: paths.log('inference-server'),
      binary: binOf('inference-server'),
      standalone: [NODE, binOf('inference-server'), '--version'],
    },
    fallback: {
      agent: 'inference-fallback',
      http: hp(plan.inference),
      model: plan.modelId,
      service: managerOf(paths, 'inference-fallback'),
      accessLog: paths.accessLog('inference-fallback'),
    },
  };
}

export function healthConfigOf(plan: StackPlan, paths: HomePaths): HealthConfigFile {
  return {
    daemon: {
      http: hp(plan.daemonHttp),
      // This stack's daemon: its network file and its account (other accounts may share the file).
      processMatch: [paths.localnet, plan.account],
      service: managerOf(paths, 'signal-daemon'),
      log: paths.log('signal-daemon'),
    },
    relay: { link: hp(plan.relay), service: managerOf(paths, 'tcp-relay') },
    healthLog: paths.healthLog,
    // A repair is a `vigil restart`: the stop timeout, then a start.
    timeouts: {
      fixMs: Math.round((plan.stopTimeout + 10) * 1000),
      runMs: Math.round(Math.max(30, 2 * (plan.stopTimeout + 10)) * 1000),
    },
  };
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** Writes guardian.json and health.json (atomically, 0600). */
export function writeServiceConfigs(plan: StackPlan, paths: HomePaths): void {
  writeFileAtomic(paths.guardianConfig, json(guardianConfigOf(plan, paths)));
  writeFileAtomic(paths.healthConfig, json(healthConfigOf(plan, paths)));
}
