/**
 * The files `vigil install` writes, rendered in memory from the templates in `deploy/launchd/`
 * and `deploy/systemd/`: `@NAME@` placeholders replaced (escaped for XML, for a unit file, or as
 * JSON strings), `@LIST@` placeholders expanded to one element or word per item.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ConfigError, guardianConfigSchema, healthConfigSchema, validateConfig } from '@vigil/shared-types';
import {
  BINARIES,
  CHECKOUT,
  type InstallOptions,
  type Locations,
  type Platform,
  SERVICES,
  type ServiceDef,
} from './options.js';

type Values = Readonly<Record<string, string>>;
type Lists = Readonly<Record<string, readonly string[]>>;
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** A file install writes: a service's plist or unit, or one of the two configurations. */
export interface RenderedFile {
  readonly path: string;
  readonly mode: number;
  readonly content: string;
  readonly service?: ServiceDef;
  readonly config?: 'guardian' | 'health';
}

export interface Rendered {
  readonly files: RenderedFile[];
  readonly model: string;
  readonly modelId: string;
  /** No --model was given: the default model, written by make-model when missing. */
  readonly defaultModel: boolean;
}

const PLACEHOLDER = /@([A-Z_]+)@/g;

function substitute(text: string, values: Values, escapeValue: (value: string, name: string) => string, where: string) {
  return text.replace(PLACEHOLDER, (_, name: string) => {
    const value = values[name];
    if (typeof value !== 'string') throw new Error(`${where}: unknown placeholder @${name}@`);
    return escapeValue(value, name);
  });
}

const xmlEscape = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A launchd plist: `<string>@LIST@</string>` lines expand to one element per item. */
export function renderPlist(template: string, values: Values, lists: Lists, where: string): string {
  const lines: string[] = [];
  for (const line of template.split('\n')) {
    const m = /^(\s*)<string>@([A-Z_]+)@<\/string>$/.exec(line);
    const items = m ? lists[m[2]!] : undefined;
    if (m && items !== undefined) {
      for (const item of items) lines.push(`${m[1]}<string>${xmlEscape(item)}</string>`);
    } else {
      lines.push(substitute(line, values, xmlEscape, where));
    }
  }
  return lines.join('\n');
}

