/**
 * The guardian's options, declared once (its settings are the configuration file's keys, read with
 * `guardianConfigSchema`): every command takes `--config`; `status` also `--json`.
 */
import { defineOptions } from '@vigil/shared-types/light';

export const GUARDIAN_OPTIONS = defineOptions('guardian', {
  config: { short: '-c', arg: '<file>', help: 'the JSON configuration file', required: true },
});

export const GUARDIAN_STATUS_OPTIONS = defineOptions('guardian', {
  ...GUARDIAN_OPTIONS.specs,
  json: { help: 'print the state as one JSON object', env: false },
});
