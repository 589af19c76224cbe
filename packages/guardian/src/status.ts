/** `guardian status`: the state as the state file and the lock file say (no lock needed: both are written atomically). */
import { readTextOrNull } from '@vigil/shared-types/node';
import type { GuardianConfig } from './config.js';
import { INITIAL_STATE, type MachineState, type Target } from './machine.js';
import type { StateFileData } from './state-file.js';

export interface StatusReport {
  readonly mode: Target;
  readonly agent: string;
  readonly alerting: MachineState['alerting'];
  readonly consecutive: number;
  readonly restarts: readonly number[];
  readonly causes: Readonly<Record<string, number>>;
  readonly lastProbeAt: number | null;
  readonly lastOkAt: number | null;
  readonly lastSuccessSeenAt: number | null;
  readonly binaryMissing: boolean;
  readonly lock: unknown;
  readonly stateFile: string;
  readonly lockFile: string;
  readonly updatedAt: number | null;
}

const nowS = () => Date.now() / 1000;

/** The state of `data` (the state file's, or null when there is none) and of the lock file. */
export function statusReport(config: GuardianConfig, data: StateFileData | null): StatusReport {
  const m = data?.machine ?? INITIAL_STATE;
  const lockText = readTextOrNull(config.lockFile);
  let lock: unknown = null;
  if (lockText !== null) {
    try {
      lock = JSON.parse(lockText);
    } catch {
      lock = lockText.trim();
    }
  }
  const mode: Target = lockText !== null ? 'fallback' : 'primary';
  const now = nowS();
  return {
    mode,
    agent: mode === 'fallback' ? (config.fallback?.agent ?? 'fallback') : config.primary.agent,
    alerting: m.alerting,
    consecutive: m.consecutive,
    restarts: m.restarts.filter((t) => now - t < config.restartWindowS),
    causes: Object.fromEntries(Object.entries(m.causes).filter(([, t]) => now - t < config.circuitWindowS)),
    lastProbeAt: m.lastProbeAt,
    lastOkAt: m.lastOkAt,
    lastSuccessSeenAt: data?.lastSuccessAt ?? null,
    binaryMissing: m.binaryMissing,
    lock,
    stateFile: config.stateFile,
    lockFile: config.lockFile,
    updatedAt: data?.updatedAt ?? null,
  };
}