/** A value placed inside a systemd setting: paths and names, never split or expanded. */
function systemdScalar(value: string, name: string): string {
  if (/[\s"'\\$;]/.test(value) || /\p{Cc}/u.test(value)) {
    throw new ConfigError(
      `@${name}@ = ${JSON.stringify(value)}: systemd unit files cannot carry whitespace, quotes, backslashes, ` +
        '$ or ; in this position; choose a path without them',
    );
  }
  return value.replace(/%/g, '%%');
}

/** One argument of an ExecStart line, quoted when it needs to be. */
function systemdArg(arg: string): string {
  if (/\p{Cc}/u.test(arg)) throw new ConfigError(`argument ${JSON.stringify(arg)} holds a control character`);
  const escaped = arg.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return escaped;
  return `"${escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** A systemd unit: a ` @LIST@` word expands to the quoted items. */
export function renderUnit(template: string, values: Values, lists: Lists, where: string): string {
  let text = template;
  for (const [name, items] of Object.entries(lists)) {
    const words = items.map((a) => ` ${systemdArg(a)}`).join('');
    text = text.replaceAll(` @${name}@`, () => words);
  }
  return substitute(text, values, systemdScalar, where);
}

/** A JSON configuration: an array element "@LIST@" expands to the items; strings substituted. */
export function renderJson(template: string, values: Values, lists: Lists, where: string): JsonObject {
  const walk = (node: Json): Json => {
    if (typeof node === 'string') return substitute(node, values, (s) => s, where);
    if (Array.isArray(node)) {
      return node.flatMap((item): Json[] => {
        const m = typeof item === 'string' ? /^@([A-Z_]+)@$/.exec(item) : null;
        const items = m ? lists[m[1]!] : undefined;
        return items !== undefined ? [...items] : [walk(item)];
      });
    }
    if (isPlainObject(node)) return Object.fromEntries(Object.entries(node).map(([k, x]) => [k, walk(x)]));
    return node;
  };
  return walk(JSON.parse(template) as Json) as JsonObject;
}

const isPlainObject = (x: unknown): x is JsonObject => x !== null && typeof x === 'object' && !Array.isArray(x);

/** Deep merge of objects; arrays and scalars of `extra` replace. */
export function merge(base: JsonObject, extra: JsonObject): JsonObject {
  const out: JsonObject = { ...base };
  for (const [k, v] of Object.entries(extra)) {
    const old = out[k];
    out[k] = isPlainObject(v) && isPlainObject(old) ? merge(old, v) : v;
  }
  return out;
}

function readMerge(file: string, flag: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(`--${flag} ${file}: ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  if (!isPlainObject(value)) throw new ConfigError(`--${flag} ${file}: expected a JSON object`);
  return value;
}

const template = (platform: Platform, name: string) => readFileSync(join(CHECKOUT, 'deploy', platform, name), 'utf8');
const json = (value: Json) => `${JSON.stringify(value, null, 2)}\n`;

/** The files install writes, with their rendered contents. */
export function renderAll(o: InstallOptions, loc: Locations): Rendered {
  const bin = (name: string) => join(o.root, 'packages', name, 'bin', `${name}.js`);
  for (const name of BINARIES) {
    if (!existsSync(bin(name))) {
      throw new ConfigError(`${bin(name)} does not exist: --root must be a vigil checkout (got ${o.root})`);
    }
  }
  const model = o.model ?? join(loc.data, 'models', 'tiny.gguf');
  const modelId = o.modelId ?? basename(model).replace(/\.gguf$/i, '');
  const values: Values = {
    NODE: o.node,
    VIGIL_ROOT: o.root,
    ACCOUNT: o.account,
    MODEL: model,
    MODEL_ID: modelId,
    STATE: loc.state,
    LOGS: loc.logs,
    DATA: loc.data,
    CONFIG: loc.config,
    LAUNCH_AGENTS: loc.units,
    RELAY_LISTEN: o.relayListen,
  };
  const tls = o.mtls
    ? [
        '--tls-cert',
        join(loc.pki, 'server.pem'),
        '--tls-key',
        join(loc.pki, 'server-key.pem'),
        '--tls-ca',
        join(loc.pki, 'ca.pem'),
      ]
    : [];
  const lists: Lists = { DAEMON_ARGS: o.daemonArgs, INFERENCE_ARGS: [...tls, ...o.inferenceArgs] };
  const files: RenderedFile[] = [];
  const services = SERVICES.filter((s) => !(s.relay && o.relayListen === 'off'));
  for (const s of services) {
    if (o.platform === 'launchd') {
      const name = `${s.label}.plist`;
      // The fallback lives outside LaunchAgents: launchd loads it only when the guardian does.
      const path = s.fallback ? join(loc.config, 'launchd', name) : join(loc.units, name);
      files.push({
        path,
        mode: 0o644,
        service: s,
        content: renderPlist(template('launchd', name), values, lists, name),
      });
    } else {
      for (const name of [s.unit, ...(s.timer ? [s.timer] : [])]) {
        const content = renderUnit(template('systemd', name), values, lists, name);
        files.push({ path: join(loc.units, name), mode: 0o644, service: s, content });
      }
    }
  }
  let guardian = renderJson(template(o.platform, 'guardian.json'), values, lists, 'guardian.json');
  if (o.guardianMerge) guardian = merge(guardian, readMerge(o.guardianMerge, 'guardian-merge'));
  let health = renderJson(template(o.platform, 'health.json'), values, lists, 'health.json');
  if (o.relayListen === 'off') delete health.relay;
  if (o.healthMerge) health = merge(health, readMerge(o.healthMerge, 'health-merge'));
  files.push(
    { path: join(loc.config, 'guardian.json'), mode: 0o600, config: 'guardian', content: json(guardian) },
    { path: join(loc.config, 'health.json'), mode: 0o600, config: 'health', content: json(health) },
  );
  return { files, model, modelId, defaultModel: o.model === undefined };
}

/**
 * Validates the rendered configurations with the schemas the guardian and the health check read
 * them with (declared once, in shared-types). Returns the files it validated.
 */
export function validateConfigs(files: readonly RenderedFile[]): string[] {
  const checked: string[] = [];
  for (const f of files) {
    if (!f.config) continue;
    const schema = f.config === 'guardian' ? guardianConfigSchema() : healthConfigSchema(dirname(f.path));
    try {
      validateConfig(JSON.parse(f.content), schema, f.path);
    } catch (err) {
      throw new ConfigError(`${f.path} would not be a valid configuration: ${(err as Error).message}`);
    }
    checked.push(f.path);
  }
  return checked;
}
