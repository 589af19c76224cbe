/**
 * Service managers, as the guardian and the health check drive them: the exact argv of each
 * action (pure; the caller runs it without a shell, with a timeout, and reads the exit status).
 */

export type ServiceAction = 'restart' | 'stop' | 'start';

export type ServiceManagerConfig =
  /** macOS: a launchd agent or daemon; `domain` defaults to the user's GUI domain `gui/UID`. */
  | { readonly kind: 'launchd'; readonly label: string; readonly plist?: string; readonly domain?: string }
  /** Linux: a systemd unit, of the user's manager (`--user`) or the system's. */
  | { readonly kind: 'systemd'; readonly unit: string; readonly user?: boolean }
  /** Anything else (development, CI, containers): an argv per action. */
  | {
      readonly kind: 'command';
      readonly restart?: readonly string[];
      readonly stop?: readonly string[];
      readonly start?: readonly string[];
    };

/** The argv that performs the action, or null when the configuration has none for it. */
export function serviceArgv(manager: ServiceManagerConfig, action: ServiceAction, uid: number): string[] | null {
  switch (manager.kind) {
    case 'launchd': {
      const domain = manager.domain ?? `gui/${uid}`;
      const target = `${domain}/${manager.label}`;
      if (action === 'restart') return ['launchctl', 'kickstart', '-k', target];
      if (action === 'stop') return ['launchctl', 'bootout', target];
      // start: load the job if a plist is known (bootstrap), else kick the loaded one.
      return manager.plist ? ['launchctl', 'bootstrap', domain, manager.plist] : ['launchctl', 'kickstart', target];
    }
    case 'systemd':
      return ['systemctl', ...(manager.user ? ['--user'] : []), action, manager.unit];
    case 'command': {
      const argv = manager[action];
      return argv && argv.length > 0 ? [...argv] : null;
    }
  }
}
