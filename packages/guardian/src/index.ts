/**
 * The guardian: proves every minute that the inference server really answers; restarts it,
 * rate-limits restarts, falls back to a second backend, and says when a person is needed.
 *
 * `decide` (machine.ts) is the pure state machine; `Guardian` (guardian.ts) the shell that
 * observes and acts; `cli.ts` the command line.
 */

export { type AlertOutcome, sendAlert } from './alert.js';
export { type CommandResult, runCommand } from './command.js';
export {
  type AlertConfig,
  type BackendConfig,
  CONFIG_SCHEMA,
  ConfigFileError,
  EXTRA_DEFAULTS,
  type GuardianConfig,
  loadConfig,
  type PrimaryConfig,
  parseConfig,
} from './config.js';
export { acquireLock, StateBusyError, writeFileAtomic } from './files.js';
export {
  Guardian,
  type GuardianOptions,
  machineConfigOf,
  NotConfiguredError,
  parseState,
  runLoop,
  STATE_VERSION,
  type StateFileData,
  StateFileError,
  type StatusReport,
} from './guardian.js';
export { checkIntegrity, type IntegrityResult, manifestDigest, sha256File } from './integrity.js';
export { endPosition, type LogLine, type LogPosition, type LogRead, lineTime, readNewLines } from './logreader.js';
export {
  type Action,
  type Alerting,
  type Decision,
  decide,
  event,
  type FatalFinding,
  type GuardianEvent,
  INITIAL_STATE,
  type LockRecord,
  type MachineConfig,
  type MachineState,
  OBSERVING_ACTIONS,
  type Observation,
  type ProbeKind,
  type RootCause,
  type Step,
  type Target,
} from './machine.js';
export { classifyError, excerpt, judgeReply, type ProbeResult, Prober, type ProbeTarget } from './probe.js';
export { VERSION } from './version.js';
