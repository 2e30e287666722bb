/**
 * The trust store ffmpeg and ffprobe verify remote sources against.
 *
 * ffmpeg's TLS layer does not verify peers unless told to (`-tls_verify` defaults to 0), and a
 * statically linked ffmpeg (the npm fallback) may not know where the system keeps its roots. So
 * every remote input is opened with `-tls_verify 1` and an explicit `-ca_file`: the operator's
 * `AP_S3_CA_BUNDLE` when set, otherwise the first system bundle found here. With neither, the
 * flag alone stays, and ffmpeg falls back to its TLS library's defaults: it fails closed rather
 * than reading from a peer nobody vouched for.
 *
 * ## Invariants
 * - **The proxy's own HEAD and ffmpeg's GET trust the same roots.** Both come from the bundle
 *   named by `AP_S3_CA_BUNDLE`, or from the system.
 *
 * ## Races
 * None: the lookup happens once per process; a bundle installed later is seen after a restart.
 */
import { accessSync, constants } from 'node:fs';

/** Where Debian/Ubuntu, Fedora/RHEL, openSUSE and Alpine keep the concatenated root bundle. */
export const SYSTEM_CA_BUNDLES: readonly string[] = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/ca-bundle.pem',
  '/etc/ssl/cert.pem',
];

let cached: string | null | undefined;

/** The first readable system bundle, or `undefined` when this machine has none. */
export function systemCaBundle(): string | undefined {
  if (cached === undefined) {
    cached = null;
    for (const path of SYSTEM_CA_BUNDLES) {
      try {
        accessSync(path, constants.R_OK);
        cached = path;
        break;
      } catch {
        // not here: try the next location
      }
    }
  }
  return cached ?? undefined;
}

/** The bundle a remote input is verified against: the operator's, else the system's. */
export function caFileFor(operatorBundle: string | undefined): string | undefined {
  return operatorBundle ?? systemCaBundle();
}

/** `{ caFile }` when there is one, `{}` otherwise (exactOptionalPropertyTypes-friendly). */
export function caFileInput(caFile: string | undefined): { caFile?: string } {
  return caFile === undefined ? {} : { caFile };
}
