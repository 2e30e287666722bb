/**
 * The `audio-proxy` command: the one host of the library that decides to exit the process.
 *
 *   audio-proxy serve [--host IP] [--port N]    run with the AP_* environment (production)
 *   audio-proxy demo [--port N]                 run on 127.0.0.1:4000 over a generated library
 *   audio-proxy inspect [--inspector-port N] [--inspector-host IP]   the demo, streamed to a relay
 *   audio-proxy sign [--encoded] <path>         print the signed path (the first AP_KEY/AP_SALT pair)
 *   audio-proxy --version | --help | <command> --help
 *
 * ## Invariants
 * - **`--help`/`-h` has no side effects**, for every command and at the top: usage on stdout,
 *   exit 0, nothing read, bound or generated. It wins over every other argument.
 * - **Arguments are parsed strictly** (`node:util` `parseArgs`): an unknown option, a missing
 *   value, a stray positional or an unknown command is refused by name on stderr with exit 2.
 * - **A flag sits beside its variable**: `serve --host` is `AP_BIND`, `--port` is `AP_PORT`
 *   (the flag wins); both go through the config loader's own validation.
 * - **Boot failures are one line**, no stack (unless `AP_LOG_LEVEL` is `debug` or `trace`), exit
 *   1: a busy port (`ListenError`), an unusable variant store (`ERR_STORE_BOOT`), anything else
 *   thrown before the proxy listens. Configuration errors exit 2 and name every variable.
 * - **The library never exits; this file does**: a fatal internal failure reaches `onFatal`
 *   after the proxy has closed, and the CLI exits `FATAL_EXIT_CODE` (70).
 * - **`sign` signs what a client sends**: the path is taken as text and percent-encoded
 *   (`toUrlPath`) before it is signed and printed, unless `--encoded` says it already is.
 *
 * ## Races
 * - *Signal during the drain*: a second SIGTERM/SIGINT exits 130 at once; the whole drain is
 *   bounded by `SHUTDOWN_GRACE_MS` (exit 1 when it overruns).
 *
 * ## Events
 * Boot errors and the drain notice go to stderr; the proxy's own log is pino's, on stdout: pretty
 * on a terminal and JSON lines otherwise (`AP_LOG_FORMAT` overrides; `telemetry/logger.ts`).
 */

import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { FATAL_EXIT_CODE } from './actors/system.js';
import {
  type Config,
  ConfigError,
  configOrExit,
  configWarnings,
  loadConfig,
} from './config/index.js';
import { ENCODED_URL_PATH, toUrlPath } from './core/rawPath.js';
import { demoUrls, ensureDemoLibrary } from './demo.js';
import { sign } from './http/signature.js';
import {
  DEFAULT_INSPECTOR_HOST,
  DEFAULT_INSPECTOR_PORT,
  type InspectorRelay,
  startInspectorRelay,
} from './inspect.js';
import { type AudioProxy, CLOSE_DRAIN_MS, createAudioProxy, ListenError } from './proxy.js';
import { StoreError } from './store/types.js';
import { createLogger } from './telemetry/logger.js';
import { type ResolvedExecutable, resolveFfmpeg } from './workers/ffmpegPath.js';

/** Exit code for a refused command line (as for invalid configuration). */
const USAGE_EXIT_CODE = 2;
/** Exit code for a boot failure (busy port, unusable store) or an overrun shutdown. */
const FAILURE_EXIT_CODE = 1;
/** Exit code for a second signal during the drain (128 + SIGINT, the shell's convention). */
const SECOND_SIGNAL_EXIT_CODE = 130;

/** Bounded drain on SIGTERM/SIGINT; a second signal exits at once. */
export const SHUTDOWN_GRACE_MS = 25_000;

const TOP_USAGE = `usage: audio-proxy <command> [options]

commands:
  serve      run the proxy with the AP_* environment (production)
  demo       run on http://127.0.0.1:4000 over a built-in demo library (no config needed)
  inspect    the demo, with every actor streamed to a Stately inspector relay
  sign       print the signed path for "/<options>/<source>" using AP_KEY and AP_SALT

options:
  -h, --help     print this help (or, after a command, that command's help)
      --version  print the version

Run "audio-proxy <command> --help" for a command's options.
`;

