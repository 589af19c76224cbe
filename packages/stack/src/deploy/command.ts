/**
 * `vigil install` and `vigil uninstall` (deploy/install runs them): the flags, then flow.ts.
 * Exit codes: 0 done, 1 a command failed, 78 bad usage or configuration.
 */
import { Command } from 'commander';
import { checkOptions, DEFAULT_ACCOUNT, DEFAULT_RELAY, locations, type RawOptions } from './options.js';

const collect = (value: string, previous: string[]) => [...previous, value];

function deployCommand(name: 'install' | 'uninstall', description: string): Command {
  const cmd = new Command(name)
    .description(description)
    .exitOverride()
    .option('--platform <launchd|systemd>', 'service manager (default: launchd on macOS, systemd elsewhere)')
    .option('--prefix <dir>', 'use <dir> in place of the home directory for every default path')
    .option('--dry-run', 'print the files it would write and the commands it would run; change nothing')
    .option('--no-load', 'write the files but run no service-manager command')
    .option('--json', 'print the plan (or what was done) as one JSON object')
    .option('--node <path>', 'the node binary the services run (default: the first node on PATH)')
    .option('--root <dir>', 'the vigil checkout (default: the checkout this command belongs to)')
    .option('--account <number>', `the messaging account, E.164 (default: ${DEFAULT_ACCOUNT}, local network)`)
    .option(
      '--daemon-arg <arg>',
      'one more argument for signal-daemon (repeat), e.g. --daemon-arg=--backend',
      collect,
      [],
    )
    .option('--model <file>', 'the GGUF model (default: DATA/models/tiny.gguf, written by make-model when missing)')
    .option('--model-id <id>', 'the id the model is served under (default: the file name without .gguf)')
    .option('--inference-arg <arg>', 'one more argument for both inference servers (repeat)', collect, [])
    .option('--no-mtls', 'no certificates and no mutual-TLS listener on 127.0.0.1:1338')
    .option('--relay-listen <addr|off>', `the relay's link address (default: ${DEFAULT_RELAY}); off: no relay`)
    .option('--guardian-merge <file>', 'a JSON object merged into the guardian configuration (e.g. "alert")')
    .option('--health-merge <file>', 'a JSON object merged into the health-check configuration (e.g. "gateway")')
    .option('--config-dir <dir>', 'where guardian.json and health.json go')
    .option('--state-dir <dir>', 'the guardian state, the fallback lock, the health log')
    .option('--data-dir <dir>', 'the local network, the daemon data, models/, pki/')
    .option('--log-dir <dir>', 'every service log')
    .option('--unit-dir <dir>', 'where the plists or units go')
    .option('--linger', 'systemd: also run loginctl enable-linger, so the units run without a login')
    .addHelpText('after', '\nexit codes: 0 done, 1 a command failed, 78 bad usage or configuration')
    .action(async (raw: RawOptions) => {
      const o = checkOptions(raw, name);
      const { install, uninstall, formatResult } = await import('./flow.js');
      const loc = locations(o);
      const result = name === 'install' ? await install(o, loc) : await uninstall(o, loc);
      process.stdout.write(o.json ? `${JSON.stringify(result)}\n` : formatResult(result));
      if (result.failed > 0) process.exitCode = 1;
    });
  return cmd;
}

/** `vigil install`: renders and loads the launchd agents or systemd user units. */
export const installCommand = (): Command =>
  deployCommand(
    'install',
    "render vigil's launchd agents (macOS) or systemd user units (Linux) with this user's paths, write the " +
      "guardian's and the health check's configurations, and load the services; idempotent",
  );

/** `vigil uninstall`: unloads and removes what install wrote (never data, state or logs). */
export const uninstallCommand = (): Command =>
  deployCommand('uninstall', 'unload the services and remove what install wrote; data, state and logs are kept');
