// examples/player.html in headless Chromium against a real proxy over the demo library: served
// from another origin (the proxy allows it with AP_ALLOW_ORIGIN) it plays the demo's Opus
// preview (loadeddata, readyState >= 2) and draws the f:peaks waveform (non-blank pixels); served
// on the proxy's own origin (a loopback server that forwards every other path to the proxy) with
// the waiting room on, its one render slot (of two) held by another listener's slow render, it
// shows "position 1" while the audio has not started, then plays when its turn comes. An
// uncached f:hls variant shows its duration before any segment is rendered and seeks to 80 %
// during its first play, through Chromium's own HLS and through hls.js (`hls=js`; the site serves
// the devDependency's node_modules/hls.js/dist/hls.min.js where the page's default relative path
// points, as a file:// open from the checkout finds it).
// Screenshot: test-artifacts/player.png.
import { chmod, copyFile, link, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDemoLibrary } from '../../src/demo.js';
import { resolveFfmpeg } from '../../src/workers/ffmpegPath.js';
import { chromiumPresent, launchChromium } from '../browser.js';
import { get, type Harness, startHarness, waitFor } from '../integration/harness.js';

/** A browser global, used only inside `page.evaluate` callbacks (the tsconfig has no DOM lib). */
declare const document: any;

const present = chromiumPresent('the player browser test');
const PAGE = join(process.cwd(), 'examples/player.html');
/** hls.js where `npm install` puts it, and the path the page asks for (relative to the page). */
const HLS_JS = join(process.cwd(), 'node_modules/hls.js/dist/hls.min.js');
const HLS_JS_PATH = '/node_modules/hls.js/dist/hls.min.js';
const ARTIFACTS = join(process.cwd(), 'test-artifacts');
/** The slow render: 8 s of a copy of the demo's FLAC, encoded at its own pace (ffmpeg `-re`). */
const SLOW_SOURCE = 'slow.flac';
const SLOW_PATH = `/insecure/f:mp3/t:0:8/plain/local://${SLOW_SOURCE}`;

let browser: Browser;
let h: Harness;
let site: Server;
let siteUrl = '';

/** Serves the page and hls.js; forwards every other request to the proxy (one origin for all). */
function startSite(): Promise<string> {
  const files: Record<string, readonly [string, string]> = {
    '/player.html': [PAGE, 'text/html; charset=utf-8'],
    [HLS_JS_PATH]: [HLS_JS, 'text/javascript; charset=utf-8'],
  };
  site = createServer((req, res) => {
    const file = files[(req.url ?? '').split('?')[0]!];
    if (file) {
      void readFile(file[0]).then((body) => {
        res.writeHead(200, { 'content-type': file[1] });
        res.end(body);
      });
      return;
    }
    const target = new URL(h.url);
    const forward = request(
      {
        host: target.hostname,
        port: target.port,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, host: target.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    res.on('close', () => forward.destroy());
    req.pipe(forward);
  });
  return new Promise((resolve) =>
    site.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(site.address() as AddressInfo).port}`),
    ),
  );
}

/** A local root with the demo library and the slow source, and an ffmpeg that is slow for it. */
async function library() {
  const ffmpeg = resolveFfmpeg({ env: process.env }).path;
  const demo = await ensureDemoLibrary(ffmpeg);
  const root = await mkdtemp(join(tmpdir(), 'ap-player-'));
  for (const file of ['music.flac', 'speech.wav']) {
    await link(join(demo, file), join(root, file)).catch(() =>
      copyFile(join(demo, file), join(root, file)),
    );
  }
  await copyFile(join(demo, 'music.flac'), join(root, SLOW_SOURCE));
  const script = join(root, 'ffmpeg-re.sh');
  await writeFile(
    script,
    // ffmpeg's argv names only its input descriptor (fd 3), so the file behind it decides.
    `#!/bin/sh\ncase "$(readlink /proc/$$/fd/3)" in *${SLOW_SOURCE}) exec '${ffmpeg}' -re "$@";; esac\nexec '${ffmpeg}' "$@"\n`,
  );
  await chmod(script, 0o755);
  return { root, script };
}

async function canvasInk(page: Page): Promise<number> {
  return page.evaluate(() => {
    const c = document.getElementById('wave');
    const data: Uint8ClampedArray = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i]! > 0) ink++;
    return ink;
  });
}

const audioReady = (page: Page) =>
  page.evaluate(() => document.getElementById('audio').readyState as number);

