/**
 * The set-up shared by the tests that run the guardian against real processes: a scratch
 * directory per test file, a scenario directory per test, the fault servers and backends started
 * in it, and the guardian's configuration and log there. Everything is stopped and removed after
 * the file's tests.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll } from '@jest/globals';
import {
  baseConfig,
  checkedEvents,
  type FaultServer,
  faultArgv,
  killService,
  readLines,
  run,
  serviceCalls,
  serviceCommands,
  startFault,
  tmpDir,
  waitEvent,
  writeJson,
} from './helpers.js';

type Events = Record<string, any>[];
type Service = ReturnType<typeof serviceCommands>;

/** One test's directory, with what the guardian reads and writes there. */
export interface Scenario {
  readonly dir: string;
  /** The guardian's log. */
  readonly log: string;
  /** Writes the guardian's configuration (baseConfig around `port`, `over` replacing keys); its path. */
  config(port: number, over?: Record<string, unknown>): string;
  /** The log's events since `since`, every line checked against the contract. */
  events(since: number): Events;
  /** The log's events, unchecked. */
  lines(): Events;
  /** The log's events once the `n`th one named `name` is there. */
  waitEvent(name: string, n?: number, timeoutMs?: number): Promise<Events>;
  /** A fault server recording into this directory. */
  fault(name?: string, extra?: string[]): Promise<FaultServer>;
  /** The `command` manager of service.mjs running `argv` as backend `name` (not started yet). */
  service(name: string, argv: string[], waitUrl?: string): Service;
  /** The same for a fault server on `port`, ready once its model list answers. */
  faultService(name: string, port: number, extra?: string[]): Service;
  /** The operations service.mjs recorded for backend `name`. */
  calls(name: string): string[];
}

/** Runs the start command of a backend's `command` manager to completion. */
export async function startService(service: Service): Promise<void> {
  const [command, ...args] = service.start;
  await run(command!, args);
}

export function fixture(): {
  dir: string;
  onCleanup: (c: () => unknown) => void;
  scenario: (name: string) => Scenario;
} {
  const tmp = tmpDir();
  const cleanups: (() => unknown)[] = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
    tmp.cleanup();
  });

  function scenario(name: string): Scenario {
    const dir = join(tmp.dir, name);
    mkdirSync(dir, { recursive: true });
    const log = join(dir, 'guardian.log');
    const service = (backend: string, argv: string[], waitUrl?: string) => {
      cleanups.push(() => killService(dir, backend));
      return serviceCommands(dir, backend, argv, waitUrl);
    };
    return {
      dir,
      log,
      config: (port, over = {}) => writeJson(join(dir, 'g.json'), baseConfig(dir, port, over)),
      events: (since) => checkedEvents(log, since),
      lines: () => readLines(log),
      waitEvent: (event, n, timeoutMs) => waitEvent(log, event, n, timeoutMs),
      fault: async (backend = 'fault', extra = []) => {
        const s = await startFault(dir, backend, extra);
        cleanups.push(() => s.stop());
        return s;
      },
      service,
      faultService: (backend, port, extra = []) =>
        service(backend, faultArgv(dir, backend, port, extra), `http://127.0.0.1:${port}/v1/models`),
      calls: (backend) => serviceCalls(dir, backend),
    };
  }

  return { dir: tmp.dir, onCleanup: (c) => void cleanups.push(c), scenario };
}
