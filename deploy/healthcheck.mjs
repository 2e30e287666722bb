#!/usr/bin/env node
// The container's health check: GET /health on the public listener, exit 0 on a 200 and 1 on
// anything else (another status, no answer within 2 s, a refused connection). Slim images have
// no curl, so node asks. It reads the listener's address the way the proxy does: AP_PORT, else
// PORT, else 4000; AP_BIND when it names one address, loopback when it is a wildcard or unset.
// During a drain /health answers 503, so a stopping container reads as unhealthy: it is.
const port = process.env.AP_PORT?.trim() || process.env.PORT?.trim() || '4000';
const bind = process.env.AP_BIND?.trim() ?? '';
const wildcard = bind === '' || bind === '0.0.0.0' || bind === '::' || bind === '[::]';
const host = wildcard
  ? '127.0.0.1'
  : bind.includes(':')
    ? `[${bind.replace(/^\[|\]$/g, '')}]`
    : bind;

try {
  const response = await fetch(`http://${host}:${port}/health`, {
    signal: AbortSignal.timeout(2_000),
  });
  process.exit(response.status === 200 ? 0 : 1);
} catch {
  process.exit(1);
}
