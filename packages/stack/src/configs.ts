/**
 * The guardian's and the health check's configurations for this stack (guardian.json and
 * health.json under the home, rewritten on each start). Their service manager is `vigil` itself:
 * `vigil --home HOME restart|stop|start SERVICE` through the supervisor's control socket.
 */
import type { ServiceManagerConfig } from '@vigil/shared-types';
import { writeFileAtomic } from '@vigil/shared-types/node';
import { hp } from './config.js';
import { binOf, type HomePaths, NODE, VIGIL_BIN } from './paths.js';
import type { ServiceName, StackPlan } from './services.js';

/** The `command` service manager of one of the stack's services. */
export function managerOf(paths: HomePaths, service: ServiceName): ServiceManagerConfig {
  const vigil = (action: string) => [NODE, VIGIL_BIN, '--home', paths.home, action, service];
  return { kind: 'command', restart: vigil('restart'), stop: vigil('stop'), start: vigil('start') };
}

/** The keys of the guardian's configuration this stack sets (the rest keep the guardian's defaults). */
export interface StackGuardianConfig {
  readonly intervalS: number;
  readonly stateFile: string;
  readonly lockFile: string;
  readonly logFile: string;
  readonly primary: {
    readonly agent: string;
    readonly http: string;
    readonly model: string;
    readonly service: ServiceManagerConfig;
    readonly accessLog: string;
    readonly log: string;
    readonly binary: string;
    readonly standalone: readonly string[];
  };
  readonly fallback: {
    readonly agent: string;
    readonly http: string;
    readonly model: string;
    readonly service: ServiceManagerConfig;
    readonly accessLog: string;
  };
}

/** The keys of the health check's configuration this stack sets. */
export interface StackHealthConfig {
  readonly daemon: {
    readonly http: string;
    readonly processMatch: readonly string[];
    readonly service: ServiceManagerConfig;
    readonly log: string;
  };
  readonly relay: { readonly link: string; readonly service: ServiceManagerConfig };
  readonly healthLog: string;
}

export function guardianConfigOf(plan: StackPlan, paths: HomePaths): StackGuardianConfig {
  return {
    intervalS: plan.guardianInterval,
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

export function healthConfigOf(plan: StackPlan, paths: HomePaths): StackHealthConfig {
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
  };
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** Writes guardian.json and health.json (atomically, 0600). */
export function writeServiceConfigs(plan: StackPlan, paths: HomePaths): void {
  writeFileAtomic(paths.guardianConfig, json(guardianConfigOf(plan, paths)));
  writeFileAtomic(paths.healthConfig, json(healthConfigOf(plan, paths)));
}