describe.skipIf(!present)('examples/player.html in Chromium', () => {
  beforeAll(async () => {
    siteUrl = await startSite();
    const { root, script } = await library();
    h = await startHarness(
      {
        AP_LOCAL_ROOT: root,
        AP_MAX_CONCURRENCY: '2', // the room holds one; the other serves ticketless requests
        AP_WAITING_ROOM: '1',
        AP_ALLOW_ORIGIN: siteUrl,
      },
      { ffmpegTarget: script },
    );
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    site?.closeAllConnections();
    site?.close();
    await h?.close();
  }, 30_000);

  it('from another origin: plays the demo preview and draws its waveform', async () => {
    const page = await browser.newPage();
    try {
      expect(
        await page.evaluate(() =>
          document.createElement('audio').canPlayType('audio/ogg; codecs=opus'),
        ),
      ).not.toBe('');
      await page.goto(`${siteUrl}/player.html?base=${encodeURIComponent(h.url)}`);
      await page.click('#play');
      await page.waitForFunction(() => document.body.dataset.peaks !== undefined, null, {
        timeout: 30_000,
      });
      expect(await audioReady(page)).toBeGreaterThanOrEqual(2);
      expect(await page.getAttribute('body', 'data-positions')).toBeNull(); // no room cross-origin
      expect(await canvasInk(page)).toBeGreaterThan(2_000);
    } finally {
      await page.close();
    }
  }, 40_000);

  for (const engine of ['native-hls', 'hls.js'] as const) {
    it(`an uncached f:hls variant (${engine}): its duration at once, and a seek to 80 % plays at once`, async () => {
      // The demo's 90 s music, never rendered in this run (cb: makes the key fresh).
      const path = `/insecure/f:hls/hls_len:2/cb:${engine}-${Date.now()}/plain/local://music.flac`;
      const force = engine === 'hls.js' ? '&hls=js' : '';
      const page = await browser.newPage();
      const scripts: string[] = [];
      page.on('request', (r) => {
        if (r.resourceType() === 'script') scripts.push(new URL(r.url()).pathname);
      });
      try {
        await page.goto(
          `${siteUrl}/player.html?base=${encodeURIComponent(h.url)}&path=${encodeURIComponent(path)}${force}`,
        );
        const started = Date.now();
        await page.click('#play');
        await page.waitForFunction(() => document.body.dataset.duration !== undefined, null, {
          timeout: 10_000,
        });
        const durationMs = Date.now() - started;
        expect(Number(await page.getAttribute('body', 'data-duration'))).toBeCloseTo(90, 0);
        expect(await page.getAttribute('body', 'data-engine')).toBe(engine);
        // hls.js came from the page's default path, and only on its own path.
        expect(scripts).toEqual(engine === 'hls.js' ? [HLS_JS_PATH] : []);
        expect(await page.textContent('#duration')).toBe('1:30');
        expect(await page.isEnabled('#seek')).toBe(true);
        // The seek bar, moved to 72 s: only the segment there is rendered, and it plays.
        const seeked = Date.now();
        await page.evaluate(() => {
          const seek = document.getElementById('seek');
          seek.value = '72';
          seek.dispatchEvent(new Event('input'));
          seek.dispatchEvent(new Event('change'));
        });
        await page.waitForFunction(
          () => {
            const a = document.getElementById('audio');
            return a.currentTime > 72.3 && !a.paused && a.readyState >= 3;
          },
          null,
          { timeout: 15_000 },
        );
        console.log(
          `f:hls in Chromium (${engine}): duration after ${durationMs} ms, seek to 80 % playing after ${Date.now() - seeked} ms`,
        );
        expect(
          Number(await page.evaluate(() => document.getElementById('seek').value)),
        ).toBeGreaterThan(72);
        await mkdir(ARTIFACTS, { recursive: true });
        const shot = engine === 'hls.js' ? 'player-hlsjs.png' : 'player-hls.png';
        await page.screenshot({ path: join(ARTIFACTS, shot), fullPage: true });
      } finally {
        await page.close();
      }
    }, 40_000);
  }

  it('on the proxy’s origin, with the room’s slot busy: shows position 1, then plays', async () => {
    // Another listener takes a ticket (ready at once: the slot is free) and starts a slow render.
    const joined = await get(h.url, `/api/v1/queue/join?path=${encodeURIComponent(SLOW_PATH)}`, {
      method: 'POST',
    });
    expect(joined.status).toBe(200);
    const cookie = String((joined.headers['set-cookie'] as string[])[0]).split(';')[0]!;
    let firstByte = false;
    let slowDone = false;
    const slow = get(h.url, SLOW_PATH, {
      headers: { cookie },
      onFirstByte: () => {
        firstByte = true;
      },
    });
    void slow.then(() => {
      slowDone = true;
    });
    await waitFor(() => firstByte, 15_000);

    const page = await browser.newPage();
    try {
      await page.goto(`${siteUrl}/player.html?base=${encodeURIComponent(siteUrl)}&start=1`);
      await page.waitForFunction(
        () => /position 1\b/.test(document.getElementById('status').textContent ?? ''),
        null,
        { timeout: 15_000 },
      );
      expect(await page.getAttribute('body', 'data-state')).toBe('waiting');
      expect(await audioReady(page)).toBe(0);
      expect(slowDone).toBe(false); // the slot is still taken
      await mkdir(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'player-waiting.png'), fullPage: true });

      await page.waitForFunction(() => document.body.dataset.peaks !== undefined, null, {
        timeout: 30_000,
      });
      expect((await slow).status).toBe(200);
      expect(await audioReady(page)).toBeGreaterThanOrEqual(2);
      expect(await canvasInk(page)).toBeGreaterThan(2_000);
      await page.waitForTimeout(1_500); // let the playhead move on the waveform
      await page.screenshot({ path: join(ARTIFACTS, 'player.png'), fullPage: true });
    } finally {
      await page.close();
    }
  }, 60_000);
});
