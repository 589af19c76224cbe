/**
 * Where things are: the workspace's binaries, and every file the stack keeps under its home
 * (`.vigil/` in the repository unless `--home` says otherwise).
 */
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (this file is packages/stack/{src,dist}/paths.*). */
export const ROOT: string = fileURLToPath(new URL('../../../', import.meta.url)).replace(/\/$/, '');
/** The Node binary every service runs under: this one. */
export const NODE: string = process.execPath;
/** The `vigil` binary itself (the service manager the guardian and the health check call). */
export const VIGIL_BIN: string = join(ROOT, 'packages', 'stack', 'bin', 'vigil.js');

/** A workspace package's binary: `packages/NAME/bin/NAME.js`. */
export const binOf = (pkg: string): string => join(ROOT, 'packages', pkg, 'bin', `${pkg}.js`);

/** The default home: `.vigil/` in the repository. */
export const DEFAULT_HOME: string = join(ROOT, '.vigil');

/** The home of `--home`, else VIGIL_HOME, else the default. */
export const homeOf = (flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string =>
  flag ?? env.VIGIL_HOME ?? DEFAULT_HOME;

/** The files of a home. */
export function homePaths(home: string) {
  const at = (...p: string[]) => join(home, ...p);
  return {
    home,
    at,
    /** Directories made (0700) on start. */
    dirs: [home, at('logs'), at('state'), at('run'), at('models'), at('pki'), at('signal-daemon')],
    /** A service's log (its stdout and stderr). */
    log: (name: string) => at('logs', `${name}.log`),
    accessLog: (name: string) => at('logs', `${name}-access.log`),
    guardianConfig: at('guardian.json'),
    healthConfig: at('health.json'),
    guardianState: at('state', 'guardian-state.json'),
    fallbackLock: at('state', 'inference-fallback.lock'),
    healthLog: at('state', 'health.log'),
    localnet: at('localnet.sqlite'),
    daemonData: at('signal-daemon'),
    tinyModel: at('models', 'tiny.gguf'),
    pki: at('pki'),
    /** The running supervisor: its pid, its services' pids and command lines. */
    stackFile: at('run', 'stack.json'),
    /** The status page's action token (0600), and its address while it runs. */
    statusToken: at('state', 'status-page.token'),
    statusAddress: at('run', 'status-page.json'),
    /** The supervisor's control socket. */
    socket: at('run', 'control.sock'),
  };
}

export type HomePaths = ReturnType<typeof homePaths>;

/** A path as short as it can be said from the current directory (absolute when outside it). */
export function rel(p: string): string {
  const r = relative(process.cwd(), p);
  return r.startsWith('..') ? p : r || '.';
}
