/**
 * The health check's options, declared once: the command line, the environment and `--help` come
 * from HEALTH_CHECK_OPTIONS. Light (no zod): `--help` must start fast.
 */
import { defineOptions, FlagValueError, flagParser, type OptionsOf } from '@vigil/shared-types/light';
import { BIN } from './version.js';

/** An http:// or https:// URL (a flag's value). */
function httpUrl(text: string): string {
  let url: URL | null = null;
  try {
    url = new URL(text);
  } catch {
    // said below
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:')
    throw new FlagValueError(`expected an http:// or https:// URL, got "${text}"`);
  return text;
}

/** The output switches are not read from the environment: cron, timers and people give them as flags. */
export const HEALTH_CHECK_OPTIONS = defineOptions(BIN, {
  fix: { help: 'repair what a machine can, then check again', env: false },
  json: { help: 'print one machine-readable JSON report', env: false, conflicts: ['nagios'] },
  nagios: {
    help: 'print one Nagios plugin line: VIGIL OK|WARNING|CRITICAL|UNKNOWN - summary | perfdata',
    env: false,
  },
  quiet: { help: 'print nothing (the health log is written all the same)', env: false, conflicts: ['nagios'] },
  config: { arg: '<file>', help: 'the configuration file (JSON)', defaultHelp: 'none: every default' },
  ping: {
    arg: '<url>',
    help: "a dead-man's switch: URL/start when the run starts, then URL or URL/<exit code>",
    parse: flagParser(httpUrl),
  },
});

export type Options = OptionsOf<typeof HEALTH_CHECK_OPTIONS>;