interface Command {
  readonly usage: string;
  readonly options: NonNullable<Parameters<typeof parseArgs>[0]>['options'];
  readonly positionals: number;
}

const COMMANDS: Record<string, Command> = {
  serve: {
    usage: `usage: audio-proxy serve [--host IP] [--port N]

Runs the proxy with the AP_* environment (docs/configuration.md).

  --host IP   the public listener's address, as AP_BIND (default: every interface)
  --port N    the public listener's port, as AP_PORT (default: PORT, then 4000)
  -h, --help  print this help

A flag wins over its variable. SIGTERM or SIGINT drains: new requests answer 503, responses in
flight get up to ${CLOSE_DRAIN_MS / 1000} s; a second signal exits at once.
`,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
    },
    positionals: 0,
  },
  demo: {
    usage: `usage: audio-proxy demo [--port N]

Runs on http://127.0.0.1 over a demo library generated once with ffmpeg, with dev-only
"insecure" signatures, and prints URLs to try. Needs no configuration.

  --port N    the port, as AP_PORT (default: 4000)
  -h, --help  print this help
`,
    options: { port: { type: 'string' } },
    positionals: 0,
  },
  inspect: {
    usage: `usage: audio-proxy inspect [--inspector-port N] [--inspector-host IP] [--port N]

The demo, with every actor streamed to a Stately inspector relay (docs/inspect.md).

  --inspector-port N   the relay's port (default ${DEFAULT_INSPECTOR_PORT}; 0 picks a free one)
  --inspector-host IP  the relay's address (default ${DEFAULT_INSPECTOR_HOST}: this host only)
  --port N             the demo's port, as AP_PORT (default: 4000)
  -h, --help           print this help
`,
    options: {
      'inspector-port': { type: 'string' },
      'inspector-host': { type: 'string' },
      port: { type: 'string' },
    },
    positionals: 0,
  },
  sign: {
    usage: `usage: audio-proxy sign [--encoded] <path>

Prints the signed path for "/<options>/<source>" using AP_KEY and AP_SALT, e.g.
  audio-proxy sign '/f:opus/t:0:30/plain/local://My Song é.flac'

With several key/salt pairs (rotation), the first pair signs; every pair verifies.

The path is text: spaces, non-ASCII and every character a URL path cannot carry are
percent-encoded before signing (a "%" is a literal percent sign), and the printed path is what
a client sends.

  --encoded   the path is already percent-encoded: sign it as given
  -h, --help  print this help
`,
    options: { encoded: { type: 'boolean' } },
    positionals: 1,
  },
};

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/** Refuses the command line: one line naming the problem, a pointer to the help, exit 2. */
function refuse(command: string | undefined, message: string): never {
  const who = command ? `audio-proxy ${command}` : 'audio-proxy';
  process.stderr.write(`${who}: ${message}\nRun "${who} --help" for usage.\n`);
  process.exit(USAGE_EXIT_CODE);
}

/** A boot failure: one line (the stack only at debug level), exit 1. */
function bootFailure(command: string, error: unknown): never {
  let line: string;
  if (error instanceof ListenError) {
    const hint = (error.cause as NodeJS.ErrnoException | undefined)?.code === 'EADDRINUSE';
    line = `${error.message}${hint ? ' (the port is in use; choose another with --port or AP_PORT)' : ''}`;
  } else if (error instanceof ConfigError) {
    process.stderr.write(`audio-proxy ${command}: ${error.message}\n`);
    process.exit(USAGE_EXIT_CODE);
  } else if (error instanceof StoreError && error.code === 'ERR_STORE_BOOT') {
    line = `the variant store is unusable: ${error.message}`;
  } else {
    line = error instanceof Error ? error.message : String(error);
  }
  process.stderr.write(`audio-proxy ${command}: ${line}\n`);
  const level = process.env.AP_LOG_LEVEL;
  if ((level === 'debug' || level === 'trace') && error instanceof Error && error.stack) {
    process.stderr.write(`${error.stack}\n`);
  }
  process.exit(FAILURE_EXIT_CODE);
}

