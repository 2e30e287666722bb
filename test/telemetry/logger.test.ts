// The logger's two formats and who picks them (#16 item 4): `auto` is pretty only for a
// terminal, an explicit `json` or `pretty` wins either way, and a logger made without `isTTY`
// (the library's default) is JSON for `auto`. Pretty output is one line per record, the access
// log's included; JSON is one object per line. A render's stop is "render delivered" only when
// its outcome is `ok`.
import diagnostics from 'node:diagnostics_channel';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LOG_FORMATS } from '../../src/config/index.js';
import { RENDER_CHANNELS } from '../../src/telemetry/channels.js';
import {
  attachAccessLog,
  attachRenderLog,
  createLogger,
  resolveLogFormat,
} from '../../src/telemetry/logger.js';

/** A destination that keeps what it is given, colours stripped. */
function sink() {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes
  return { stream, text: () => text.replace(/\x1b\[[0-9;]*m/g, '') };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

const ACCESS = {
  endpoint: 'render',
  status: 200,
  method: 'GET',
  url: '/insecure/f:mp3/plain/local://a.wav?exp=1',
  ms: 12.345,
  bytes: 4321,
  cache: 'MISS',
  complete: true,
};

describe('resolveLogFormat', () => {
  it('auto is pretty on a terminal and JSON otherwise; json and pretty are kept', () => {
    expect(LOG_FORMATS).toEqual(['auto', 'json', 'pretty']);
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('json', false)).toBe('json');
    expect(resolveLogFormat('pretty', true)).toBe('pretty');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });
});

describe('createLogger', () => {
  it('writes JSON lines by default, and for auto when nobody says there is a terminal', async () => {
    for (const options of [{}, { format: 'auto' as const }, { format: 'json' as const }]) {
      const out = sink();
      const logger = createLogger('info', { ...options, destination: out.stream });
      logger.info({ port: 4000 }, 'audio-proxy listening');
      await tick();
      const lines = out.text().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({
        level: 30,
        service: 'audio-proxy',
        port: 4000,
        msg: 'audio-proxy listening',
      });
    }
  });

  it('pretty-prints for pretty, and for auto on a terminal: one line, level and message first', async () => {
    for (const options of [
      { format: 'pretty' as const },
      { format: 'auto' as const, isTTY: true },
    ]) {
      const out = sink();
      const logger = createLogger('info', { ...options, destination: out.stream });
      logger.info({ port: 4000 }, 'audio-proxy listening');
      logger.debug('below the level');
      await tick();
      const lines = out.text().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: audio-proxy listening \{"port":4000\}$/,
      );
      expect(() => JSON.parse(lines[0]!)).toThrow();
    }
  });

  it('maps warning to pino warn in both formats', async () => {
    const json = sink();
    createLogger('warning', { destination: json.stream }).info('dropped');
    createLogger('warning', { destination: json.stream }).warn('kept');
    const pretty = sink();
    createLogger('warning', { format: 'pretty', destination: pretty.stream }).warn('kept');
    await tick();
    expect(
      json
        .text()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).msg),
    ).toEqual(['kept']);
    expect(pretty.text()).toMatch(/WARN: kept\n$/);
  });
});

describe('the access log, pretty', () => {
  it('is one line per request, with the path but not its query', async () => {
    const out = sink();
    const detach = attachAccessLog(
      createLogger('info', { format: 'pretty', destination: out.stream }),
    );
    try {
      diagnostics.channel(RENDER_CHANNELS.httpRequest).publish(ACCESS);
      diagnostics.channel(RENDER_CHANNELS.httpRequest).publish({ ...ACCESS, complete: false });
    } finally {
      detach();
    }
    await tick();
    const lines = out.text().trim().split('\n');
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).toMatch(
        /INFO: access \{.*"path":"\/insecure\/f:mp3\/plain\/local:\/\/a\.wav\?<redacted>"/,
      );
      expect(line).toContain('"status":200');
      expect(line).toContain('"cache":"MISS"');
      expect(line).not.toContain('exp=1');
    }
    expect(lines[1]).toContain('"complete":false');
  });
});

describe('the render log', () => {
  it('says "render delivered" for an ok stop and "render cancelled" for a client that left', async () => {
    const out = sink();
    const detach = attachRenderLog(createLogger('info', { destination: out.stream }));
    try {
      const stop = diagnostics.channel(RENDER_CHANNELS.stop);
      stop.publish({ format: 'mp3', outcome: 'ok', bytes: 10, duration: 0.5 });
      stop.publish({ format: 'mp3', outcome: 'cancelled', bytes: 4, duration: 0.2 });
    } finally {
      detach();
    }
    await tick();
    const lines = out
      .text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toEqual([
      expect.objectContaining({ event: 'render.stop', outcome: 'ok', msg: 'render delivered' }),
      expect.objectContaining({
        event: 'render.stop',
        outcome: 'cancelled',
        msg: 'render cancelled',
      }),
    ]);
  });
});
