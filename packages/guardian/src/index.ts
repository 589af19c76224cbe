/**
 * The guardian: proves every minute that the inference server really answers; restarts it,
 * rate-limits restarts, falls back to a second backend, and says when a person is needed.
 *
 * `decide` (machine.ts) is the pure state machine; `Guardian` (guardian.ts) the shell that
 * observes and acts; state-file.ts its state; loop.ts `guardian run`; `cli.ts` the command line.
 */

export { type AlertOutcome, sendAlert } from './alert.js';
export {
  type AlertConfig,
  type BackendConfig,
  type GuardianConfig,
  loadConfig,
  type PrimaryConfig,
  parseConfig,
} from './config.js';
export { ConfigFileError, NotConfiguredError, StateBusyError, StateFileError } from './errors.js';
export { Guardian, type GuardianOptions, type StatusReport } from './guardian.js';
export { checkIntegrity, type IntegrityResult, sha256File } from './integrity.js';
export { endPosition, type LogLine, type LogPosition, type LogRead, readNewLines } from './logreader.js';
export { runLoop, TickClock } from './loop.js';
export {
  type Action,
  type Alerting,
  type BusyAnswer,
  type Decision,
  decide,
  event,
  type FatalFinding,
  type GuardianEvent,
  INITIAL_STATE,
  type LockRecord,
  MACHINE_LIMITS,
  type MachineConfig,
  type MachineState,
  machineConfigOf,
  OBSERVING_ACTIONS,
  type Observation,
  type ProbeKind,
  type RootCause,
  type Step,
  type Target,
} from './machine.js';
export { GUARDIAN_OPTIONS, GUARDIAN_STATUS_OPTIONS } from './options.js';
export { classifyError, excerpt, judgeReply, type ProbeResult, Prober, type ProbeTarget, readHealth } from './probe.js';
export { freshState, parseState, STATE_VERSION, StateFile, type StateFileData } from './state-file.js';
export { VERSION } from './version.js';
