/**
 * What the stack runs: each service's argv, whether the stack starts it, how to tell it is up and
 * what it serves (pure: from the options and the home's paths).
 */
import { GUARDIAN_OPTIONS } from '@vigil/guardian/options';
import { INFERENCE_SERVE_OPTIONS } from '@vigil/inference-server/options';
import type { HostPort } from '@vigil/shared-types';
import { optionArgv } from '@vigil/shared-types/light';
import { SIGNAL_DAEMON_OPTIONS } from '@vigil/signal-daemon/options';
import { TCP_RELAY_OPTIONS } from '@vigil/tcp-relay/options';
import { hp, type StackOptions } from './config.js';
import { binOf, type HomePaths, rel, VIGIL_BIN } from './paths.js';

export { isServiceName, SERVICE_NAMES, type ServiceName, STOP_ORDER } from './service-names.js';

import type { ServiceName } from './service-names.js';

/** How the supervisor tells that a service it started is up. */
export type Readiness =
  | { readonly kind: 'http'; readonly addr: HostPort; readonly path: string }
  /** What the process wrote to its log since it started matches. */
  | { readonly kind: 'log'; readonly pattern: RegExp }
  | { readonly kind: 'none' };

export interface ServiceSpec {
  readonly name: ServiceName;
  /** The arguments after `node`. */
  readonly argv: readonly string[];
  readonly autostart: boolean;
  readonly ready: Readiness;
  /** How long it may take to come up. */
  readonly readyTimeoutMs: number;
  /** What it serves, for the table printed on start. */
  readonly serves: string;
}

/** The options with every address decided (the relay's default depends on the host). */
export interface StackPlan extends StackOptions {
  readonly relay: HostPort;
  /** Said after the relay's address in the table, when it was chosen for the operator. */
  readonly relayNote: string;
  /** The model file served. */
  readonly modelFile: string;
}

/**
 * The argv of each service comes from its own option table (`optionArgv`): a value equal to the
 * service's default is not passed, so each default is written once, in that table.
 */
function inferenceArgv(plan: StackPlan, paths: HomePaths, name: string, extra: readonly string[]): string[] {
  const tls =
    plan.mtls === 'off'
      ? { mtls: null }
      : {
          mtls: plan.mtls,
          tlsCert: `${paths.pki}/server.pem`,
          tlsKey: `${paths.pki}/server-key.pem`,
          tlsCa: `${paths.pki}/ca.pem`,
        };
  return [
    binOf('inference-server'),
    'serve',
    ...optionArgv(INFERENCE_SERVE_OPTIONS, {
      model: plan.modelFile,
      modelIds: [plan.modelId],
      http: plan.inference,
      ...tls,
      threads: plan.threads,
      accessLog: paths.accessLog(name),
    }),
    ...extra,
  ];
}

function daemonArgv(plan: StackPlan, paths: HomePaths): string[] {
  return [
    binOf('signal-daemon'),
    ...optionArgv(SIGNAL_DAEMON_OPTIONS, {
      account: plan.account,
      backend: plan.backend,
      signalCliProgram: plan.signalCli,
      signalCliConfigDir: plan.signalCliConfig,
      http: plan.daemonHttp,
      tcp: plan.daemonTcp,
      metrics: plan.daemonMetrics === 'off' ? undefined : plan.daemonMetrics,
      dataDir: paths.daemonData,
      localnet: paths.localnet,
    }),
  ];
}

/** Every service of the stack, in start order. */
export function serviceSpecs(plan: StackPlan, paths: HomePaths): Record<ServiceName, ServiceSpec> {
  const mtls = plan.mtls === 'off' ? '' : `, mutual TLS ${hp(plan.mtls)}`;
  const inferenceReady: Readiness = { kind: 'http', addr: plan.inference, path: '/health' };
  return {
    'signal-daemon': {
      name: 'signal-daemon',
      argv: daemonArgv(plan, paths),
      autostart: true,
      ready: { kind: 'http', addr: plan.daemonHttp, path: '/api/v1/check' },
      readyTimeoutMs: 20_000,
      serves: `JSON-RPC http://${hp(plan.daemonHttp)}/api/v1/rpc, events /api/v1/events; tcp ${hp(plan.daemonTcp)}${plan.daemonMetrics === 'off' ? '' : `; metrics http://${hp(plan.daemonMetrics)}/metrics`}`,
    },
    'tcp-relay': {
      name: 'tcp-relay',
      argv: [binOf('tcp-relay'), ...optionArgv(TCP_RELAY_OPTIONS, { listen: plan.relay, target: plan.daemonTcp })],
      autostart: true,
      ready: { kind: 'log', pattern: /"msg":"(listening|listen address not on this host yet)/ },
      readyTimeoutMs: 20_000,
      serves: `${hp(plan.relay)} → ${hp(plan.daemonTcp)}${plan.relayNote}`,
    },
    'inference-server': {
      name: 'inference-server',
      argv: inferenceArgv(plan, paths, 'inference-server', []),
      autostart: true,
      ready: inferenceReady,
      readyTimeoutMs: 120_000,
      serves: `http://${hp(plan.inference)}/v1${mtls} (model "${plan.modelId}")`,
    },
    'inference-fallback': {
      name: 'inference-fallback',
      argv: inferenceArgv(plan, paths, 'inference-fallback', ['--gpu', 'off']),
      autostart: false,
      ready: inferenceReady,
      readyTimeoutMs: 120_000,
      serves: 'the same addresses, CPU only (started by the guardian on fallback)',
    },
    guardian: {
      name: 'guardian',
      argv: [binOf('guardian'), 'run', ...optionArgv(GUARDIAN_OPTIONS, { config: paths.guardianConfig })],
      autostart: true,
      ready: { kind: 'none' },
      readyTimeoutMs: 20_000,
      serves: `a real completion every ${plan.guardianInterval} s; events ${rel(paths.log('guardian'))}`,
    },
    'status-page': {
      name: 'status-page',
      argv: [
        VIGIL_BIN,
        '--home',
        paths.home,
        'status-page',
        '--listen',
        hp(plan.statusPage),
        ...(plan.daemonMetrics === 'off' ? [] : ['--daemon-metrics', hp(plan.daemonMetrics)]),
      ],
      autostart: true,
      ready: { kind: 'http', addr: plan.statusPage, path: '/api/status' },
      readyTimeoutMs: 20_000,
      serves: `http://${hp(plan.statusPage)}/ (actions: token in ${rel(paths.statusToken)})`,
    },
  };
}
