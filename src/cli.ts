/**
 * The `audio-proxy` command.
 *
 *   audio-proxy serve          run with the AP_* environment (production); listens on
 *                              AP_BIND:AP_PORT (every interface unless AP_BIND says otherwise)
 *   audio-proxy demo           run on 127.0.0.1:4000 over a generated demo library, no config
 *   audio-proxy inspect        the demo, every actor streamed to a Stately inspector relay
 *   audio-proxy sign <path>    print the signed URL path for `/<options>/<source>` (AP_KEY, AP_SALT)
 *
 * Configuration errors exit with code 2 and name every variable at fault.
 */

import { isIP } from 'node:net';
import { configOrExit, configWarnings, loadConfig } from './config.js';
import { demoUrls, ensureDemoLibrary } from './demo.js';
import { toRawPath } from './http/rawPath.js';
import { sign } from './http/signature.js';
import {
  DEFAULT_INSPECTOR_HOST,
  DEFAULT_INSPECTOR_PORT,
  type InspectorRelay,
  startInspectorRelay,
} from './inspect.js';
import { createAudioProxy } from './proxy.js';
import { createLogger } from './telemetry/logger.js';
import { resolveFfmpeg } from './workers/ffmpegPath.js';

const USAGE = `usage: audio-proxy <command>

  serve            run the proxy with the AP_* environment, listening on AP_BIND:AP_PORT
                   (AP_BIND unset: every interface; AP_BIND=127.0.0.1: this host only)
  demo             run on http://127.0.0.1:4000 over a built-in demo library (no config needed)
  inspect [--inspector-port N] [--inspector-host IP]
                   the demo, with every actor streamed to a Stately inspector relay on port N
                   (default ${DEFAULT_INSPECTOR_PORT}; 0 picks a free one) of IP (default
                   ${DEFAULT_INSPECTOR_HOST}: this host only); see docs/inspect.md
  sign <path>      print the signed path for "/<options>/<source>" using AP_KEY and AP_SALT
                   e.g. audio-proxy sign '/f:opus/t:0:30/plain/local://music.flac'
`;

/** Bounded drain on SIGTERM/SIGINT; a second signal exits at once. */
export const SHUTDOWN_GRACE_MS = 25_000;

function onSignals(close: () => Promise<void>) {
  let closing = false;
  const handler = (signal: NodeJS.Signals) => {
    if (closing) process.exit(130);
    closing = true;
    process.stderr.write(`\n${signal}: draining (send again to exit at once)\n`);
    const timer = setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS);
    timer.unref();
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

async function serve(): Promise<void> {
  const config = configOrExit(process.env);
  const logger = createLogger(config.logLevel);
  for (const warning of configWarnings(config, process.env)) logger.warn(warning);
  const proxy = await createAudioProxy({ config, logger });
  const { url, metricsUrl } = await proxy.listen();
  logger.info(
    { url, metricsUrl, ffmpeg: proxy.ffmpeg.path, ffmpegSource: proxy.ffmpeg.source },
    'audio-proxy listening',
  );
  onSignals(() => proxy.close());
}

async function demo(relay?: InspectorRelay): Promise<void> {
  const ffmpeg = resolveFfmpeg({ env: process.env });
  process.stdout.write('Preparing the demo library (generated once with ffmpeg)…\n');
  const root = await ensureDemoLibrary(ffmpeg.path);
  const env = {
    AP_LOCAL_ROOT: root,
    AP_ALLOW_INSECURE: '1',
    AP_PORT: process.env.AP_PORT ?? '4000',
    AP_METRICS_PORT: process.env.AP_METRICS_PORT ?? '9568',
    AP_LOG_LEVEL: process.env.AP_LOG_LEVEL ?? 'warning',
    AP_MAX_CONCURRENCY: process.env.AP_MAX_CONCURRENCY,
    AP_FFMPEG_PATH: process.env.AP_FFMPEG_PATH,
    AP_FFPROBE_PATH: process.env.AP_FFPROBE_PATH,
    AP_ALLOW_ORIGIN: process.env.AP_ALLOW_ORIGIN, // e.g. '*' for examples/player.html from disk
    AP_WAITING_ROOM: process.env.AP_WAITING_ROOM,
  };
  const config = loadConfig(env);
  const proxy = await createAudioProxy({
    config,
    ...(relay ? { inspect: { url: relay.wsUrl } } : {}),
  });
  const { url, metricsUrl } = await proxy.listen({ host: '127.0.0.1' });
  const lines = [
    '',
    `audio-proxy demo on ${url}  (ffmpeg: ${proxy.ffmpeg.path}, from ${proxy.ffmpeg.source})`,
    `library: ${root}   metrics: ${metricsUrl}/metrics   health: ${url}/health`,
    `live state charts of every actor: ${metricsUrl}/debug/actors`,
    'dev-only "insecure" signatures are enabled. Try:',
    '',
    ...demoUrls(url).map((u) => `  ${u.label.padEnd(46)} curl -o out '${u.url}'`),
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

/** `inspect [--inspector-port N] [--inspector-host IP]`: the relay, then the demo wired to it. */
async function inspectCommand(args: readonly string[]): Promise<void> {
  let port = DEFAULT_INSPECTOR_PORT;
  let host = DEFAULT_INSPECTOR_HOST;
  const flag = (arg: string, name: string, i: number) =>
    arg.startsWith(`--${name}=`)
      ? arg.slice(name.length + 3)
      : arg === `--${name}`
        ? args[i + 1]
        : undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const hostValue = flag(arg, 'inspector-host', i);
    if (hostValue !== undefined || arg === '--inspector-host') {
      if (arg === '--inspector-host') i++;
      if (hostValue === undefined || isIP(hostValue) === 0) {
        process.stderr.write(
          `${USAGE}\ninspect: expected --inspector-host <IP literal>, got ${arg}\n`,
        );
        process.exit(2);
      }
      host = hostValue;
      continue;
    }
    const value = flag(arg, 'inspector-port', i);
    if (arg === '--inspector-port') i++;
    if (value === undefined || !/^\d{1,5}$/.test(value) || Number(value) > 65_535) {
      process.stderr.write(`${USAGE}\ninspect: expected --inspector-port <0-65535>, got ${arg}\n`);
      process.exit(2);
    }
    port = Number(value);
  }
  const relay = await startInspectorRelay({ port, host });
  await demo(relay);
}

function signCommand(path: string | undefined): void {
  if (!path?.startsWith('/')) {
    process.stderr.write(`${USAGE}\nsign: give the path to sign, starting with "/"\n`);
    process.exit(2);
  }
  const config = configOrExit(process.env);
  if (!config.key || !config.salt) {
    process.stderr.write('sign: AP_KEY and AP_SALT must both be set\n');
    process.exit(2);
  }
  const raw = toRawPath(path);
  process.stdout.write(`/${sign(raw, config.key, config.salt)}${raw}\n`);
}

const [command, ...args] = process.argv.slice(2);
switch (command) {
  case 'serve':
    await serve();
    break;
  case 'demo':
    await demo();
    break;
  case 'inspect':
    await inspectCommand(args);
    break;
  case 'sign':
    signCommand(args[0]);
    break;
  default:
    process.stdout.write(USAGE);
    process.exit(command === undefined || command === 'help' || command === '--help' ? 0 : 2);
}