/** A port flag, checked like its variable (1..65535; the relay's also takes 0, "any free"). */
function portFlag(
  command: string,
  value: string | undefined,
  flag: string,
  min = 1,
): string | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65_535 || Number(value) < min) {
    refuse(command, `${flag} expects a port ${min}-65535, got "${value}"`);
  }
  return value;
}

function hostFlag(command: string, value: string | undefined, flag: string): string | undefined {
  if (value === undefined) return undefined;
  if (isIP(value) === 0) refuse(command, `${flag} expects an IP literal, got "${value}"`);
  return value;
}

function onSignals(close: () => Promise<void>) {
  let closing = false;
  const handler = (signal: NodeJS.Signals) => {
    if (closing) process.exit(SECOND_SIGNAL_EXIT_CODE);
    closing = true;
    process.stderr.write(
      `\n${signal}: draining: new requests answer 503, responses in flight get up to ` +
        `${CLOSE_DRAIN_MS / 1000} s, then the rest is cancelled (send again to exit at once)\n`,
    );
    const timer = setTimeout(() => process.exit(FAILURE_EXIT_CODE), SHUTDOWN_GRACE_MS);
    timer.unref();
    close().then(
      () => process.exit(0),
      () => process.exit(FAILURE_EXIT_CODE),
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

/** The CLI's fatal hook: the proxy has already closed; the process ends with code 70. */
function exitOnFatal(): void {
  process.exit(FATAL_EXIT_CODE);
}

/** The CLI's logger: `AP_LOG_FORMAT=auto` (the default) is pretty when stdout is a terminal. */
function cliLogger(config: Pick<Config, 'logLevel' | 'logFormat'>) {
  return createLogger(config.logLevel, {
    format: config.logFormat,
    isTTY: process.stdout.isTTY === true,
  });
}

async function serve(flags: { host?: string; port?: string }): Promise<void> {
  const env = {
    ...process.env,
    ...(flags.host !== undefined ? { AP_BIND: flags.host } : {}),
    ...(flags.port !== undefined ? { AP_PORT: flags.port } : {}),
  };
  const config = configOrExit(env);
  const logger = cliLogger(config);
  for (const warning of configWarnings(config, env)) logger.warn(warning);
  let proxy: AudioProxy;
  let addresses: { url: string; metricsUrl: string };
  try {
    proxy = await createAudioProxy({ config, logger, onFatal: exitOnFatal });
    addresses = await proxy.listen();
  } catch (error) {
    bootFailure('serve', error);
  }
  logger.info(
    { ...addresses, ffmpeg: proxy.ffmpeg.path, ffmpegSource: proxy.ffmpeg.source },
    'audio-proxy listening',
  );
  onSignals(() => proxy.close());
}

async function demo(command: string, port: string | undefined, relay?: InspectorRelay) {
  let ffmpeg: ResolvedExecutable;
  try {
    ffmpeg = resolveFfmpeg({ env: process.env });
  } catch (error) {
    relay?.stop();
    bootFailure(command, error);
  }
  if (ffmpeg.madeExecutable) {
    process.stdout.write(`Made the npm-shipped ffmpeg executable (chmod +x ${ffmpeg.path}).\n`);
  }
  process.stdout.write('Preparing the demo library (generated once with ffmpeg)…\n');
  const root = await ensureDemoLibrary(ffmpeg.path);
  const env = {
    AP_LOCAL_ROOT: root,
    AP_ALLOW_INSECURE: '1',
    AP_PORT: port ?? process.env.AP_PORT ?? '4000',
    AP_METRICS_PORT: process.env.AP_METRICS_PORT ?? '9568',
    AP_LOG_LEVEL: process.env.AP_LOG_LEVEL ?? 'warning',
    AP_LOG_FORMAT: process.env.AP_LOG_FORMAT,
    AP_MAX_CONCURRENCY: process.env.AP_MAX_CONCURRENCY,
    AP_FFMPEG_PATH: process.env.AP_FFMPEG_PATH,
    AP_FFPROBE_PATH: process.env.AP_FFPROBE_PATH,
    AP_ALLOW_ORIGIN: process.env.AP_ALLOW_ORIGIN, // e.g. '*' for examples/player.html from disk
    AP_WAITING_ROOM: process.env.AP_WAITING_ROOM,
  };
  let proxy: AudioProxy;
  let addresses: { url: string; metricsUrl: string };
  try {
    const config = loadConfig(env);
    proxy = await createAudioProxy({
      config,
      logger: cliLogger(config),
      onFatal: exitOnFatal,
      ...(relay ? { inspect: { url: relay.wsUrl } } : {}),
    });
    addresses = await proxy.listen({ host: '127.0.0.1' });
  } catch (error) {
    relay?.stop();
    bootFailure(command, error);
  }
  const { url, metricsUrl } = addresses;
  const missing = Object.entries(proxy.capabilities.missing());
  const lines = [
    '',
    `audio-proxy demo on ${url}  (ffmpeg: ${proxy.ffmpeg.path}, from ${proxy.ffmpeg.source})`,
    ...(missing.length === 0
      ? []
      : [
          `this ffmpeg cannot do ${missing.map(([o, parts]) => `${o} (${parts.join(', ')})`).join('; ')}: ` +
            'such URLs answer 501 and are not listed; a system ffmpeg (5.1 or newer) does everything',
        ]),
    `library: ${root}   metrics: ${metricsUrl}/metrics   health: ${url}/health`,
    `live state charts of every actor: ${metricsUrl}/debug/actors`,
    'dev-only "insecure" signatures are enabled. Try:',
    '',
    ...demoUrls(url, proxy.capabilities).map(
      (u) => `  ${u.label.padEnd(46)} curl -o out '${u.url}'`,
    ),
    '',
    ...(relay ? inspectorLines(relay) : []),
    'Ctrl-C to stop.',
    '',
  ];
  process.stdout.write(lines.join('\n'));
  onSignals(async () => {
    await proxy.close();
    relay?.stop();
  });
}

/** What to open, or run, to watch the charts (printed by `audio-proxy inspect`). */
function inspectorLines(relay: InspectorRelay): string[] {
  const tail =
    "import('@statelyai/inspect').then(({createWebSocketReceiver:r})=>{const n={};" +
    `r({server:'${relay.wsUrl}'}).subscribe((e)=>{` +
    "if(e.type==='@xstate.actor')n[e.sessionId]=e.name;" +
    "else if(e.type==='@xstate.snapshot')console.log(n[e.sessionId]??e.sessionId,JSON.stringify(e.snapshot.value))})})";
  return [
    `Stately inspector relay on ${relay.wsUrl}: every actor of this proxy streams to it.`,
    `  live charts (needs internet, frames stately.ai/inspect): open ${relay.viewerUrl}`,
    '  offline, from this directory: print every state change with',
    `    node -e "${tail}"`,
    '',
  ];
}

async function inspectCommand(flags: Record<string, string | undefined>): Promise<void> {
  const port = portFlag('inspect', flags['inspector-port'], '--inspector-port', 0);
  const host = hostFlag('inspect', flags['inspector-host'], '--inspector-host');
  const demoPort = portFlag('inspect', flags.port, '--port');
  let relay: InspectorRelay;
  try {
    relay = await startInspectorRelay({
      port: port === undefined ? DEFAULT_INSPECTOR_PORT : Number(port),
      host: host ?? DEFAULT_INSPECTOR_HOST,
    });
  } catch (error) {
    bootFailure('inspect', error);
  }
  await demo('inspect', demoPort, relay);
}

function signCommand(path: string, encoded: boolean): void {
  if (!path.startsWith('/')) refuse('sign', `the path must start with "/", got "${path}"`);
  if (encoded && !ENCODED_URL_PATH.test(path)) {
    const bad = [...path.replace(/%[0-9A-Fa-f]{2}/g, '')].find((c) => !ENCODED_URL_PATH.test(c));
    refuse(
      'sign',
      `--encoded: the path carries ${JSON.stringify(bad ?? '%')}, which a URL path cannot; drop --encoded to have it encoded`,
    );
  }
  const wire = encoded ? path : toUrlPath(path);
  // WHATWG clients (browsers, fetch) resolve `.`/`..` segments, `%2E` spellings too, before
  // sending: the path they send would not be the path signed.
  const dot = wire.split('/').find((seg) => /^(?:\.|%2e){1,2}$/i.test(seg));
  if (dot !== undefined) {
    refuse(
      'sign',
      `the path has a "${dot}" segment, which clients resolve before sending, so no request could match the signature`,
    );
  }
  const config = configOrExit(process.env);
  // With several pairs (rotation), `key` and `salt` are the first: the one that signs.
  if (!config.key || !config.salt) {
    process.stderr.write('audio-proxy sign: AP_KEY and AP_SALT must both be set\n');
    process.exit(USAGE_EXIT_CODE);
  }
  process.stdout.write(`/${sign(wire, config.key, config.salt)}${wire}\n`);
}

/** Parses `args` for `command` strictly; refuses by name on any problem. */
function parse(command: string, spec: Command, args: string[]) {
  try {
    const { values, positionals } = parseArgs({
      args,
      options: spec.options ?? {},
      allowPositionals: spec.positionals > 0,
      strict: true,
    });
    if (positionals.length > spec.positionals) {
      refuse(command, `unexpected argument "${positionals[spec.positionals]}"`);
    }
    return { values: values as Record<string, string | boolean | undefined>, positionals };
  } catch (error) {
    const e = error as { code?: string; message: string };
    const named = /'([^']+)'/.exec(e.message)?.[1];
    const messages: Record<string, string> = {
      ERR_PARSE_ARGS_UNKNOWN_OPTION: `unknown option ${named ?? e.message}`,
      ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL: `unexpected argument "${named ?? e.message}"`,
      ERR_PARSE_ARGS_INVALID_OPTION_VALUE: e.message.split('\n')[0]!.replace(/\.$/, ''),
    };
    const message = e.code === undefined ? undefined : messages[e.code];
    if (message === undefined) throw error;
    refuse(command, message);
  }
}

/** `-h`/`--help` anywhere before a `--`. */
function wantsHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).some((a) => a === '-h' || a === '--help');
}

