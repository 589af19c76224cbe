import { parseListen, SERVICE_LOG_LEVELS } from '@vigil/shared-types';
import {
  collectFlag,
  createServiceLogger,
  envOption,
  flagParser,
  intFlag,
  listFlag,
  runCli,
  secondsFlag,
  serviceNotifier,
  stopOnSignals,
} from '@vigil/shared-types/node';
import { Command, Option } from 'commander';
import winston from 'winston';
import { DEFAULTS, MIN_LOCALNET_RETENTION_HOURS } from './config.js';
import { start } from './daemon.js';
import { VERSION } from './version.js';

const BIN = 'signal-daemon';

const listenAddr = flagParser((text) => parseListen(text));
const opt = (flags: string, description: string) => envOption(BIN, new Option(flags, description));

const program = new Command(BIN)
  .description('Serve one messaging account over JSON-RPC (HTTP and TCP) with Server-Sent Events of incoming messages.')
  .version(VERSION, '-V, --version', 'print the version and exit')
  .helpOption('-h, --help', 'print this help and exit')
  .addOption(opt('-a, --account <number>', 'the account to serve, E.164 (e.g. +15550000001)').makeOptionMandatory())
  .addOption(
    opt('--backend <kind>', 'messaging network: local (embedded) or signal-cli (real Signal)')
      .choices(['local', 'signal-cli'])
      .default('local'),
  )
  .addOption(opt('--signal-cli <path>', 'the signal-cli program (signal-cli backend)').default('signal-cli'))
  .addOption(opt('--signal-cli-config <dir>', "signal-cli's --config directory (default: signal-cli's own)"))
  .addOption(
    opt('--signal-cli-arg <arg>', 'one more argument for signal-cli before jsonRpc (repeatable)').argParser(
      collectFlag,
    ),
  )
  .addOption(
    opt('--call-timeout <s>', 'signal-cli backend: a call not answered in this time fails with -3')
      .argParser(intFlag(1))
      .default(DEFAULTS.signalCli.callTimeoutMs / 1000),
  )
  .addOption(
    opt('--http <addr>', 'HTTP listener HOST:PORT, or off')
      .argParser(listenAddr)
      .default(DEFAULTS.http, '127.0.0.1:8080'),
  )
  .addOption(
    opt('--tcp <addr>', 'TCP listener HOST:PORT, or off').argParser(listenAddr).default(DEFAULTS.tcp, '127.0.0.1:7583'),
  )
  .addOption(opt('--metrics <addr>', 'Prometheus metrics listener HOST:PORT (default: off)').argParser(listenAddr))
  .addOption(opt('--data-dir <dir>', 'per-account state (default: $XDG_DATA_HOME/vigil/signal-daemon/ACCOUNT)'))
  .addOption(opt('--localnet <file>', 'the local network file (default: $XDG_DATA_HOME/vigil/localnet.sqlite)'))
  .addOption(
    opt(
      '--receive-mode <mode>',
      'on-start: every TCP connection gets receive notifications; manual: after subscribeReceive',
    )
      .choices(['on-start', 'manual'])
      .default('on-start'),
  )
  .addOption(
    opt('--max-request-bytes <n>', 'largest HTTP body or TCP line')
      .argParser(intFlag(64))
      .default(DEFAULTS.maxRequestBytes),
  )
  .addOption(
    opt('--max-batch <n>', 'most requests in one JSON-RPC batch').argParser(intFlag(1)).default(DEFAULTS.maxBatch),
  )
  .addOption(
    opt(
      '--allow-origin <origin>',
      'a web origin (scheme://host[:port]) whose pages may call the RPC and events paths (repeatable; default: none)',
    ).argParser(collectFlag),
  )
  .addOption(opt('--allow-non-loopback', 'allow listening on addresses other than loopback'))
  .addOption(opt('--profile-name <name>', 'the name other accounts see (default: the number)'))
  .addOption(
    opt('--retention-hours <n>', 'keep incoming messages for SSE replay this long')
      .argParser(intFlag(0))
      .default(DEFAULTS.retentionHours),
  )
  .addOption(
    opt('--retention-messages <n>', 'and at most this many').argParser(intFlag(1)).default(DEFAULTS.retentionMessages),
  )
  .addOption(
    opt('--retention-bytes <n>', 'and at most this many bytes of messages (the oldest go first)')
      .argParser(intFlag(1024))
      .default(DEFAULTS.retentionBytes),
  )
  .addOption(
    opt(
      '--localnet-retention-hours <n>',
      'local network: keep records of sent messages, mail nobody picked up and attachments this long',
    )
      .argParser(
        secondsFlag(
          MIN_LOCALNET_RETENTION_HOURS,
          `expected a number of hours of at least ${MIN_LOCALNET_RETENTION_HOURS}`,
        ),
      )
      .default(DEFAULTS.localnetRetentionHours),
  )
  .addOption(
    opt('--synchronous <mode>', 'normal: commits survive a crash of the process; full: also a power cut (slower)')
      .choices(['normal', 'full'])
      .default(DEFAULTS.synchronous),
  )
  .addOption(
    opt('--hold <on|off>', 'give what arrived while no consumer was connected to the next one that connects')
      .choices(['on', 'off'])
      .default('on'),
  )
  .addOption(
    opt('--hold-hours <n>', 'held messages older than this are not given')
      .argParser(intFlag(0))
      .default(DEFAULTS.holdHours),
  )
  .addOption(
    opt('--hold-messages <n>', 'at most this many of the newest held messages are given')
      .argParser(intFlag(1))
      .default(DEFAULTS.holdMessages),
  )
  .addOption(
    opt('--hold-bytes <n>', 'at most this many bytes of the newest held messages are given')
      .argParser(intFlag(1024))
      .default(DEFAULTS.holdBytes),
  )
  .addOption(
    opt(
      '--consumer <name>',
      'a consumer name an SSE stream (?consumer=) or subscribeReceive may give, besides sse, tcp and relay (repeatable)',
    ).argParser(collectFlag),
  )
  .addOption(
    opt(
      '--relay-source <addr>',
      'TCP connections from this source address are the relay consumer (repeatable; default: 127.0.0.2)',
    ).argParser(collectFlag),
  )
  .addOption(
    opt('--link-timeout <s>', 'how long finishLink waits for a primary device')
      .argParser(intFlag(1))
      .default(DEFAULTS.linkTimeoutMs / 1000),
  )
  .addOption(
    opt('--shutdown-grace <s>', 'on SIGTERM, how long calls under way may take to finish')
      .argParser(intFlag(0))
      .default(DEFAULTS.shutdownGraceMs / 1000),
  )
  .addOption(
    opt('--max-connections <n>', 'most TCP connections, and most SSE streams')
      .argParser(intFlag(1))
      .default(DEFAULTS.maxConnections),
  )
  .addOption(
    opt(
      '--max-connections-per-source <n>',
      'most TCP connections from one source address (default: 256, at most half of --max-connections)',
    ).argParser(intFlag(1)),
  )
  .addOption(
    opt(
      '--tcp-idle-timeout <s>',
      'close a TCP connection that receives nothing and sends no request this long; 0: never',
    )
      .argParser(secondsFlag(0))
      .default(DEFAULTS.tcpIdleTimeoutMs / 1000),
  )
  .addOption(
    opt(
      '--attachment-dir <dir>',
      'attachment file paths must lie in this directory (repeatable; default: anywhere)',
    ).argParser(collectFlag),
  )
  .addOption(opt('--log-level <level>', 'error, warn, info or debug').choices(SERVICE_LOG_LEVELS).default('info'))
  .addOption(opt('--log-file <file>', 'append the JSON log here instead of stdout'))
  .exitOverride()
  .action(async (o) => {
    const logger = createServiceLogger(winston, { level: o.logLevel, file: o.logFile, service: BIN });
    // The handlers are in place before `listening` is logged: a SIGTERM sent as soon as a
    // supervisor reads that line stops the daemon cleanly (exit 0) instead of killing it.
    let started: Promise<{ close(): Promise<void> }> | undefined;
    // systemd's Type=notify (or the dev supervisor): READY=1 once both listeners serve; the watchdog
    // is fed while the event loop turns.
    const notifier = serviceNotifier({ warn: (m) => logger.warn(m) });
    stopOnSignals({ close: async () => (await started)?.close() }, logger, notifier);
    started = start({
      account: o.account,
      backend: o.backend,
      http: o.http,
      tcp: o.tcp,
      metrics: o.metrics ?? null,
      dataDir: o.dataDir,
      localnet: o.localnet,
      receiveMode: o.receiveMode,
      maxRequestBytes: o.maxRequestBytes,
      maxBatch: o.maxBatch,
      allowOrigins: listFlag(program, 'allowOrigin'),
      allowNonLoopback: o.allowNonLoopback === true,
      profileName: o.profileName,
      retentionHours: o.retentionHours,
      retentionMessages: o.retentionMessages,
      localnetRetentionHours: o.localnetRetentionHours,
      synchronous: o.synchronous,
      hold: o.hold === 'on',
      holdHours: o.holdHours,
      holdMessages: o.holdMessages,
      holdBytes: o.holdBytes,
      retentionBytes: o.retentionBytes,
      consumers: listFlag(program, 'consumer'),
      relaySources: o.relaySource === undefined ? undefined : listFlag(program, 'relaySource'),
      linkTimeoutMs: o.linkTimeout * 1000,
      shutdownGraceMs: o.shutdownGrace * 1000,
      maxConnections: o.maxConnections,
      maxConnectionsPerSource: o.maxConnectionsPerSource,
      tcpIdleTimeoutMs: Math.round(o.tcpIdleTimeout * 1000),
      attachmentDirs: listFlag(program, 'attachmentDir'),
      signalCli: {
        program: o.signalCli,
        configDir: o.signalCliConfig,
        extraArgs: listFlag(program, 'signalCliArg'),
        callTimeoutMs: o.callTimeout * 1000,
      },
      logger,
    });
    await started;
    notifier.ready(`serving ${o.account}`);
  });

await runCli(BIN, () => program.parseAsync(process.argv));
