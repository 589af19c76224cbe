/** The values of `vigil status-page --restart-with` (no imports: the CLI's start-up reads them). */
export const RESTART_WITH = ['supervisor', 'systemd', 'launchd', 'compose', 'none'] as const;
export type RestartWith = (typeof RESTART_WITH)[number];
