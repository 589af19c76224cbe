/**
 * The options of the tools `make-model`, `certs`, `manifest` and `keygen`, each declared once
 * (their variables are INFERENCE_SERVER_<COMMAND>_<FLAG>); `serve`'s are in options.ts.
 */
import { defineOptions, intFlag } from '@vigil/shared-types/light';
import { PRESET_NAMES, PRESETS, parameterCount, WEIGHT_TYPES } from './gguf/index.js';

/** The command-line program's name: its env variables are INFERENCE_SERVER_…. */
export const BIN = 'inference-server';

function fmtParams(n: number): string {
  return n >= 1e9 ? `${(n / 1e9).toFixed(1)}B` : n >= 1e6 ? `${Math.round(n / 1e6)}M` : `${Math.round(n / 1e3)}K`;
}

export const MAKE_MODEL_OPTIONS = defineOptions(
  BIN,
  {
    out: { short: '-o', arg: '<file>', help: 'the GGUF file to write', required: true },
    preset: {
      arg: '<name>',
      help: `model size: ${PRESET_NAMES.map((p) => `${p} (${fmtParams(parameterCount(PRESETS[p]))})`).join(', ')}`,
      choices: PRESET_NAMES,
      default: 'tiny',
    },
    seed: { arg: '<n>', help: 'seed of the pseudo-random weights', parse: intFlag(0), default: 1 },
    type: { arg: '<type>', help: 'weight type', choices: WEIGHT_TYPES, default: 'f16' },
    'end-answers': { help: 'a model that ends every answer at once (agent smoke tests)' },
    force: { help: 'replace the file if it exists' },
  },
  'make-model',
);

export const CERTS_OPTIONS = defineOptions(
  BIN,
  {
    out: { short: '-o', arg: '<dir>', help: 'directory for the PEM files (created 0700)', required: true },
    days: { arg: '<n>', help: 'validity in days', parse: intFlag(1), default: 825 },
    host: {
      arg: '<name>',
      key: 'hosts',
      help: 'another name or address for the server certificate (repeatable)',
      repeatable: true,
    },
    'client-name': { arg: '<cn>', help: "the client certificate's common name", default: 'vigil-client' },
    force: { help: 'replace existing files' },
  },
  'certs',
);

export const MANIFEST_OPTIONS = defineOptions(
  BIN,
  {
    model: {
      short: '-m',
      arg: '<file>',
      key: 'models',
      help: 'model file to list (repeatable)',
      repeatable: true,
      required: true,
    },
    out: { short: '-o', arg: '<file>', help: 'the manifest to write', required: true },
    sign: { arg: '<keyfile>', help: 'sign with this ed25519 private key (PEM; see keygen)' },
  },
  'manifest',
);

export const KEYGEN_OPTIONS = defineOptions(
  BIN,
  {
    out: { short: '-o', arg: '<dir>', help: 'directory for the two PEM files', required: true },
    force: { help: 'replace existing files' },
  },
  'keygen',
);