async function main(argv: string[]): Promise<void> {
  const [first, ...rest] = argv;
  if (first === undefined) {
    process.stderr.write(TOP_USAGE);
    process.exit(USAGE_EXIT_CODE);
  }
  if (first === '-h' || first === '--help' || first === 'help') {
    const about = first === 'help' ? rest[0] : undefined;
    if (about !== undefined && !Object.hasOwn(COMMANDS, about)) {
      refuse(undefined, `unknown command "${about}"`);
    }
    process.stdout.write(about ? COMMANDS[about]!.usage : TOP_USAGE);
    process.exit(0);
  }
  if (first === '--version') {
    process.stdout.write(`${version()}\n`);
    process.exit(0);
  }
  if (first.startsWith('-')) refuse(undefined, `unknown option ${first.split('=')[0]}`);
  if (!Object.hasOwn(COMMANDS, first)) refuse(undefined, `unknown command "${first}"`);
  const spec = COMMANDS[first]!;
  if (wantsHelp(rest)) {
    process.stdout.write(spec.usage);
    process.exit(0);
  }
  const { values, positionals } = parse(first, spec, rest);
  switch (first) {
    case 'serve':
      await serve({
        host: hostFlag('serve', values.host as string | undefined, '--host'),
        port: portFlag('serve', values.port as string | undefined, '--port'),
      });
      break;
    case 'demo':
      await demo('demo', portFlag('demo', values.port as string | undefined, '--port'));
      break;
    case 'inspect':
      await inspectCommand(values as Record<string, string | undefined>);
      break;
    case 'sign':
      if (positionals[0] === undefined) refuse('sign', 'give the path to sign');
      signCommand(positionals[0], values.encoded === true);
      break;
  }
}

await main(process.argv.slice(2));
