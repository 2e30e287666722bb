/**
 * Headless Chromium for the browser tests: Debian's `/usr/bin/chromium` driven by playwright-core
 * (no browser download), with the flags this machine kind needs (no sandbox as root, and no
 * background networking: the machine's closed network refuses it). `present` is false when the
 * package is missing; under `AP_TEST_STRICT=1` (set by `.ci/run`) that is an error instead.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Whether the browser tests can run here (throws under AP_TEST_STRICT=1 when they cannot). */
export function chromiumPresent(suite: string): boolean {
  const present = existsSync(CHROMIUM);
  if (!present && process.env.AP_TEST_STRICT === '1') {
    throw new Error(`AP_TEST_STRICT=1 but ${CHROMIUM} is absent (apt-get install chromium)`);
  }
  if (!present) console.warn(`skipping ${suite}: ${CHROMIUM} is absent`);
  return present;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
