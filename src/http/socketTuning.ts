/**
 * Caps how much unsent data the kernel holds for a connection streaming a render
 * (`TCP_NOTSENT_LOWAT`).
 *
 * Linux grows a socket's send buffer up to `net.ipv4.tcp_wmem`'s maximum (4 MiB by default) even
 * when the reader has stopped reading. A render shared by 200 slow listeners then makes the proxy
 * copy ~3.8 MiB per listener into the kernel while ffmpeg runs (~760 MiB, measured +4 s of proxy
 * CPU and a render 1.4-1.5× slower on 2 cores). With the watermark a socket stops being writable
 * once this much is queued unsent; the rest waits in Node as references to the shared backlog
 * chunks (no copy). In-flight data is still governed by TCP's window, so a fast reader is not
 * held back: the kernel is refilled as it drains.
 *
 * Node exposes no `setsockopt` for TCP, so this uses the optional `sockopt` package (N-API, with
 * a prebuilt binary for linux-x64). Without it, or off Linux, nothing is set and the host
 * setting `net.ipv4.tcp_notsent_lowat` does the same for every socket (docs/operations.md).
 *
 * ## Invariants
 * - **Best effort, never fatal**: a socket that cannot be tuned (closed meanwhile, no fd,
 *   unsupported platform) is served as is.
 * - **Loaded once**: the package is looked up on first use; `tuning()` says what is in force.
 */
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

/** Unsent bytes a client socket may hold in the kernel. */
export const NOTSENT_LOWAT_BYTES = 131_072; // two full-size loopback segments: enough to keep any link busy
/** Linux's numbers for the option (`netinet/tcp.h`); no other platform has them here. */
const IPPROTO_TCP = 6;
const TCP_NOTSENT_LOWAT = 25;

type SetSockOpt = (socket: Socket, level: number, name: number, value: number) => void;

let loaded: { readonly set: SetSockOpt } | null | undefined;

function setsockopt(): { readonly set: SetSockOpt } | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.platform !== 'linux') return loaded;
  try {
    const require = createRequire(import.meta.url);
    const mod = require('sockopt') as { setsockopt: SetSockOpt };
    if (typeof mod.setsockopt === 'function') loaded = { set: mod.setsockopt };
  } catch {
    // Optional dependency missing or its binary unusable: the host setting still applies.
  }
  return loaded;
}

/** What `tuneSocket` does on this process: the watermark it sets, or why it sets none. */
export function tuning():
  | { readonly notsentLowatBytes: number }
  | { readonly unavailable: string } {
  if (process.platform !== 'linux') return { unavailable: `platform ${process.platform}` };
  return setsockopt()
    ? { notsentLowatBytes: NOTSENT_LOWAT_BYTES }
    : { unavailable: 'the optional package sockopt is not installed' };
}

/**
 * Sets the unsent-data watermark on a client socket about to stream a render; true when set.
 * HIT responses are left alone: a 1 MiB file sent in 128 KiB refills cost 40 % more CPU per
 * request in `bench/hit.ts`, and a HIT has no encoder to compete with.
 */
export function tuneSocket(socket: Socket): boolean {
  const impl = setsockopt();
  if (impl === null) return false;
  try {
    impl.set(socket, IPPROTO_TCP, TCP_NOTSENT_LOWAT, NOTSENT_LOWAT_BYTES);
    return true;
  } catch {
    return false;
  }
}
