/**
 * The state file: the machine's state and what the shell remembers between ticks (read positions
 * in the logs, its own recent probes). JSON, 0600, written atomically whenever it changes, so that
 * a `kill -9` at any point leaves the old or the new version; validated with a schema when read
 * (a file a person edited wrongly stops the guardian with a clear message, exit 2). Its lock
 * (`<stateFile>.lock`) keeps two guardians (a `run` and an operator's `reset`, say) from updating
 * it at the same time.
 */
import { z } from '@vigil/shared-types';
import { acquireLock, LockBusyError, readTextOrNull, writeFileAtomic } from '@vigil/shared-types/node';
import { StateBusyError, StateFileError } from './errors.js';
import type { LogPosition } from './logreader.js';
import { INITIAL_STATE, type MachineState, type Step, type Target } from './machine.js';

export const STATE_VERSION = 1;

/** The state file: the machine's state and what the shell remembers between ticks. */
export interface StateFileData {
  version: typeof STATE_VERSION;
  machine: MachineState;
  /** Read positions: `primary` (its log), `access:primary`, `access:fallback`. */
  logs: Record<string, LogPosition | null>;
  /**
   * The guardian's own successful completions [start, end, backend] (Unix seconds) whose line in
   * that backend's access log has not been read yet: that line is not a client's, so not "busy".
   */
  ownProbes: [number, number, Target][];
  /** The latest success seen in either access log that was not a probe of ours. */
  lastSuccessAt: number | null;
  /** Counts for the metrics file: events by name, `alert:<channel>:<outcome>`. */
  counters: Record<string, number>;
  /** Unix seconds. */
  updatedAt: number;
}

const nowS = () => Date.now() / 1000;

/** Unix seconds a Date can hold (a time beyond it, `1e300`, is a damaged file, not a time). */
const when = z.number().min(0).max(8.64e12);
const time = when.nullable().default(null);
const target = z.enum(['primary', 'fallback']);

/** The machine's part; a key it lacks takes its initial value. */
const machineSchema = z.object({
  mode: target.default(INITIAL_STATE.mode),
  consecutive: z.number().int().min(0).default(0),
  lastFailureAt: time,
  restarts: z.array(when).default([]),
  causes: z.record(z.string(), when).default({}),
  alerting: z
    .object({
      reason: z.enum(['rate_limit', 'circuit_open', 'fallback_unavailable', 'fallback_failed']),
      since: when,
      detail: z.string().default(''),
      announced: z.boolean().default(false),
    })
    .nullable()
    .default(null),
  // A plan under way when the file was written is not resumed: the next tick plans afresh.
  plan: z
    .array(z.unknown())
    .default([])
    .transform((): Step[] => []),
  failedCommands: z.number().int().min(0).default(0),
  binaryMissing: z.boolean().default(false),
  lastProbeAt: time,
  lastOkAt: time,
  lastModelListAt: time,
  lastCanaryAt: time,
  lastIntegrityAt: time,
  graceUntil: time,
  // The busy check of a tick under way is not resumed either.
  busyAt: z
    .unknown()
    .optional()
    .transform(() => null),
  activating: z
    .object({
      pattern: z.string(),
      line: z.string().default(''),
      since: when,
      resumed: z.number().int().min(0).default(0),
    })
    .nullable()
    .default(null),
});

const positionSchema = z.object({
  dev: z.number(),
  ino: z.number(),
  offset: z.number().int().min(0),
  // Absent in files written by older versions.
  head: z.object({ bytes: z.number().int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/) }).optional(),
});

const stateSchema = z.object({
  version: z.literal(STATE_VERSION),
  machine: machineSchema.prefault({}),
  logs: z.record(z.string(), positionSchema.nullable()).default({}),
  // Entries that are not probes of ours are dropped, not refused: they only defer a busy skip.
  ownProbes: z
    .array(z.tuple([z.number(), z.number(), target]).nullable().catch(null))
    .catch([])
    .transform((a) => a.filter((p) => p !== null)),
  lastSuccessAt: z.number().nullable().catch(null),
  // Counters only feed the metrics file: a damaged entry starts again from 0, it is no reason to reset.
  counters: z.record(z.string(), z.number().min(0)).catch({}).default({}),
  updatedAt: z.number().catch(() => nowS()),
});

export function freshState(): StateFileData {
  return {
    version: STATE_VERSION,
    machine: INITIAL_STATE,
    logs: {},
    ownProbes: [],
    lastSuccessAt: null,
    counters: {},
    updatedAt: nowS(),
  };
}

/** Parses and checks a state file's text; throws StateFileError. */
export function parseState(path: string, text: string): StateFileData {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new StateFileError(path, `is not valid JSON (${(err as Error).message})`);
  }
  const r = stateSchema.safeParse(value);
  if (r.success) return r.data satisfies StateFileData;
  const version = (value as { version?: unknown } | null)?.version;
  if (typeof version === 'number' && version > STATE_VERSION) {
    throw new StateFileError(path, `was written by a newer guardian (version ${version})`, false);
  }
  if (r.error.issues.some((i) => i.path.length === 0 || i.path[0] === 'version')) {
    throw new StateFileError(path, `is not a guardian state file of version ${STATE_VERSION}`);
  }
  const keys = [...new Set(r.error.issues.map((i) => i.path.join('.')))];
  throw new StateFileError(path, `has fields of the wrong type (${keys.join(', ')})`);
}

/** The state without `updatedAt`: an unchanged state is not written again. */
function bodyOf(data: StateFileData): string {
  const { updatedAt: _, ...rest } = data;
  return JSON.stringify(rest);
}

/** One guardian's view of the state file: it reads it, and writes it only when it changed. */
export class StateFile {
  private lastSaved: string | null = null;

  constructor(readonly path: string) {}

  /** The state as the file has it, or null when there is none (no lock needed: it is written atomically). */
  peek(): StateFileData | null {
    const text = readTextOrNull(this.path);
    return text === null ? null : parseState(this.path, text);
  }

  /** The state to work on: the file's, or a fresh one when there is none. */
  read(): StateFileData {
    const data = this.peek();
    this.lastSaved = data === null ? null : bodyOf(data);
    return data ?? freshState();
  }

  /** Writes the state when it changed since it was read or last written. */
  save(data: StateFileData): void {
    const body = bodyOf(data);
    if (body === this.lastSaved) return;
    data.updatedAt = nowS();
    writeFileAtomic(this.path, `${JSON.stringify(data)}\n`);
    this.lastSaved = body;
  }

  /**
   * Takes the state's lock and returns its release. A lock whose owner is dead (a guardian killed
   * with -9), or older than `staleMs`, is taken over; a live one is waited for, at most `waitMs`,
   * then StateBusyError.
   */
  async lock(waitMs: number, staleMs: number): Promise<() => void> {
    const path = `${this.path}.lock`;
    try {
      return await acquireLock(path, { waitMs, staleMs });
    } catch (err) {
      if (err instanceof LockBusyError) throw new StateBusyError(path, err.pid);
      throw err;
    }
  }
}
